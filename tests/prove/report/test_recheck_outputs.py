"""What a re-check and a run print and write (issue 64, items 4 to 10), on evidence the probe's format holds,
judged by real Spark: a re-check writes nothing outside the evidence it re-checks (or its --report) and prints
no path that is not there; findings that rows not read could have made are inconclusive, not errors; each
number of the terminal's summary is the one report.json holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support import ROOT, histories as H
from pubsubguard.validation import job
from pubsubguard.validation.evidence import seal
from pubsubguard.validation.evidence.records import DeclaredSubscription, RunInfo

ORDERED = DeclaredSubscription("orders-ordered", "orders", ordering=True)
EOD = DeclaredSubscription("orders-eod", "orders", exactly_once=True, ack_deadline_s=10)
PLAIN = DeclaredSubscription("payments-plain", "payments")


def evidence(directory: Path, seed: int, subscriptions=(ORDERED, PLAIN), **parameters) -> Path:
    """A sealed evidence directory of a legal generated run, with `parameters` added to its run.json."""
    history = H.generate(list(subscriptions), H.Workload(keys=3, messages_per_key=5), seed)
    history.write(directory)
    info = RunInfo.read(directory)
    info.parameters.update(parameters)
    info.write(directory)
    seal.seal(directory, info.run_id)
    return directory


def paths_in(text: str) -> list[str]:
    """The absolute paths a text names (as the terminal prints them: whitespace, parentheses and `;` end one)."""
    return [p.rstrip(".,:") for p in re.findall(r"(?<![\w.])(/[^\s;()'\"]+)", text)]


def test_a_recheck_writes_inside_its_evidence_and_prints_no_path_that_is_not_there(spark, tmp_path, capsys):
    runs = tmp_path / "runs"
    gone = tmp_path / "gone"  # the original run's folder, no longer there
    recorded = {"declared_source": {"kind": "plan", "location": str(gone / "plan.json")},
                "evidence_dir": str(gone / "report" / "evidence"),
                "observations": [f"the Pub/Sub client library in sub-1 logged 2 warnings/errors (commonest: 'x' x2); "
                                 f"full text: {gone / 'report' / 'evidence' / 'client-log-sub-1.txt'}",
                                 f"the Pub/Sub client library logged 3 warnings/errors during the conformance "
                                 f"scenarios (commonest: 'y' x3); full text: {gone / 'report' / 'client-log-conformance.txt'}"]}
    first = evidence(runs / "ev-a", 1, **recorded)
    (first / "client-log-sub-1.txt").write_text("x\nx\n")  # the evidence's own log: in the copy, where it is read
    seal.seal(first, RunInfo.read(first).run_id)
    second = evidence(runs / "ev-b", 2, **recorded)
    capsys.readouterr()

    code = job.main(["--from-evidence", str(first), "--no-progress"], spark=spark)
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert sorted(p.name for p in runs.iterdir()) == ["ev-a", "ev-b"]  # nothing beside the evidence
    report = json.loads((first / "recheck" / "report.json").read_text())
    assert f"report: {first / 'recheck' / 'report.html'}" in out
    for path in paths_in(out):
        assert Path(path).exists(), (path, out)
    # the evidence's own file named where it is read; the one the run wrote beside its report, by its name
    observations = " ".join(report["observations"])
    assert str(first / "client-log-sub-1.txt") in observations
    assert "client-log-conformance.txt, not in this evidence" in observations
    for path in paths_in(observations):
        assert Path(path).exists(), (path, observations)
    assert "plan.json (the run's, not here)" in out

    # a re-check of a sibling writes its own report; the first one's stays as it was
    assert job.main(["--from-evidence", str(second), "--no-progress"], spark=spark) in (0, 1)
    assert sorted(p.name for p in runs.iterdir()) == ["ev-a", "ev-b"]
    assert json.loads((first / "recheck" / "report.json").read_text()) == report
    assert json.loads((second / "recheck" / "report.json").read_text())["run_id"] != report["run_id"]
    # the re-check's report inside the evidence is no part of it: the seal still holds the evidence whole
    assert job.main(["--from-evidence", str(first), "--no-progress"], spark=spark) == code
    assert json.loads((first / "recheck" / "report.json").read_text())["evidence_integrity"]["complete"]


def planted_run(directory: Path, seed: int = 3) -> tuple[Path, dict]:
    """Evidence of a run with one planted anomaly (schedule entry 0 dropped a delivery of PLAIN: a `lost` message),
    an advisory drift nothing planted on a dead-letter drain, and the conformance scenarios' results."""
    from support.reports import conformance

    legal = H.generate([ORDERED, PLAIN], H.Workload(keys=3, messages_per_key=5, fault_rate=0.0, duplicate_rate=0.0), seed)
    message = next(p for p in legal.publishes if p["topic"] == PLAIN.topic)
    dropped = legal.copy()
    dropped.deliveries = [d for d in dropped.deliveries if not (d["subscription"] == PLAIN.name
                                                                and (d["key"], d["seq"]) == (message["key"], message["seq"]))]
    dropped.write(directory)
    info = RunInfo.read(directory)
    planted = {"time_us": message["publish_time_us"] + 1000, "entry": 0, "kind": "drop_delivery", "planted": True,
               "rpc": "StreamingPull", "subscription": PLAIN.name, "topic": None, "client": "sub-0:subscriber",
               "key": message["key"], "seq": message["seq"], "message_ids": [message["message_id"]], "drain": None,
               "detail": "delivery withheld from the subscriber and acked upstream (OK)"}
    drift = {"subscription": "payments-dead-drain", "kind": "config_drift", "guarantee": "config", "severity": "advisory",
             "form": "differs", "key": None, "seq": None, "message_id": None,
             "drift": {"path": "projects/p/subscriptions/payments-dead-drain", "setting": "retention_seconds",
                       "declared": 2678400, "actual": 604800},
             "evidence": json.dumps([{"setting": "retention_seconds", "declared": 2678400, "actual": 604800}])}
    info.parameters.update(
        conformance=conformance({"ordered-nack-redelivers-in-order"}), config_drift=[drift],
        nemesis={"source": "schedule.json", "seed": "s", "applied": [planted],
                 "faults": [{"index": 0, "kind": "drop_delivery", "subscription": PLAIN.name, "key": message["key"],
                             "seq": message["seq"]}]})
    info.write(directory)
    seal.seal(directory, info.run_id)
    return directory, planted


def rechecked(spark, capsys, run: Path, make) -> tuple[str, dict]:
    """`make(run/evidence)`, re-checked with its report in `run`: (the terminal's summary, report.json)."""
    make(run / "evidence")
    capsys.readouterr()
    job.main(["--from-evidence", str(run / "evidence"), "--report", str(run), "--no-progress"], spark=spark)
    return capsys.readouterr().out, json.loads((run / "report.json").read_text())


def why_section(html: str) -> str:
    return html.split('<h2 id="why">', 1)[1].split("<h2", 1)[0]


def test_a_planted_finding_is_said_planted_everywhere_and_unplanted_ones_are_counted(spark, tmp_path, capsys):
    from pubsubguard.validation import selftest

    run = tmp_path / "run"
    out, report = rechecked(spark, capsys, run, planted_run)
    lost = report["subscriptions"][PLAIN.name]["findings"]["lost"]
    assert [f["planted_by"] for f in lost] == [["schedule entry 0 (drop_delivery)"]]
    # report.json's why: the cause behind the guarantee is the planted entry, not "unexplained"
    item = next(i for i in report["explanations"]["guarantees"] if i["subscription"] == PLAIN.name)
    assert [c["caused_by"] for c in item["causes"]] == [["planted by schedule entry 0 (drop_delivery)"]]
    assert "unexplained" not in item["causes"][0]["action"]
    # report.html's "Why" and the terminal's what-to-do line say it the same way
    html = (run / "report.html").read_text()
    why = why_section(html)
    line = why.split(f"<b>{PLAIN.name}</b>", 1)[1].split("</li>", 1)[0]
    assert "planted by schedule entry 0 (drop_delivery)" in line and "unexplained" not in line
    todo = [t for t in out.splitlines() if t.startswith("what to do (") and f"{PLAIN.name}.completeness" in t]
    assert len(todo) == 1 and "planted by schedule entry 0 (drop_delivery)" in todo[0] and "unexplained" not in todo[0]
    # the self-test's count: the unplanted advisory is named and counted, not "0 unplanted findings"
    code, lines = selftest.summary(selftest.judge(run))
    advisories = [f for f in selftest.findings_of(report)
                  if f["severity"] == "advisory" and not f.get("planted_by") and not f.get("explained_by")]
    assert advisories and code == 0
    assert lines[-1] == f"self-test: planted 1/1 found, 0 unplanted errors, {len(advisories)} unplanted advisor" + \
        ("y" if len(advisories) == 1 else "ies")
    assert sum(line.startswith("self-test: UNPLANTED advisory ") for line in lines) == len(advisories)


def test_findings_that_rest_on_rows_not_read_are_inconclusive_not_errors(spark, tmp_path, capsys):
    import jsonschema

    from support.reports import SCHEMA

    history = H.generate([ORDERED, PLAIN], H.Workload(keys=3, messages_per_key=5), 4)
    directory = H.write_evidence(tmp_path / "evidence", history.run_id, history.subscriptions, history.publish_table(),
                                 history.delivery_table(), row_group_size=10)
    part = sorted((directory / "publishes").glob("part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:100])  # truncated: its publish rows are not read
    capsys.readouterr()
    code = job.main(["--from-evidence", str(directory), "--report", str(tmp_path / "re"), "--partial-evidence",
                     "--no-progress"], spark=spark)
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "re" / "report.json").read_text())
    jsonschema.validate(report, SCHEMA)
    affected = report["evidence_integrity"]["affected_subscriptions"]
    assert code == 1 and report["verdict"] == "inconclusive" and affected
    findings = [f for name in affected for items in report["subscriptions"][name]["findings"].values() for f in items]
    unpublished = [f for f in findings if f["kind"] == "unexpected" and f.get("form") == "unpublished"]
    assert unpublished, "the rows not read make deliveries of messages whose publish was not read"  # else no test
    assert {f["severity"] for f in findings if f["guarantee"] != "endpoint_pinning"} == {"inconclusive"}
    assert not [line for line in out.splitlines() if "unexpected" in line and ", error" in line], out
    assert "1 file not as sealed" in report["verdict_reason"]
    for item in report["explanations"]["guarantees"]:
        assert item["status"] == "inconclusive"
        assert all("no conformance scenario covers it" not in c["action"] for c in item["causes"]), item


def test_the_publishers_bound_is_one_number_in_the_readme_and_both_helps(capsys):
    from pubsubguard import cli
    from pubsubguard.validation.probe.drain_clock import IN_FLIGHT_PAIRS
    from pubsubguard.validation.probe.publisher import IN_FLIGHT

    said = {"README.md": (ROOT / "README.md").read_text()}
    for command in ("run", "verify"):
        assert cli.main([command, "--help"]) == 0
        said[f"{command} --help"] = capsys.readouterr().out
    for where, text in said.items():
        flat = " ".join(text.split())
        assert f"at most {IN_FLIGHT_PAIRS:,} message-subscription pairs published and not settled over all publisher " \
               f"tasks, and {IN_FLIGHT:,} publishes unanswered per task" in flat, where


def summary_run(directory: Path) -> Path:
    """Evidence whose terminal summary has every kind of number: a planted `lost` (schedule entry 0), two
    nacked messages never delivered again (unsettled on ORDERED; the drain's tally at its end counted one), an
    advisory drift of a drain not probed, a stream kill applied once (entry 1) and one never applied 11 times
    (entry 2), and a client library's single warning."""
    directory, planted = planted_run(directory, seed=5)
    info = RunInfo.read(directory)
    deliveries = H.History(info.run_id, [], [], []).delivery_table()  # the schema
    import pyarrow.parquet as pq

    parts = sorted((directory / "deliveries").glob("part-*.parquet"))
    rows = [r for p in parts for r in pq.read_table(p).to_pylist()]
    nacked = [r for r in rows if r["subscription"] == ORDERED.name and r["seq"] == 4][:2]  # the keys' last
    for row in nacked:
        row.update(action="nack", ack_result="success")
    for p in parts:
        p.unlink()
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows, schema=deliveries.schema), directory / "deliveries" / "part-00000.parquet")
    (directory / "client-log-sub-1.txt").write_text("WARNING google.api_core.bidi: Background thread did not exit.\n")
    kill = {**planted, "entry": 1, "kind": "kill_stream", "planted": False, "key": None, "seq": None, "message_ids": [],
            "subscription": ORDERED.name, "detail": "stream cancelled (UNAVAILABLE)"}
    missed = [{**kill, "entry": 2, "time_us": kill["time_us"] + i, "detail": f"NOT applied: no open stream of "
               f"{ORDERED.name} at +{3 + 4 * i}.0s"} for i in range(11)]
    nemesis = info.parameters["nemesis"]
    nemesis["applied"] += [kill, *missed]
    nemesis["faults"] += [{"index": 1, "kind": "kill_stream", "subscription": ORDERED.name, "after_s": 1},
                          {"index": 2, "kind": "kill_stream", "subscription": ORDERED.name, "after_s": 3, "every_s": 4}]
    info.parameters.update(drain={"ended": "stuck", "unsettled": {ORDERED.name: 1}},
                           observations=[f"the Pub/Sub client library in sub-1 logged 1 warning/error (commonest: "
                                         f"'x' x1); full text: {directory / 'client-log-sub-1.txt'}"])
    info.write(directory)
    seal.seal(directory, info.run_id)
    return directory


def test_each_number_of_the_terminal_summary_is_the_one_report_json_holds(spark, tmp_path, capsys):
    run = tmp_path / "run"
    out, report = rechecked(spark, capsys, run, summary_run)
    lines = out.splitlines()
    subs = report["subscriptions"]
    findings = {f["id"]: f for s in subs.values() for items in s["findings"].values() for f in items}
    findings.update({f["id"]: f for f in report["config_drift"]})

    # the headline
    standing = [0, 0, 0]
    for sub in subs.values():
        statuses = set(sub["guarantees"].values())
        standing[0 if "violated" in statuses else 1 if "inconclusive" in statuses else 2] += 1
    assert f"{len(subs)} subscriptions: {standing[0]} with a guarantee violated, {standing[1]} inconclusive, " \
           f"{standing[2]} holding every tested guarantee" in lines
    # the table's findings column, per subscription and kind
    for name, sub in subs.items():
        row = next(line for line in lines if line.startswith(f"│ {name} "))
        for kind, items in sub["findings"].items():
            assert f"{kind}×{len(items)}" in row, (name, kind, row)
    # the explanation lines: per subscription and kind, the findings report.json holds (plumbing's drift too)
    said: dict[tuple, int] = {}
    for line in lines:
        match = re.fullmatch(r"  (\S+): ([\d,]+) ([a-z_]+)( \(.*?\))?, (error|advisory|inconclusive): .*", line)
        if match:
            key = (match.group(1), match.group(3))
            said[key] = said.get(key, 0) + int(match.group(2).replace(",", ""))
    held: dict[tuple, int] = {}
    for f in findings.values():
        held[(f["subscription"], f["kind"])] = held.get((f["subscription"], f["kind"]), 0) + 1
    assert said == held
    # unsettled messages: the terminal accounts for every one the checks count (the verdict's number)
    unsettled = {n: s["figures"]["published"] - s["figures"]["settled"] for n, s in subs.items() if s["figures"]}
    assert unsettled[ORDERED.name] == 2  # else this proves nothing: the drain's tally said 1
    assert "violated" not in subs[ORDERED.name]["guarantees"].values()
    never: dict[str, int] = {}
    for line in lines:
        match = re.fullmatch(r"  (\S+): ([\d,]+) never settled.*", line)
        if match:
            never[match.group(1)] = never.get(match.group(1), 0) + int(match.group(2).replace(",", ""))
    inconclusive = {n for n, s in subs.items() if "inconclusive" in s["guarantees"].values()}
    assert never == {n: c for n, c in unsettled.items() if c and n in inconclusive}, out
    # every schedule entry, once: applied N times, or not and why, as report.json's rows say
    applied = report["parameters"]["nemesis"]["applied"]
    for entry in report["parameters"]["nemesis"]["faults"]:
        line = [t for t in lines if t.startswith(f"schedule entry {entry['index']} ({entry['kind']}")]
        assert len(line) == 1, (entry, out)
        done = sum(r["entry"] == entry["index"] and not r["detail"].startswith("NOT applied") for r in applied)
        refused = sum(r["entry"] == entry["index"] and r["detail"].startswith("NOT applied") for r in applied)
        assert (f"applied {done} time" in line[0]) == bool(done) and (f"not applied {refused} times" in line[0]) == bool(refused)
    # counts read as English: no "1 warnings", "1 stream kills", "1 files"
    assert not re.findall(r"(?<![\d,.])1 (?:[a-z/-]+ )?(?:warnings|errors|stream kills|files|entries|times|kills)\b", out), out
    assert "under 1 stream kill" in out
    from pubsubguard.validation.conformance.beside import library_note
    from pubsubguard.validation.client_logs import client_log_summary

    assert [o.split(" (commonest")[0] for o in client_log_summary(run / "evidence")] == \
        ["the Pub/Sub client library in sub-1 logged 1 warning/error"]
    assert library_note("scenarios", {"records": 1, "commonest": [("x", 1)], "file": "f"}).startswith(
        "the Pub/Sub client library logged 1 warning/error during")
    # the first screen: the verdict and what to do before any observation; the client's internals folded
    first = [i for i, t in enumerate(lines) if t.startswith("observed:")]
    assert lines.index(next(t for t in lines if t.startswith("verdict: "))) < min(first)
    assert max(i for i, t in enumerate(lines) if t.startswith("what to do (")) < min(first)
    assert not any(t.startswith("observed: the Pub/Sub client library") for t in lines)
    assert any(t.startswith("observed: 1 more observation of the probe's own clients") for t in lines), out
