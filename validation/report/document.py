"""The report's document (report.json) of a run: the verdict it is given, its findings described and
grouped, what explains them, and the data the plots need. Analysis only: `pubsubguard.validation.report.render`
renders the document (report.json, report.html, the terminal summary) and this module never imports it.

`of_evidence(spark, evidence_dir)` is the whole re-check: the evidence read (`evidence.store`), the
checks folded into a verdict (`verdict.run_verdict`), the document built (`build`).

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

The document does not judge: `build` receives a `pubsubguard.validation.checks.verdict.RunVerdict`; each
finding's sentence is its kind's wording (validation/checks/wording.py, by `describe`), with times as
`clock` writes them (UTC and the offset from the run's start). report.html opens with why: each violated or inconclusive guarantee
with what explains it (`explanations`: a conformance scenario the target violated, or "unexplained"
and where to look) and what to do; then the guarantees table, the run, and the findings grouped
(`finding_groups`: subscription, kind, form, severity, explanation), each group with one worked
example and its key's sequence plot, the rest folded. Nothing is filtered: every finding is in
report.json, and in report.html up to report.MAX_FINDINGS_SHOWN per group.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from ..checks import wording
from ..checks.findings import severity_of_result
from ..checks.verdict import RunVerdict, run_verdict
from ..evidence import records

REPORT_FORMAT = "pubsubguard-report/1"
MAX_TIMELINES = 12  # keys with a sequence plot: the worked examples' keys first


def of_evidence(spark, evidence_dir, shown=None, staging: Path | None = None, keep_sorted_input: bool = True,
                partial: bool = False) -> dict:
    """The document of the evidence in `evidence_dir` (checked with Spark, `pubsubguard.validation.checks.verdict`),
    naming its evidence as `shown` (default: where it is read). Evidence in a local directory is read in
    place when it is in the probe's bucketed layout (`pubsubguard.validation.checks.buckets`), else gets
    the checks' sorted input kept beside it, or read from there (`pubsubguard.validation.checks.sorted_input`),
    unless `keep_sorted_input` is false. The evidence is checked against its seal first
    (`pubsubguard.validation.evidence.seal`); `partial`: judge what is intact of it (`verify --partial-evidence`)."""
    from pubsubguard.core import storage
    from ..evidence.store import read_evidence

    info, publishes, deliveries, integrity = read_evidence(spark, evidence_dir, staging, partial)
    # Not cached: the checks' one pass reads six numbers per row and gives the figures and the plots'
    # aggregates; every other read (key names, evidence rows, the plotted keys, the topics' counts)
    # takes a few columns or the row groups of a few keys. Caching every column cost more than all
    # of them (1M delivery rows: 11.3 s cached, against 5.0 s for the checks).
    local = Path(evidence_dir) if not storage.is_remote(evidence_dir) else None
    verdict = run_verdict(publishes, deliveries, info, local if integrity.whole else None, integrity, keep_sorted_input)
    return build(verdict, info, shown or evidence_dir, publishes, deliveries, integrity)


def build(verdict: RunVerdict, info: records.RunInfo, evidence_dir: Path, publishes, deliveries, integrity=None) -> dict:
    """The report of a judged run (plus the data its plots need: aggregated by the checks' pass,
    `verdict.plot`, and the deliveries of the keys it plots, read from `deliveries`): the
    verdict's findings with their sentences and ids, per subscription; each finding that a
    conformance scenario violated on the same target explains names it (`explained_by`)."""
    from ..conformance.explains import explained_by
    from ..checks.applied_faults import covers

    conformance = info.parameters.get("conformance")
    results = {s["id"]: s["result"] for s in conformance["scenarios"]} if conformance else {}
    ordered = {sub.name for sub in info.subscriptions if sub.ordering}
    start_us = run_start_us(info, verdict.plot)
    findings = []
    planted = _planted(info)
    for number, f in enumerate(verdict.findings, 1):
        finding = {**f, "id": f"finding-{number}", "detail": describe(f, start_us)}
        explained = explained_by(f, results, f["subscription"] in ordered)
        if explained:
            finding["explained_by"] = explained
        by = sorted({f"schedule entry {p['entry']} ({p['planted']})" for p in planted if covers(p, f)})
        if by:  # a planted anomaly (--nemesis): the known truth the run was meant to find
            finding["planted_by"] = by
        findings.append(finding)
    subscriptions = {}
    for sub in info.subscriptions:
        by_kind: dict[str, list] = {}
        for f in findings:
            if f["subscription"] == sub.name:
                by_kind.setdefault(f["kind"], []).append(f)
        figures = verdict.stats.get(sub.name)
        if figures:
            figures = {k: v for k, v in figures.items() if k != "subscription"}
        subscriptions[sub.name] = {
            "declared": asdict(sub),
            "tested": sub.name not in info.tested,
            "not_tested_reason": info.tested.get(sub.name),
            "guarantees": verdict.guarantees[sub.name],
            "findings": by_kind,
            "figures": figures,
        }
        faults = network_faults(info, sub)
        if faults is not None:
            subscriptions[sub.name]["network_faults"] = faults
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
                                              info.parameters.get("evidence_dir"), evidence_dir)),
                         *verdict.observations],
        "config_drift": [f for f in findings if f["kind"] == "config_drift"],
        "conformance": _conformance_section(conformance),
        "subscriptions": subscriptions,
        "evidence": str(evidence_dir),
        # what was found of the evidence against its seal (pubsubguard.validation.evidence.seal.Integrity)
        "evidence_integrity": integrity.as_dict() if integrity is not None else None,
    }
    # the files run.json names that are not where it says (a re-check elsewhere, or after the run's folder went):
    # printed without their path (render.access_line), never as a path that is not there
    source = info.parameters.get("declared_source") or {}
    result["_absent"] = [p for p in (source.get("location"), source.get("names_from")) if p and not _exists(p)]
    groups = finding_groups(findings)
    result["explanations"] = explanations(result, groups)
    result["_plots"] = _plot_data(deliveries, info, groups, start_us, verdict.plot)
    return result


def run_start_us(info: records.RunInfo, aggregates: dict) -> int | None:
    """The run's start, which every time in the report is offset from: when the probe's twins existed
    (run.json), else (generated evidence) the run's first publish (on a probed subscription's topic,
    from the checks' pass: `aggregates`, checks.CheckResults.plot)."""
    created = info.parameters.get("twins_created_us")
    if created is not None:
        return int(created)
    return aggregates["first_publish_us"]


def finding_groups(findings: list[dict]) -> list[dict]:
    """The findings grouped by subscription, kind, form (a config drift: its setting), severity and what
    explains them (a conformance scenario, or the schedule entries that planted them), in the order of each group's first finding; that finding is the group's worked
    example. Every finding is in exactly one group."""
    groups: dict[tuple, dict] = {}
    for f in findings:
        form = f["drift"]["setting"] if f["kind"] == "config_drift" else f.get("form")
        explained, planted = tuple(f.get("explained_by", ())), tuple(f.get("planted_by", ()))
        key = (f["subscription"], f["kind"], form, f["severity"], explained, planted)
        if key not in groups:
            groups[key] = {"subscription": f["subscription"], "kind": f["kind"], "form": form,
                           "severity": f["severity"], "guarantee": f["guarantee"], "explained_by": list(explained),
                           "planted_by": list(planted), "findings": []}
        groups[key]["findings"].append(f)
    # per subscription, errors first, the largest group first
    ordered = sorted(groups.values(), key=lambda g: (g["subscription"], g["severity"] != "error", -len(g["findings"])))
    return [{"id": f"group-{number}", **g} for number, g in enumerate(ordered, 1)]


# what to do about findings a schedule entry planted (`--nemesis`, the self-test): they are the known truth the run
# was meant to find, the fault layer's doing on the target's behalf
PLANTED_ACTION = ("nothing to do on the target: the fault layer planted these (the schedule entries named), and the "
                  "checks found them as the schedule meant")


# what to do about findings that rest on rows the evidence may lack (severity inconclusive)
INCONCLUSIVE_ACTION = ("not an error against the target: these findings rest on rows the evidence may lack (see the "
                       "observation: parts not read, or unsealed); restore the parts and re-check, or re-run")


def _action(target: str, kind: str, explained: list[str], conformance_ran: bool = True) -> str:
    """What the reader should do about findings of `kind` on `target`, explained by `explained` (or not;
    without the conformance scenarios nothing could be)."""
    if explained:
        if target == "emulator":
            return ("not your configuration: the emulator lacks these documented behaviours (docs/emulator.md); "
                    "judge these guarantees on Google Cloud (verify --target gcp) before relying on them")
        return ("the target lacks these documented behaviours: keep conformance.json and the findings' evidence rows "
                "and raise it with the target's owner (Google Cloud support)")
    if kind == "config_drift":
        return "the target holds another value than the plan declares: apply the plan again, or find what changed it"
    if kind == "publish_duplicate":
        return ("a publish retried after its reply was lost (the network, or --nemesis lose_response publish) is a new "
                "message, which exactly-once does not remove (docs/pubsub-facts.md): a consumer that must not process "
                "a payload twice de-duplicates on an id its producer assigns (the probe's run, key and seq attributes)")
    if not conformance_ran:
        return ("unexplained: the conformance scenarios did not run (verify --conform says which documented "
                "behaviours the target lacks); read its worked example (the key's plot and evidence rows) and "
                "the check in docs/checks.md")
    return ("unexplained: no conformance scenario covers it; read its worked example (the key's plot and evidence "
            "rows) and the check in docs/checks.md, and re-run to see whether it repeats")


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


def _planted(info: records.RunInfo) -> list[dict]:
    """The findings the schedule's applied planted rows must produce (`applied_faults.expected_findings`)."""
    from ..checks.applied_faults import expected_findings

    applied = (info.parameters.get("nemesis") or {}).get("applied") or []
    return expected_findings(applied, {sub.name: sub for sub in info.subscriptions}) if applied else []


def explanations(result: dict, groups: list[dict]) -> dict:
    """Why the verdict is what it is, as data: one item per violated or inconclusive guarantee (each with
    the error findings behind it, per kind and explanation, and what to do), then the advisory findings
    merged across subscriptions. Unsettled messages (an inconclusive guarantee) are said as a cause
    with their count; nothing here changes a status or leaves a finding out."""
    target, drain = result["target"], result["parameters"].get("drain") or {}
    ran = result.get("conformance") is not None
    results = {s["id"]: s["result"] for s in (result.get("conformance") or {}).get("scenarios", [])}

    def causes(selected: list[dict]) -> list[dict]:
        merged: dict[tuple, dict] = {}
        for group in selected:
            planted = group.get("planted_by") or []
            cause = merged.setdefault((group["kind"], tuple(group["explained_by"]), tuple(planted)), {
                "kind": group["kind"], "count": 0, "forms": {}, "groups": [], "explained_by": group["explained_by"],
                "caused_by": [f"planted by {entry}" for entry in planted],
                "subscriptions": [],
                "action": PLANTED_ACTION if planted else INCONCLUSIVE_ACTION if group["severity"] == "inconclusive"
                else _action(target, group["kind"], group["explained_by"], ran)})
            cause["count"] += len(group["findings"])
            if group["form"]:
                cause["forms"][group["form"]] = cause["forms"].get(group["form"], 0) + len(group["findings"])
            cause["groups"].append(group["id"])
            if group["subscription"] not in cause["subscriptions"]:
                cause["subscriptions"].append(group["subscription"])
        return list(merged.values())

    items = []
    for name, sub in result["subscriptions"].items():
        for guarantee, status in sub["guarantees"].items():
            if status not in ("violated", "inconclusive"):
                continue
            behind = [g for g in groups if g["subscription"] == name and g["guarantee"] == guarantee
                      and g["severity"] in ("error", "inconclusive")]
            item = {"subscription": name, "guarantee": guarantee, "status": status, "causes": causes(behind)}
            figures = sub["figures"] or {}
            # the checks' count (the verdict's and the figures'), which the drain's tally at its end can differ from
            # by messages settled, or answered, after it: the causes below account for every one of them
            unsettled = figures["published"] - figures["settled"] if "settled" in figures else \
                (drain.get("unsettled") or {}).get(name, 0)
            lost = result.get("evidence_integrity") or {}
            if status == "inconclusive" and name in lost.get("affected_subscriptions", ()):
                item["causes"].append({
                    "kind": "evidence_incomplete", "count": max(1, len(lost["problems"])), "forms": {}, "groups": [],
                    "explained_by": [], "subscriptions": [name],
                    "action": ("the evidence is unsealed (its run was killed before sealing it): re-run to judge this "
                               "guarantee" if not lost["sealed"] else
                               "parts of the evidence were not read (see the observation): restore them from where the "
                               "run wrote them and re-check, or re-run")})
            if status == "inconclusive" and unsettled:
                item["causes"].extend(_unsettled_causes(name, unsettled, drain, sub, results, target, ran))
            items.append(item)
    advisories = causes([g for g in groups if g["severity"] == "advisory"])
    return {"guarantees": items, "advisories": advisories}


# Unsettled messages told apart, in this order (each takes what the earlier left): those whose ack reply the
# fault layer dropped (the run's own fault), those whose latest event came after another subscription stalled
# (poison ones included), those of an unordered subscription with a retry policy whose latest delivery was a
# redelivery (`EvidenceTally.after_backoff_stop`, poison ones included), the remaining poison ones, those of a stalled subscription, those on keys silent
# since the fault layer last reset the subscription's streams, the rest where the probe's client library held messages
# on the stream the final read kept, those never delivered when the drain was cut at its ceiling, the rest. Form -> what to do when no conformance scenario explains it.
UNSETTLED_FORMS = {
    "after_lost_reply": "the fault layer dropped the target's reply to their ack (the schedule entries named): the target "
                        "may have applied it, the client never learned so and recorded no success; a consequence of "
                        "the run's own fault, not of the target",
    "after_stall": "their latest event, or the next delivery the target owed them, came after another subscription "
                   "stopped delivering, and the drain ended before the target, no longer slowed by it (one serving "
                   "period after the drain closed its streams), could deliver them; see the observation and 'What "
                   "the target did'",
    "after_backoff_stop": "their latest delivery was a redelivery (delivery_attempt 2 or more), and the target, "
                          "which has a retry policy, neither delivered them again nor forwarded them after their nack or "
                          "expiry, while no other message of the subscription came back after its backoff either (see "
                          "'What the target did')",
    "poison": "unsettled poison messages: the target neither forwarded them to the dead-letter topic nor stopped "
              "redelivering them; see 'What the target did'",
    "stalled": "the subscription delivered nothing after a poison message's last delivery attempt (see the "
               "observation): the target stopped delivering it; see 'What the target did'",
    "after_stream_reset": "the subscription's streams were reset: on an ordered one, keys it delivered nothing of after "
                          "the last reset; on an unordered one, messages stuck when the drain ended (see the observation)",
    "held_in_client": "the probe's client library held messages of this subscription it never handed to the probe "
                      "(or its flow control paused the stream) when the final read began, on a stream the final read "
                      "kept (ordered): a consequence of the probe's own client, not of the target (see the observation)",
    "cut": "never delivered when the drain reached its ceiling while the target still made progress, so no final "
           "read proved them lost: re-run with a longer --drain-timeout or a lower --rate (the observation gives the "
           "rates)",
}


def _unsettled_causes(name: str, unsettled: int, drain: dict, sub: dict, results: dict, target: str,
                      ran: bool) -> list[dict]:
    """The `unsettled` causes of one subscription's inconclusive guarantee (UNSETTLED_FORMS' order)."""
    from ..conformance.explains import explained_by

    def of(key: str) -> dict:
        return (drain.get(key) or {}).get(name) or {}

    late, stall, silent, replies = of("after_stall"), of("stalled"), of("after_stream_reset"), of("after_lost_reply")
    stopped = of("after_backoff_stop")
    held = of("held_in_client")
    after_stall = min(unsettled, late.get("messages", 0))
    wanted = {
        "after_lost_reply": replies.get("messages", 0),
        "after_stall": late.get("messages", 0),
        "poison": max(0, min(unsettled, (drain.get("unsettled_poison") or {}).get(name, 0))
                      - min(late.get("poison", 0), after_stall) - stopped.get("poison", 0)),
        "stalled": stall.get("unsettled", 0),
        "after_stream_reset": silent.get("messages", 0),
        "after_backoff_stop": stopped.get("messages", 0),
        "held_in_client": unsettled if held else 0,
        "cut": (drain.get("cut") or {}).get(name, 0),
    }
    causes, left = [], unsettled
    for form, otherwise in UNSETTLED_FORMS.items():
        count = min(left, wanted[form])
        if not count:
            continue
        left -= count
        caused = [f"schedule entry {e} (lose_response on acknowledge)" for e in replies.get("entries", ())] \
            if form == "after_lost_reply" else []
        if form == "held_in_client":
            caused = [f"the probe's client library ({held['leased']:,} messages leased, {held['on_hold']:,} behind "
                      f"their ordering key" + (", the stream paused by its flow control" if held["paused_tasks"] else "")
                      + ")"]
        explained = [] if caused else explained_by({"kind": "unsettled", "form": form}, results,
                                                   bool(sub["declared"].get("ordering")))
        causes.append({"kind": "unsettled", "count": count, "forms": {form: count}, "groups": [],
                       "explained_by": explained, "caused_by": caused, "subscriptions": [name],
                       "action": _action(target, "unsettled", explained, ran) if explained else otherwise})
    if left:
        causes.append({"kind": "unsettled", "count": left, "forms": {}, "groups": [], "explained_by": [],
                       "caused_by": [], "subscriptions": [name],
                       "action": ("unsettled messages: see how their last delivery ended under 'What the target did'; "
                                  "if a re-run with a longer --drain-timeout leaves them unsettled, the target keeps "
                                  "them")})
    return causes


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


def _plot_data(deliveries, info: records.RunInfo, groups: list[dict], start_us: int | None, aggregates: dict) -> dict:
    """What the plots need, its size bounded whatever the run's: the binned timeline and the latency
    CDFs come aggregated from the checks' pass (`aggregates`, checks.CheckResults.plot); the
    deliveries of the keys with findings (at most MAX_TIMELINES keys: first the keys of the groups'
    worked examples) are the one read here, filtered by those keys. Times on the plots are seconds
    since `start_us`, as in the findings' sentences."""
    from pyspark.sql import functions as F

    if aggregates["timeline"] is None:
        return {"t0": None, "start": start_us, "timeline": None, "latency": {}, "timelines": {}, "violations": {},
                "network": {}}
    t0 = aggregates["t0"]
    findings = [f for g in groups for f in g["findings"]]
    examples = {g["findings"][0]["id"] for g in groups}
    keyed = [(g["subscription"], g["findings"][0]["key"]) for g in groups if g["findings"][0]["key"] is not None]
    keyed = list(dict.fromkeys(keyed))
    violations = {}
    for f in findings:
        if f["key"] is None or f["kind"] == "config_drift":
            continue
        title = f"{f['subscription']} / {f['key']}"
        if (f["subscription"], f["key"]) not in keyed:
            keyed.append((f["subscription"], f["key"]))
        received = (f.get("times") or {}).get("received_us")
        if received is not None and f["seq"] is not None:
            violations.setdefault(title, []).append({"t": received, "seq": f["seq"], "kind": f["kind"], "severity": f["severity"],
                                                     "example": f["id"] in examples})
    keyed = keyed[:MAX_TIMELINES]
    timelines: dict[str, list] = {}
    if keyed:
        cond = None
        for sub, key in keyed:
            c = (F.col("subscription") == sub) & (F.col("key") == key)
            cond = c if cond is None else cond | c
        # the keys' names first: Parquet skips the row groups that hold none of them
        mine = deliveries.where(F.col("key").isin(sorted({key for _, key in keyed})) & (F.col("probe_run") == info.run_id))
        for r in (mine.where(cond).select("subscription", "key", "seq", "receive_time_us", "action", "ack_result", "kind",
                                          "subscriber_task").collect()):
            timelines.setdefault(f"{r['subscription']} / {r['key']}", []).append(r.asDict())
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


# ------------------------------------------------------------------------------------- sentences
def clock(time_us: int, start_us: int | None = None) -> str:
    """A time as a reader reads it: UTC to the millisecond and its offset from the run's start,
    `10:06:23.704 UTC (+5.819 s)`; without a start, with its date (`2026-11-25 10:06:23.704 UTC`)."""
    from datetime import datetime, timezone

    moment = datetime.fromtimestamp(time_us / 1e6, timezone.utc)
    if start_us is None:
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    return f"{moment.strftime('%H:%M:%S.%f')[:-3]} UTC ({(time_us - start_us) / 1e6:+.3f} s)"


def describe(finding: dict, start_us: int | None = None) -> str:
    """The sentence a report shows for a finding: its kind's wording (validation/checks/wording.py), with
    times as `clock` renders them, offset from `start_us` (the run's start) when given."""
    times = finding.get("times") or {}
    return wording.sentence(finding, lambda name: clock(times[name], start_us))
