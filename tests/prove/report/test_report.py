"""The report of a judged run, from evidence alone (`verify --from-evidence`, real Spark): report.json
follows docs/schemas/report.schema.json; findings carry `explained_by` only for scenarios violated in
the same run; unsettled messages make a guarantee inconclusive; the explanations said per guarantee, in
report.json and on the terminal."""

from __future__ import annotations

import random
import re
from pathlib import Path

import jsonschema
import pytest

from support import histories as H
from pubsubguard.validation.evidence import seal
from pubsubguard.validation.conformance.explains import EXPLAINS, explained_by
from pubsubguard.validation.conformance.runner import SCENARIOS
from pubsubguard.validation.evidence.records import RunInfo
from pubsubguard.validation.checks.verdict import verdict_of
from support.drain_evidence import T
from support.reports import ORDERED, PLAIN, SCHEMA, conformance, recheck


def write_run(history: H.History, directory: Path, violated: set[str]) -> Path:
    history.write(directory)
    info = RunInfo.read(directory)
    info.parameters.update(conformance=conformance(violated), faults={"nack": 0.1}, keys=3, messages_per_key=6)
    info.write(directory)
    seal.seal(directory, info.run_id)  # the record as a run that measured this conformance would have sealed it
    return directory


def test_every_mapped_scenario_exists_and_only_violated_ones_explain():
    assert set(EXPLAINS) <= {s.id for s in SCENARIOS}
    finding = {"kind": "out_of_order", "form": "skip"}
    assert explained_by(finding, {"ordered-nack-redelivers-in-order": "holds"}) == []
    assert explained_by(finding, {"ordered-nack-redelivers-in-order": "violated",
                                  "ordered-expiry-redelivers-in-order": "inconclusive"}) == ["ordered-nack-redelivers-in-order"]
    late = {"kind": "stale_ack_accepted", "form": "late_ack"}
    both = {"eod-stale-ack-rejected": "violated", "eod-superseded-ack-rejected": "violated"}
    assert explained_by(late, both) == ["eod-stale-ack-rejected"]
    drift = {"kind": "config_drift", "form": "differs", "drift": {"setting": "retention_seconds"}}
    assert explained_by(drift, {"retention-as-declared": "violated"}) == ["retention-as-declared"]
    assert explained_by({**drift, "drift": {"setting": "ack_deadline_seconds"}}, {"retention-as-declared": "violated"}) == []
    # the target refusing the declared retention (`unsupported`) explains the retention it holds instead
    assert explained_by(drift, {"retention-as-declared": "unsupported"}) == ["retention-as-declared"]
    assert explained_by(finding, {"ordered-nack-redelivers-in-order": "unsupported"}) == []
    # a scenario of ordered subscriptions explains findings on ordered subscriptions only
    missing = {"kind": "dead_letter_missing", "form": None}
    ordered_dl = {"dead-letter-ordered-after-max-attempts": "violated", "dead-letter-after-max-attempts": "holds"}
    assert explained_by(missing, ordered_dl, ordered=True) == ["dead-letter-ordered-after-max-attempts"]
    # issue 35: a nacked message the target rewinds with its key's later messages while still outstanding
    outstanding = {"kind": "duplicate_while_outstanding", "form": None}
    rewound = {"ordered-eod-no-redelivery-while-outstanding": "violated"}
    assert explained_by(outstanding, rewound, ordered=True) == ["ordered-eod-no-redelivery-while-outstanding"]
    assert explained_by(outstanding, rewound, ordered=False) == []
    assert explained_by(outstanding, {"ordered-eod-no-redelivery-while-outstanding": "holds"}, ordered=True) == []
    assert explained_by(missing, ordered_dl, ordered=False) == []
    assert explained_by(missing, {"dead-letter-after-max-attempts": "violated"}, ordered=True) == ["dead-letter-after-max-attempts"]


def _finding(number: int, subscription: str, kind: str, form=None, severity="error", guarantee="ordering", **extra):
    return {"id": f"finding-{number}", "subscription": subscription, "kind": kind, "form": form, "severity": severity,
            "guarantee": guarantee, "key": "k", "seq": number, **extra}


def test_explanations_say_why_per_guarantee_and_leave_nothing_out():
    """Pure data: groups hold every finding once; each violated or inconclusive guarantee gets its causes
    (explained or not, unsettled messages too); advisories are merged; statuses are not touched."""
    from pubsubguard.validation.conformance.explains import explanations, finding_groups
    from pubsubguard.validation.report.render import what_to_do

    findings = [_finding(1, "a", "out_of_order", "skip", explained_by=["ordered-nack-redelivers-in-order"]),
                _finding(2, "a", "out_of_order", "regression", explained_by=["ordered-nack-redelivers-in-order"]),
                _finding(3, "a", "out_of_order", "skip", explained_by=["ordered-nack-redelivers-in-order"]),
                _finding(4, "b", "duplicate_while_outstanding", guarantee="exactly_once"),
                _finding(5, "d", "config_drift", "differs", severity="advisory", guarantee="config",
                         drift={"setting": "retention_seconds"}, explained_by=["retention-as-declared"]),
                _finding(6, "e", "config_drift", "differs", severity="advisory", guarantee="config",
                         drift={"setting": "retention_seconds"}, explained_by=["retention-as-declared"])]
    groups = finding_groups(findings)
    assert sorted(f["id"] for g in groups for f in g["findings"]) == sorted(f["id"] for f in findings)
    assert [(g["subscription"], g["form"], len(g["findings"])) for g in groups][:2] == [("a", "skip", 2), ("a", "regression", 1)]
    subscriptions = {
        "a": {"guarantees": {"ordering": "violated", "completeness": "holds"}, "figures": {"published": 9, "settled": 9}},
        "b": {"guarantees": {"exactly_once": "violated", "completeness": "inconclusive"},
              "figures": {"published": 9, "settled": 6}},
        "c": {"guarantees": {"ordering": "holds"}, "figures": None}}
    result = {"target": "emulator", "parameters": {"drain": {"ended": "timeout", "unsettled": {"b": 3}}},
              "conformance": {"scenarios": []}, "subscriptions": subscriptions}
    why = explanations(result, groups)
    items = {(i["subscription"], i["guarantee"]): i for i in why["guarantees"]}
    assert list(items) == [("a", "ordering"), ("b", "exactly_once"), ("b", "completeness")]
    [ordering] = items[("a", "ordering")]["causes"]
    assert ordering["count"] == 3 and ordering["forms"] == {"skip": 2, "regression": 1}
    assert ordering["explained_by"] == ["ordered-nack-redelivers-in-order"] and "emulator lacks" in ordering["action"]
    [duplicate] = items[("b", "exactly_once")]["causes"]
    assert duplicate["explained_by"] == [] and duplicate["action"].startswith("unexplained: no conformance scenario")
    assert [(c["kind"], c["count"]) for c in items[("b", "completeness")]["causes"]] == [("unsettled", 3)]
    [drift] = why["advisories"]
    assert drift["count"] == 2 and drift["subscriptions"] == ["d", "e"] and drift["explained_by"] == ["retention-as-declared"]
    # each action once, with the numbers of the lines it is for (advisories numbered after the guarantees)
    assert [numbers for _, numbers in what_to_do(why)] == [[1, 4], [2], [3]]
    # without the conformance scenarios nothing could explain a finding, and the reader is told so
    alone = explanations({**result, "conformance": None}, finding_groups([_finding(4, "b", "duplicate_while_outstanding",
                                                                                   guarantee="exactly_once")]))
    [cause] = [c for i in alone["guarantees"] if i["guarantee"] == "exactly_once" for c in i["causes"]]
    assert "did not run" in cause["action"]


def test_verdict_reason_names_what_decided_it():
    assert verdict_of({"a": {"ordering": "violated", "completeness": "inconclusive"}}, {"a": 2}, {})[0] == "violated"
    verdict, reason = verdict_of({"a": {"ordering": "holds", "completeness": "inconclusive"}}, {"a": 2}, {"ended": "stuck"})
    assert verdict == "inconclusive" and "a.completeness" in reason and "a 2" in reason and "stuck" in reason
    assert verdict_of({"a": {"ordering": "holds"}}, {"a": 0}, {})[0] == "holds"


@pytest.mark.parametrize("seed", [3])
def test_report_explains_findings_by_measured_scenarios(spark, tmp_path, seed):
    legal = H.generate([ORDERED, PLAIN], H.Workload(keys=3, messages_per_key=6), seed)
    mutated, injection = H.mutate_out_of_order_skip(legal, random.Random(seed))
    evidence = write_run(mutated, tmp_path / "evidence", {"ordered-nack-redelivers-in-order", "eod-stale-ack-rejected"})
    code, report, html = recheck(spark, evidence, tmp_path / "report")
    jsonschema.validate(report, SCHEMA, format_checker=jsonschema.FormatChecker())
    assert code == report["exit_code"] == 1 and report["verdict"] == "violated"
    assert "ordered.ordering" in report["verdict_reason"]
    found = report["subscriptions"][injection.subscription]["findings"]["out_of_order"]
    assert found and all(f["explained_by"] == ["ordered-nack-redelivers-in-order"] for f in found)
    assert report["subscriptions"]["ordered"]["guarantees"]["ordering"] == "violated"  # never downgraded
    # why first: the violated guarantee with the scenario that explains it, before the table
    [why] = [item for item in report["explanations"]["guarantees"] if item["subscription"] == "ordered"]
    assert why["status"] == "violated" and why["guarantee"] == "ordering"
    assert [c["explained_by"] for c in why["causes"]] == [["ordered-nack-redelivers-in-order"]]
    assert html.index('id="why"') < html.index("ordered-nack-redelivers-in-order") < html.index('id="guarantees"')
    # the HTML: the group the table links to, its worked example with its evidence rows, the plots
    group = re.search(r'<section class="group error" id="(group-\d+)">', html).group(1)
    assert f'href="#{group}"' in html and f'id="{found[0]["id"]}"' in html and "evidence rows" in html
    assert "explained by the target" in html and 'id="scenario-ordered-nack-redelivers-in-order"' in html
    assert html.count("data:image/png;base64,") >= 3  # timeline, latency CDF, the key's sequence plot
    # readable times: UTC, and the offset from the run's start
    assert re.search(r"received at \d\d:\d\d:\d\d\.\d{3} UTC \([+-]\d+\.\d{3} s\)", found[0]["detail"])


def test_unsettled_messages_make_guarantees_inconclusive(spark, tmp_path):
    legal = H.generate([PLAIN], H.Workload(keys=2, messages_per_key=4, fault_rate=0.0, duplicate_rate=0.0), 5)
    # one message: delivered once and nacked, never redelivered (the target gave up on it)
    first = next(d for d in legal.deliveries if d["seq"] == 2 and d["key"] is not None)
    legal.deliveries = [d for d in legal.deliveries if (d["key"], d["seq"]) != (first["key"], 2)]
    legal.deliveries.append({**first, "action": "nack"})
    code, report, html = recheck(spark, write_run(legal, tmp_path / "evidence", set()), tmp_path / "report")
    jsonschema.validate(report, SCHEMA, format_checker=jsonschema.FormatChecker())
    plain = report["subscriptions"]["plain"]
    assert plain["figures"]["published"] - plain["figures"]["settled"] == 1
    assert plain["guarantees"]["completeness"] == "inconclusive" and not plain["findings"]
    assert report["verdict"] == "inconclusive" and code == 1 and "plain 1" in report["verdict_reason"]
    assert "inconclusive" in html


def test_a_recheck_elsewhere_names_the_evidence_files_where_it_reads_them():
    from pubsubguard.validation.report.document import _here

    said = ["subscriber task sub-0 crashed (full text: /runs/a/evidence/failure-sub-0.txt)", "filters not enforced"]
    assert _here(said, "/runs/a/evidence", "/copies/b") == [
        "subscriber task sub-0 crashed (full text: /copies/b/failure-sub-0.txt)", "filters not enforced"]
    assert _here(said, "/runs/a/evidence", "/runs/a/evidence") == said
    assert _here(said, None, "/copies/b") == said  # a run before it recorded where it wrote


def test_the_terminal_says_each_unsettled_cause_once_with_what_explains_it():
    from pubsubguard.validation.conformance.explains import explanations
    from pubsubguard.validation.report.terminal import explanation_lines

    result = {"target": "emulator",
              "parameters": {"drain": {"ended": "timeout", "unsettled": {"e": 3}, "unsettled_poison": {},
                                       "stalled": {}, "after_stall": {"e": {"since_us": T, "messages": 2, "poison": 0,
                                                                            "deliveries": 0, "last_delivery_us": None}}}},
              "conformance": {"run_id": "r", "summary": {"violated": 1},
                              "scenarios": [{"id": "ordered-dead-letter-spares-other-subscriptions", "result": "violated"}]},
              "subscriptions": {"e": {"declared": {"ordering": False}, "figures": {}, "findings": {},
                                      "guarantees": {"completeness": "inconclusive", "exactly_once": "inconclusive"}}}}
    result["explanations"] = explanations(result, [])
    lines = explanation_lines(result)
    assert lines[1:] == ["  e: 2 never settled (after_stall): explained by ordered-dead-letter-spares-other-subscriptions",
                         "  e: 1 never settled: no scenario explains it"]
