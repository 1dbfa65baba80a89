"""The report's document (report.json) of a judged run: the verdict, the findings and what explains them as
the job hands them over (`pubsubguard.validation.judgement.JudgedRun`: the evidence read and judged by the
checks, each finding explained by `pubsubguard.validation.conformance.explains`), arranged per subscription,
and the data the plots need. It reads no evidence and judges nothing: `build` arranges what it is given;
`pubsubguard.validation.report.render` renders the document (report.json, report.html, the terminal summary)
and this module never imports it.

`report.json` (format `pubsubguard-report/1`):

    {"format", "run_id", "target", "stack", "verdict": "holds" | "violated", "exit_code": 0 | 1,
     "parameters": {...}, "observations": ["what the target did that matters", ...],
     "config_drift": [finding, ...],
     "subscriptions": {name: {
         "declared": {ordering, exactly_once, ack_deadline_s, max_delivery_attempts, dead_letter_topic,
                      delivery_type, topic},
         "tested": bool, "not_tested_reason": str | null,
         "guarantees": {"ordering" | "exactly_once" | "dead_letter" | "completeness": "holds" | "violated" | "not_tested"},
         "findings": {kind: [finding, ...]},      # finding: checks.findings.FINDING_COLUMNS, evidence parsed,
                                                  # absent facts left out, plus `detail`: its sentence
         "figures": {published, delivered, distinct_delivered, acked, dead_lettered, publish_duplicates, redeliveries,
                     redelivery_rate, latency_p50_ms, latency_p95_ms, latency_p99_ms, hottest_keys}}},
     "explanations": {"guarantees": [{subscription, guarantee, status, causes: [cause, ...]}, ...],
                      "advisories": [cause, ...]}}
     # cause: {kind, count, forms, groups, explained_by, caused_by, subscriptions, action}; kind `unsettled` for
     # messages neither acked nor dead-lettered when the drain ended (form `poison`: poison messages of a
     # dead-lettering subscription, which only forwarding settles; explained like dead_letter_missing)

The verdict is `violated` (exit code 1) when any declared guarantee of any subscription is violated:
an `error` finding from the checks or a `config_drift` on a guarantee-bearing setting.

Each finding's sentence is its kind's wording (validation/checks/wording.py, by `describe`), with times as
`clock` writes them (UTC and the offset from the run's start). report.html opens with why: each violated or
inconclusive guarantee with what explains it (`explanations`: a conformance scenario the target violated, or
"unexplained" and where to look) and what to do; then the guarantees table, the run, and the findings grouped
(`explains.finding_groups`: subscription, kind, form, severity, explanation), each group with one worked
example and its key's sequence plot, the rest folded. Nothing is filtered: every finding is in
report.json, and in report.html up to render.MAX_FINDINGS_SHOWN per group.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from ..checks.findings import severity_of_result
from ..conformance.explains import run_start_us
from ..evidence import records

REPORT_FORMAT = "pubsubguard-report/1"


def build(run) -> dict:
    """The report of a judged run (`run`: a `pubsubguard.validation.judgement.JudgedRun`): the verdict's findings
    as explained (their ids, sentences, scenarios and schedule entries), per subscription, with the run's
    figures, what explains each guarantee that is not `holds`, and the data the plots need (aggregated by the
    checks' pass, `verdict.plot`; the plotted keys' delivery rows, `run.timelines`). It judges nothing and reads
    no evidence."""
    verdict, info, findings, integrity = run.verdict, run.info, run.findings, run.integrity
    conformance = info.parameters.get("conformance")
    start_us = run_start_us(info, verdict.plot)
    subscriptions = {sub.name: _subscription(sub, info, verdict, findings) for sub in info.subscriptions}
    result = {
        "format": REPORT_FORMAT,
        "tool_version": tool_version(),
        "run_id": info.run_id,
        "target": info.target,
        "stack": info.parameters.get("stack"),
        "started": _iso(start_us),
        "verdict": verdict.verdict,
        "verdict_reason": verdict.verdict_reason,
        "exit_code": 0 if verdict.verdict == "holds" else 1,
        "parameters": {k: v for k, v in info.parameters.items() if k not in ("config_drift", "observations", "conformance")},
        "observations": [*present_paths(_here(info.parameters.get("observations", []),
                                              info.parameters.get("evidence_dir"), run.evidence)),
                         *verdict.observations],
        "config_drift": [f for f in findings if f["kind"] == "config_drift"],
        "conformance": _conformance_section(conformance),
        "subscriptions": subscriptions,
        "evidence": str(run.evidence),
        # what was found of the evidence against its seal (pubsubguard.validation.evidence.seal.Integrity)
        "evidence_integrity": integrity.as_dict() if integrity is not None else None,
    }
    # the files run.json names that are not where it says (a re-check elsewhere, or after the run's folder went):
    # printed without their path (render.access_line), never as a path that is not there
    source = info.parameters.get("declared_source") or {}
    result["_absent"] = [p for p in (source.get("location"), source.get("names_from")) if p and not _exists(p)]
    result["explanations"] = run.explanations
    result["_plots"] = _plot_data(run.timelines, info, run.groups, start_us, verdict.plot)
    return result


def _subscription(sub: records.DeclaredSubscription, info: records.RunInfo, verdict, findings: list[dict]) -> dict:
    """A subscription's section of report.json: as declared, whether it was tested, its guarantees, its findings by
    kind, its figures (the checks' statistics) and the network faults it went through (`--nemesis`)."""
    by_kind: dict[str, list] = {}
    for f in findings:
        if f["subscription"] == sub.name:
            by_kind.setdefault(f["kind"], []).append(f)
    figures = verdict.stats.get(sub.name)
    if figures:
        figures = {k: v for k, v in figures.items() if k != "subscription"}
    section = {
        "declared": asdict(sub),
        "tested": sub.name not in info.tested,
        "not_tested_reason": info.tested.get(sub.name),
        "guarantees": verdict.guarantees[sub.name],
        "findings": by_kind,
        "figures": figures,
    }
    faults = network_faults(info, sub)
    if faults is not None:
        section["network_faults"] = faults
    return section


def _here(observations: list[str], written_at: str | None, read_at) -> list[str]:
    """The run's observations naming files of its evidence where this check reads it (`--from-evidence DIR` of a
    copy: its `full text` files are in DIR, not where the run wrote them)."""
    if not written_at or str(written_at) == str(read_at):
        return list(observations)
    return [o.replace(str(written_at), str(read_at)) for o in observations]


FULL_TEXT = re.compile(r"full text: ([^\s;)]+)")


def _exists(path: str) -> bool:
    """A file a report names is there (an object store URI is taken as there: not looked up)."""
    from pubsubguard.core import storage

    return storage.is_remote(path) or Path(path).exists()


def present_paths(observations: list[str]) -> list[str]:
    """The observations with each `full text: FILE` that is not there (a re-check of evidence whose run wrote the
    file beside its report, not into the evidence) said as such, by its name: a report prints no path that is
    not there."""
    def here(match: re.Match) -> str:
        path = match.group(1)
        return match.group(0) if _exists(path) else f"full text: in the run's {Path(path).name}, not in this evidence"
    return [FULL_TEXT.sub(here, o) for o in observations]


def network_faults(info: records.RunInfo, sub) -> dict | None:
    """The network faults the fault layer applied to a subscription's calls (and to its topic's publishes),
    counted by kind, with the sentence each tested guarantee is named under ("held under 12 stream kills,
    40 lost ack responses"); None when the run had no schedule (`--nemesis`)."""
    from ..checks.applied_faults import guarantee_faults, held_under

    applied = (info.parameters.get("nemesis") or {}).get("applied")
    if applied is None:
        return None
    counts = guarantee_faults(applied, sub.name)
    for row in applied:
        if row["topic"] == sub.topic and not row["planted"] and not row["detail"].startswith("NOT applied"):
            label = f"{row['kind']}:publish"
            counts[label] = counts.get(label, 0) + 1
    return {"counts": counts, "under": held_under(counts) or None}


def tool_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("pubsubguard")
    except metadata.PackageNotFoundError:  # shipped as --py-files, not installed
        return "unknown"


def _iso(time_us) -> str | None:
    from datetime import datetime, timezone

    return None if time_us is None else datetime.fromtimestamp(time_us / 1e6, timezone.utc).isoformat(timespec="seconds")


def _conformance_section(conformance: dict | None) -> dict | None:
    """The conformance results the run measured, each scenario with its severity (severity_of_result)."""
    if not conformance:
        return None
    return {**conformance, "scenarios": [{**s, "severity": severity_of_result(s["result"])}
                                         for s in conformance["scenarios"]]}


def _plot_data(timelines: dict, info: records.RunInfo, groups: list[dict], start_us: int | None, aggregates: dict) -> dict:
    """What the plots need, its size bounded whatever the run's: the binned timeline and the latency
    CDFs come aggregated from the checks' pass (`aggregates`, checks.CheckResults.plot); the
    deliveries of the keys with findings come read by the job (`timelines`: at most
    judgement.MAX_TIMELINES keys, first the keys of the groups' worked examples), each finding on them
    marked. Times on the plots are seconds since `start_us`, as in the findings' sentences."""
    if aggregates["timeline"] is None:
        return {"t0": None, "start": start_us, "timeline": None, "latency": {}, "timelines": {}, "violations": {},
                "network": {}}
    t0 = aggregates["t0"]
    examples = {g["findings"][0]["id"] for g in groups}
    violations = {}
    for f in (f for g in groups for f in g["findings"]):
        if f["key"] is None or f["kind"] == "config_drift":
            continue
        received = (f.get("times") or {}).get("received_us")
        if received is not None and f["seq"] is not None:
            violations.setdefault(f"{f['subscription']} / {f['key']}", []).append(
                {"t": received, "seq": f["seq"], "kind": f["kind"], "severity": f["severity"],
                 "example": f["id"] in examples})
    return {"t0": t0, "start": t0 if start_us is None else start_us, "bin_us": aggregates["bin_us"],
            "bins": aggregates["bins"], "timeline": aggregates["timeline"],
            "expiry_deadline_s": aggregates["expiry_deadline_s"], "crash": aggregates["crash"],
            "latency": aggregates["latency"], "timelines": timelines,
            "violations": {k: v for k, v in violations.items() if k in timelines}, "network": network_bands(info)}


def network_bands(info: records.RunInfo) -> dict[str, list[list[int]]]:
    """The network faults the fault layer applied (`--nemesis`; run.json `parameters.nemesis.applied`), as the
    timeline draws them: kind -> [start_us, end_us] per applied row (an instant for a stream kill, a lost
    or delayed reply; a partition from its start for its `for_s`). Refused calls of a partition and faults
    not applied are left out (the partition's band covers them)."""
    nemesis = info.parameters.get("nemesis") or {}
    lasting = {f["index"]: f.get("for_s") for f in nemesis.get("faults", [])}
    bands: dict[str, list[list[int]]] = {}
    for row in nemesis.get("applied") or []:
        if row["planted"] or row["detail"].startswith(("NOT applied", "refused")):
            continue
        start = row["time_us"]
        end = start + round((lasting.get(row["entry"]) or 0) * 1e6) if row["kind"] in ("partition", "netem") else start
        bands.setdefault(row["kind"], []).append([start, end])
    return bands
