"""Evidence nothing can lose or mix (issue 37), on real evidence written by the probe (real emulator, real
Spark): the seal a run writes last; `--from-evidence` naming every missing, extra, truncated or changed
file in one line (exit 2); `--partial-evidence` never claiming `holds` from incomplete rows; unsealed and
damaged inputs; three rehearsals on one apply giving one verdict; one run per directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from pubsubguard.core.apply import apply_plan
from pubsubguard.core.project import project_root
from pubsubguard.validation import job
from pubsubguard.validation.evidence import locks, seal
from pubsubguard.validation.checks import sorted_input
from pubsubguard.validation.checks.guarantees import SETTLED_BY_DELIVERIES
from support.estates import ONE_TOPIC_STACK, make_estate

pytestmark = pytest.mark.emulator

# A topic that retains messages a day (as the estate): a new subscription on the emulator gets
# the retained backlog, i.e. the earlier runs' messages, unless the probe seeks its twins.
RETAINING_STACK = ONE_TOPIC_STACK.replace("      - name: {t}\n", "      - name: {t}\n        message_retention: 86400\n") + \
    """          - name: {t}-ordered
            ordering: true
            ack_deadline_seconds: 10
          - name: {t}-eod
            exactly_once: true
            ack_deadline_seconds: 10
          - name: {t}-plain
            ack_deadline_seconds: 10
"""
SCHEMA = json.loads((project_root() / "docs" / "schemas" / "report.schema.json").read_text())


def verify(spark, *arguments: str) -> int:
    return job.main([*arguments, "--no-progress"], spark=spark)


def probe_run(spark, plan_file: Path, report: Path) -> int:
    # No fault: the emulator's answer to a nack on an ordered subscription (redelivered alone: out_of_order,
    # docs/emulator.md) varies from run to run, and this run's verdict must not
    return verify(spark, "--plan", str(plan_file), "--target", "emulator", "--keys", "3", "--messages-per-key", "5",
                  "--drain-timeout", "40", "--report", str(report))


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "Py4J" not in err and "at org.apache" not in err and "unexpected error" not in err
    return lines[0]


@pytest.fixture(scope="module")
def rehearsals(spark, emulator, tmp_path_factory):
    """Three verify runs on one `apply --emulator` of a retaining topic: (plan file, [(exit code, report dir)])."""
    tmp_path = tmp_path_factory.mktemp("rehearsals")
    plan_file, plan, _ = make_estate(tmp_path, RETAINING_STACK)
    apply_plan(plan)
    runs = []
    for n in range(3):
        report = tmp_path / f"run-{n}"
        runs.append((probe_run(spark, plan_file, report), report))
    return plan_file, runs


@pytest.fixture
def evidence(rehearsals, tmp_path) -> Path:
    """A copy of the first run's sealed evidence (its kept sorted input left out)."""
    copy = tmp_path / "evidence"
    shutil.copytree(rehearsals[1][0][1] / "evidence", copy, ignore=shutil.ignore_patterns(sorted_input.DIRNAME))
    return copy


def report_of(directory: Path) -> dict:
    return json.loads((directory / "report.json").read_text())


def test_three_rehearsals_on_one_apply_give_the_first_runs_verdict(rehearsals):
    _, runs = rehearsals
    reports = [report_of(report) for _, report in runs]
    for (code, _), report in zip(runs, reports):
        assert code == report["exit_code"]
        # seeked to the run's start; where the target refuses Seek (the emulator, ordered subscriptions), the
        # messages published before the run are acknowledged by pull before the probe publishes, and said so
        seeks = report["parameters"]["twins_seek"]
        assert all(seek["result"] in ("seeked", "acknowledged") for seek in seeks), seeks
        refused = any(seek["result"] == "acknowledged" for seek in seeks)
        assert refused == any("were acknowledged before the probe published" in o for o in report["observations"])
        for name, sub in report["subscriptions"].items():
            assert "unexpected" not in sub["findings"], (name, sub["findings"].get("unexpected", [])[:1])
        assert not any("retained backlog" in o for o in report["observations"]), report["observations"]
    assert any(seek.get("acknowledged", 0) > 0 for report in reports[1:] for seek in report["parameters"]["twins_seek"]), \
        "the later runs' twins found the earlier runs' retained messages"  # else this test proves nothing
    first = reports[0]
    assert first["verdict"] == "holds", first["verdict_reason"]  # so `holds` below is a claim the seal must back
    for later in reports[1:]:
        assert later["verdict"] == first["verdict"]
        assert {n: s["guarantees"] for n, s in later["subscriptions"].items()} == \
            {n: s["guarantees"] for n, s in first["subscriptions"].items()}


def test_a_run_seals_its_evidence_last_and_a_re_check_reads_exactly_it(spark, rehearsals, evidence, tmp_path, capsys):
    document = json.loads((evidence / seal.SEAL).read_text())
    names = {entry["path"] for entry in document["files"]}
    assert "run.json" in names and any(n.startswith("deliveries/part-") for n in names)
    assert any(n.startswith("publishes/part-") for n in names)
    assert names == set(seal.sealable(evidence))  # every file the run left, nothing else
    assert document["rows"]["deliveries"] == sum(e.get("rows", 0) for e in document["files"] if e["path"].startswith("deliveries/"))
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"))
    result = report_of(tmp_path / "re")
    original = report_of(rehearsals[1][0][1])
    assert code == result["exit_code"] == original["exit_code"]
    assert result["evidence_integrity"]["complete"] and result["evidence_integrity"]["problems"] == []
    assert result["evidence_integrity"]["rows_read"] == document["rows"]
    assert {n: s["guarantees"] for n, s in result["subscriptions"].items()} == \
        {n: s["guarantees"] for n, s in original["subscriptions"].items()}
    assert "pubsubguard verify" in capsys.readouterr().out  # the summary on stdout with --no-progress


def largest_part(evidence: Path, log: str = "deliveries") -> Path:
    return max((evidence / log).glob("part-*.parquet"), key=lambda p: p.stat().st_size)


@pytest.mark.parametrize("damage,says", [
    ("delete", "missing deliveries/part-"),
    ("truncate", "truncated deliveries/part-"),
    ("zero", "same size, other content"),
    ("foreign", "extra deliveries/part-foreign.parquet (not sealed: not read)"),
])
def test_a_damaged_part_is_named_in_one_line_and_exit_2(spark, evidence, tmp_path, capsys, damage, says):
    part = largest_part(evidence)
    size = part.stat().st_size
    if damage == "delete":
        part.unlink()
    elif damage == "truncate":
        part.write_bytes(part.read_bytes()[:size // 2])
    elif damage == "zero":
        part.write_bytes(bytes(size))
    else:
        shutil.copy(project_root() / "tests" / "data" / "dev-run" / "deliveries" / "part-00000.parquet",
                    evidence / "deliveries" / "part-foreign.parquet")
    capsys.readouterr()
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"))
    line = one_line(capsys.readouterr().err)
    assert code == 2, line
    assert says in line and "the evidence does not match its seal" in line and "--partial-evidence" in line
    if damage != "foreign":
        assert part.relative_to(evidence).as_posix() in line
    assert not (tmp_path / "re" / "report.json").exists()


def test_partial_evidence_judges_what_is_there_and_never_holds_from_lost_rows(spark, evidence, tmp_path, capsys):
    document = json.loads((evidence / seal.SEAL).read_text())
    part = largest_part(evidence)
    lost = next(e for e in document["files"] if e["path"] == part.relative_to(evidence).as_posix())
    part.unlink()
    shutil.copy(project_root() / "tests" / "data" / "dev-run" / "deliveries" / "part-00000.parquet",
                evidence / "deliveries" / "part-foreign.parquet")  # extra: never read
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"), "--partial-evidence")
    result = report_of(tmp_path / "re")
    assert code == result["exit_code"] == 1
    integrity = result["evidence_integrity"]
    assert not integrity["complete"] and integrity["sealed"]
    assert any(p.startswith(f"missing {lost['path']}") for p in integrity["problems"])
    assert any(p.startswith("extra deliveries/part-foreign.parquet") for p in integrity["problems"])
    assert sorted(integrity["affected_subscriptions"]) == sorted(lost["about"]) != []
    assert integrity["rows_read"]["deliveries"] == document["rows"]["deliveries"] - lost["rows"]
    for name in lost["about"]:
        for guarantee in SETTLED_BY_DELIVERIES:
            assert result["subscriptions"][name]["guarantees"][guarantee] in ("inconclusive", "not_tested"), (name, guarantee)
    assert any(o.startswith("evidence incomplete (--partial-evidence): missing ") for o in result["observations"])
    causes = [c for item in result["explanations"]["guarantees"] for c in item["causes"]]
    assert any(c["kind"] == "evidence_incomplete" for c in causes)
    jsonschema.validate(result, SCHEMA, format_checker=jsonschema.FormatChecker())
    assert "files not as sealed" in (tmp_path / "re" / "report.html").read_text()
    # no row of the foreign part was read: nothing of run dev-run is judged
    assert all("unexpected" not in s["findings"] for s in result["subscriptions"].values())


def test_a_truncated_run_json_or_seal_is_one_line_naming_it(spark, evidence, tmp_path, capsys):
    for name in ("run.json", seal.SEAL):
        saved = (evidence / name).read_bytes()
        (evidence / name).write_bytes(saved[:len(saved) // 2])
        capsys.readouterr()
        code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"), "--partial-evidence")
        line = one_line(capsys.readouterr().err)
        assert code == 2 and f"{evidence / name}: damaged" in line and "truncated at line" in line, line
        (evidence / name).write_bytes(saved)
    # a run.json that parses but is not the sealed one: refused even with --partial-evidence
    info = json.loads((evidence / "run.json").read_text())
    info["parameters"]["keys"] = 1000
    (evidence / "run.json").write_text(json.dumps(info))
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"), "--partial-evidence")
    line = one_line(capsys.readouterr().err)
    assert code == 2 and f"{evidence / 'run.json'}: not as seal.json sealed it (" in line, line
    assert "run.json is what every check is judged against" in line


def test_unsealed_evidence_is_said_so_and_never_holds(spark, evidence, tmp_path, capsys):
    (evidence / seal.SEAL).unlink()  # as a run killed before sealing leaves it
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"))
    result = report_of(tmp_path / "re")
    assert code == result["exit_code"] == 1
    assert result["evidence_integrity"]["sealed"] is False and result["verdict"] != "holds"
    assert any(o.startswith("evidence unsealed") for o in result["observations"])
    for name, sub in result["subscriptions"].items():
        assert all(sub["guarantees"][g] != "holds" for g in SETTLED_BY_DELIVERIES), (name, sub["guarantees"])
    out = capsys.readouterr().out
    assert "evidence unsealed" in out

    # a damaged part of unsealed evidence: one line naming it; judged without it with --partial-evidence
    part = largest_part(evidence, "publishes")
    part.write_bytes(part.read_bytes()[:200])
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re2"))
    line = one_line(capsys.readouterr().err)
    assert code == 2 and f"{part}: not a readable Parquet part of the publishes log" in line and "unsealed" in line
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re2"), "--partial-evidence")
    result = report_of(tmp_path / "re2")
    assert code == 1 and any(p.startswith(f"damaged {part.relative_to(evidence).as_posix()}")
                             for p in result["evidence_integrity"]["problems"])


def not_bucketed(evidence: Path) -> Path:
    """The evidence's part files as a probe wrote them before the bucketed layout (the same rows), sealed again: the
    shuffle pass judges it, and keeps its sorted input."""
    import pyarrow.parquet as pq

    from pubsubguard.validation.evidence.records import RunInfo

    for part in [*(evidence / "publishes").glob("*.parquet"), *(evidence / "deliveries").glob("*.parquet")]:
        pq.write_table(pq.read_table(part).replace_schema_metadata(None), part)
    seal.seal(evidence, RunInfo.read(evidence).run_id)
    return evidence


def test_a_damaged_kept_sorted_input_is_one_line_naming_it(spark, evidence, tmp_path, capsys):
    evidence = not_bucketed(evidence)
    assert verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re")) in (0, 1)
    kept = evidence / sorted_input.DIRNAME
    manifest = json.loads((kept / sorted_input.MANIFEST).read_text())
    part = kept / manifest["generation"] / manifest["parts"][0]["file"]
    part.write_bytes(part.read_bytes()[:100])
    capsys.readouterr()
    code = verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"))
    line = one_line(capsys.readouterr().err)
    assert code == 2 and f"{part}: damaged kept sorted input" in line and "--no-checks-input" in line
    assert verify(spark, "--from-evidence", str(evidence), "--report", str(tmp_path / "re"), "--no-checks-input") in (0, 1)


def test_a_second_run_on_a_held_report_directory_refuses_naming_the_first(spark, rehearsals, tmp_path, capsys):
    plan_file, runs = rehearsals
    report = tmp_path / "report"
    first = subprocess.Popen(
        [sys.executable, "-m", "pubsubguard", "verify", "--plan", str(plan_file), "--target", "emulator",
         "--keys", "2", "--messages-per-key", "4", "--drain-timeout", "30", "--report", str(report), "--no-progress"],
        cwd=project_root(), env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (report / "evidence" / "run.json").exists():  # the first run holds the directory and writes
            assert first.poll() is None and time.monotonic() < deadline, first.stdout.read() if first.poll() is not None else "slow"
            time.sleep(0.2)
        capsys.readouterr()
        code = probe_run(spark, plan_file, report)
        line = one_line(capsys.readouterr().err)
        assert code == 2 and f"--report {report}: in use by another verify run (pid {first.pid} " in line
        code = verify(spark, "--from-evidence", str(report / "evidence"), "--report", str(tmp_path / "elsewhere"))
        line = one_line(capsys.readouterr().err)
        assert code == 2 and f"--from-evidence {report}: in use by another verify run (pid {first.pid} " in line
        output = first.communicate(timeout=240)[0]
    finally:
        if first.poll() is None:
            first.kill()
    result = report_of(report)
    assert first.returncode == result["exit_code"], output
    assert "verdict:" in output  # --no-progress keeps the summary
    # the first run's evidence is its own, whole and sealed: re-checked, the same verdict
    assert verify(spark, "--from-evidence", str(report / "evidence"), "--report", str(tmp_path / "re")) == first.returncode
    again = report_of(tmp_path / "re")
    assert again["run_id"] == result["run_id"] and again["evidence_integrity"]["complete"]
    assert (report / locks.LOCK).exists()  # the file stays; the lock went with the process


def test_a_part_spark_cannot_read_is_one_line_naming_it(spark, tmp_path):
    """A part whose footer opens but whose pages are damaged fails in Spark's reader: its Java error
    becomes one line naming the file (PUBSUBGUARD_DEBUG=1 keeps the original)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pubsubguard.validation.failures import unreadable_evidence

    directory = tmp_path / "evidence" / "deliveries"
    directory.mkdir(parents=True)
    part = directory / "part-x.parquet"
    pq.write_table(pa.table({"n": list(range(50_000))}), part, compression="none", use_dictionary=False)
    data = bytearray(part.read_bytes())
    data[4:60] = b"\xff" * 56  # the first page's header overwritten, the footer intact
    part.write_bytes(bytes(data))
    with pytest.raises(Exception) as raised:
        spark.read.parquet(str(directory)).selectExpr("sum(n)").collect()
    error = unreadable_evidence(raised.value, tmp_path / "evidence")
    assert error is not None, str(raised.value)[:2000]
    line = str(error)
    assert line.startswith(f"{part}: damaged: Spark could not read it as Parquet (") and "\n" not in line
    assert unreadable_evidence(RuntimeError("no file named here"), tmp_path / "evidence") is None


def test_the_refused_seek_observation_names_twins_with_a_count_and_counts_the_rest_of_a_large_estate():
    """At 100 topics the observation listed 100 twins, each with 0: beyond SEEK_NAMES twins only those with
    messages acknowledged are named, the rest counted; a small estate keeps every name."""
    from types import SimpleNamespace

    from pubsubguard.validation.probe.twins import SEEK_NAMES, Twins

    def seeks(counts):
        return [{"result": "acknowledged", "subscription": f"projects/p/subscriptions/t{i:03d}-probe-r", "acknowledged": n,
                 "detail": "MethodNotImplemented"} for i, n in enumerate(counts)]

    [said] = Twins.unseeked(SimpleNamespace(seeks=seeks([0] * 99 + [3])))
    assert said.endswith("t099-probe-r 3, 0 on the other 99"), said
    [said] = Twins.unseeked(SimpleNamespace(seeks=seeks([0] * 100)))
    assert said.endswith("does): 0 on each of the 100"), said
    [said] = Twins.unseeked(SimpleNamespace(seeks=seeks([0] * SEEK_NAMES)))
    assert said.endswith(", ".join(f"t{i:03d}-probe-r 0" for i in range(SEEK_NAMES))), said
