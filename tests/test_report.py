"""The report of a judged run, from evidence alone (`verify --from-evidence`, real Spark): report.json
follows docs/schemas/report.schema.json; findings carry `explained_by` only for scenarios violated in
the same run; unsettled messages make a guarantee inconclusive; report.html shows all of it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest

from validation import histories as H
from validation.conformance import EXPLAINS, SCENARIOS, explained_by
from validation.evidence import DeclaredSubscription, RunInfo
from validation.verdict import verdict_of

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "report.schema.json").read_text())
ORDERED = DeclaredSubscription("ordered", "t", ordering=True)
PLAIN = DeclaredSubscription("plain", "t")


def conformance(violated: set[str]) -> dict:
    scenarios = [{"id": s.id, "behaviour": s.behaviour, "source": s.source,
                  "result": "violated" if s.id in violated else "holds", "detail": "as measured"} for s in SCENARIOS]
    return {"run_id": "0123abcd", "started": "2026-11-23T21:00:00+00:00", "duration_s": 17.0, "file": "conformance.json",
            "summary": {"holds": len(scenarios) - len(violated), "violated": len(violated), "unsupported": 0,
                        "inconclusive": 0}, "scenarios": scenarios}


def write_run(history: H.History, directory: Path, violated: set[str]) -> Path:
    history.write(directory)
    info = RunInfo.read(directory)
    info.parameters.update(conformance=conformance(violated), faults={"nack": 0.1}, keys=3, messages_per_key=6)
    info.write(directory)
    return directory


def recheck(spark, evidence: Path, report: Path) -> tuple[int, dict, str]:
    from validation import job

    code = job.main(["--from-evidence", str(evidence), "--report", str(report), "--no-progress"], spark=spark)
    return code, json.loads((report / "report.json").read_text()), (report / "report.html").read_text()


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
    assert explained_by(missing, ordered_dl, ordered=False) == []
    assert explained_by(missing, {"dead-letter-after-max-attempts": "violated"}, ordered=True) == ["dead-letter-after-max-attempts"]


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
    # the HTML: the explanation, the link from the table to the finding, its evidence rows, the plots
    assert "explained by the violated scenario" in html and f'href="#{found[0]["id"]}"' in html
    assert f'id="{found[0]["id"]}"' in html and "evidence rows" in html
    assert 'id="scenario-ordered-nack-redelivers-in-order"' in html
    assert html.count("data:image/png;base64,") >= 3  # timeline, latency CDF, the key's sequence plot


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
