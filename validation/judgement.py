"""A run's evidence read and judged, for the report to render: the evidence read (`evidence.store`, checked
against its seal), the checks folded into a verdict (`checks.verdict.run_verdict`), each finding and each
guarantee explained (`conformance.explains`), and the delivery rows of the keys the report plots read.
`judge` is the whole re-check but the rendering; the report (`report.document.build`) receives its
`JudgedRun` and reads nothing itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .checks.verdict import RunVerdict, run_verdict
from .conformance import explains
from .evidence import records

MAX_TIMELINES = 12  # keys with a sequence plot: the worked examples' keys first


@dataclass(frozen=True)
class JudgedRun:
    info: records.RunInfo  # run.json
    verdict: RunVerdict
    findings: list[dict]  # the verdict's findings explained (explains.explain_findings)
    groups: list[dict]  # the findings grouped as the report shows them (explains.finding_groups)
    explanations: dict  # why each guarantee is not `holds`, and the advisories (explains.explanations)
    timelines: dict[str, list[dict]]  # "subscription / key" -> its delivery rows, for the plotted keys
    evidence: Path | str  # where the evidence is said to be (`shown`)
    integrity: object = None  # pubsubguard.validation.evidence.seal.Integrity, the evidence against its seal


def judge(spark, evidence_dir, shown=None, staging: Path | None = None, keep_sorted_input: bool = True,
          partial: bool = False) -> JudgedRun:
    """The evidence in `evidence_dir` judged (checked with Spark, `pubsubguard.validation.checks.verdict`),
    naming its evidence as `shown` (default: where it is read). Evidence in a local directory is read in
    place when it is in the probe's bucketed layout (`pubsubguard.validation.checks.buckets`), else gets
    the checks' sorted input kept beside it, or read from there (`pubsubguard.validation.checks.sorted_input`),
    unless `keep_sorted_input` is false. The evidence is checked against its seal first
    (`pubsubguard.validation.evidence.seal`); `partial`: judge what is intact of it (`verify --partial-evidence`)."""
    from pubsubguard.core import storage
    from .evidence.store import read_evidence

    info, publishes, deliveries, integrity = read_evidence(spark, evidence_dir, staging, partial)
    # Not cached: the checks' one pass reads six numbers per row and gives the figures and the plots'
    # aggregates; every other read (key names, evidence rows, the plotted keys, the topics' counts)
    # takes a few columns or the row groups of a few keys. Caching every column cost more than all
    # of them (1M delivery rows: 11.3 s cached, against 5.0 s for the checks).
    local = Path(evidence_dir) if not storage.is_remote(evidence_dir) else None
    verdict = run_verdict(publishes, deliveries, info, local if integrity.whole else None, integrity, keep_sorted_input)
    return judged(verdict, info, shown or evidence_dir, deliveries, integrity)


def judged(verdict: RunVerdict, info: records.RunInfo, evidence: Path | str, deliveries, integrity=None) -> JudgedRun:
    """A verdict explained, with the delivery rows of the keys the report plots read from `deliveries`."""
    findings = explains.explain_findings(verdict, info)
    groups = explains.finding_groups(findings)
    why = explains.explanations(explains.outline(verdict, info, integrity), groups)
    timelines = plotted_rows(deliveries, info, plotted_keys(groups)) if verdict.plot["timeline"] is not None else {}
    return JudgedRun(info, verdict, findings, groups, why, timelines, evidence, integrity)


def plotted_keys(groups: list[dict]) -> list[tuple[str, str]]:
    """The keys the report plots, at most MAX_TIMELINES: first the keys of the groups' worked examples, then those of
    the other findings (not config drift), in the groups' order."""
    keyed = [(g["subscription"], g["findings"][0]["key"]) for g in groups if g["findings"][0]["key"] is not None]
    keyed = list(dict.fromkeys(keyed))
    for f in (f for g in groups for f in g["findings"]):
        if f["key"] is not None and f["kind"] != "config_drift" and (f["subscription"], f["key"]) not in keyed:
            keyed.append((f["subscription"], f["key"]))
    return keyed[:MAX_TIMELINES]


def plotted_rows(deliveries, info: records.RunInfo, keyed: list[tuple[str, str]]) -> dict[str, list[dict]]:
    """The run's delivery rows of the `keyed` keys ("subscription / key" -> rows), the one read of the evidence
    for the plots (their aggregates come from the checks' pass)."""
    from pyspark.sql import functions as F

    timelines: dict[str, list] = {}
    if not keyed:
        return timelines
    cond = None
    for sub, key in keyed:
        c = (F.col("subscription") == sub) & (F.col("key") == key)
        cond = c if cond is None else cond | c
    # the keys' names first: Parquet skips the row groups that hold none of them
    mine = deliveries.where(F.col("key").isin(sorted({key for _, key in keyed})) & (F.col("probe_run") == info.run_id))
    for r in (mine.where(cond).select("subscription", "key", "seq", "receive_time_us", "action", "ack_result", "kind",
                                      "subscriber_task").collect()):
        timelines.setdefault(f"{r['subscription']} / {r['key']}", []).append(r.asDict())
    return timelines
