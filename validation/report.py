"""The verification report: `report.json`, a terminal summary table and a self-contained `report.html`.

`report.json` (format `pubsubguard-report/1`):

    {"format", "run_id", "target", "stack", "verdict": "holds" | "violated", "exit_code": 0 | 1,
     "parameters": {...}, "observations": ["what the target did that matters", ...],
     "config_drift": [finding, ...],
     "subscriptions": {name: {
         "declared": {ordering, exactly_once, ack_deadline_s, max_delivery_attempts, dead_letter_topic,
                      delivery_type, topic},
         "tested": bool, "not_tested_reason": str | null,
         "guarantees": {"ordering" | "exactly_once" | "dead_letter" | "completeness": "holds" | "violated" | "not_tested"},
         "findings": {kind: [finding, ...]},      # finding: evidence.FINDING_COLUMNS, evidence parsed,
                                                  # absent facts left out, plus `detail`: its sentence
         "figures": {published, delivered, distinct_delivered, acked, dead_lettered, redeliveries,
                     redelivery_rate, latency_p50_ms, latency_p95_ms, latency_p99_ms, hottest_keys}}},
     "explanations": {"guarantees": [{subscription, guarantee, status, causes: [cause, ...]}, ...],
                      "advisories": [cause, ...]}}
     # cause: {kind, count, forms, groups, explained_by, subscriptions, action}; kind `unsettled` for
     # messages neither acked nor dead-lettered when the drain ended

The verdict is `violated` (exit code 1) when any declared guarantee of any subscription is violated:
an `error` finding from the checks or a `config_drift` on a guarantee-bearing setting.

The report does not judge: `build` receives a `validation.verdict.RunVerdict` and renders it; each
finding's sentence is made from its fields by `describe`, with times as `clock` writes them (UTC and
the offset from the run's start). report.html opens with why: each violated or inconclusive guarantee
with what explains it (`explanations`: a conformance scenario the target violated, or "unexplained"
and where to look) and what to do; then the guarantees table, the run, and the findings grouped
(`finding_groups`: subscription, kind, form, severity, explanation), each group with one worked
example and its key's sequence plot, the rest folded. Nothing is filtered: every finding is in
report.json, and in report.html up to MAX_FINDINGS_SHOWN per group.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import asdict
from pathlib import Path

import pubsub_facts as facts

from pubsubguard import storage
from validation import evidence
from validation.verdict import RunVerdict, judge_run

REPORT_FORMAT = "pubsubguard-report/1"
MAX_TIMELINES = 12  # keys with a sequence plot: the worked examples' keys first
MAX_FINDINGS_SHOWN = 50  # per group in report.html, folded (report.json holds every one)


def read_evidence(spark, evidence_dir: Path | str):
    """(publishes, deliveries) DataFrames of an evidence directory, in the contract's schema. Spark reads
    the part files where they are; a URI its Hadoop has no connector for (validation.job says so) is read
    by the driver (pubsubguard.storage) and handed to Spark as Arrow tables."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    through_driver = storage.is_remote(evidence_dir) and not storage.hadoop_can_read(spark, evidence_dir)
    frames = []
    for name, schema in (("publishes", evidence.PUBLISH_SCHEMA), ("deliveries", evidence.DELIVERY_SCHEMA)):
        directory = storage.join(evidence_dir, name)  # a path, or a URI Spark's Hadoop reads
        if through_driver:
            parts = [storage.read_parquet(storage.join(directory, part)).select(schema.names).cast(schema)
                     for part in storage.names(directory, "part-") if part.endswith(".parquet")]
            table = pa.concat_tables(parts) if parts else schema.empty_table()
            frames.append(spark.createDataFrame(table, schema=from_arrow_schema(schema)))
            continue
        if not storage.is_remote(directory):
            Path(directory).mkdir(parents=True, exist_ok=True)
        frames.append(spark.read.schema(from_arrow_schema(schema)).parquet(directory))
    return tuple(frames)


def judged(spark, evidence_dir, shown=None) -> dict:
    """The report of the evidence in `evidence_dir` (checked with Spark, `validation.verdict`), naming
    its evidence as `shown` (default: where it is read)."""
    info = evidence.RunInfo.read(evidence_dir)
    publishes, deliveries = read_evidence(spark, evidence_dir)
    # Not cached: the checks' one pass reads six numbers per row and gives the figures and the plots'
    # aggregates; every other read (key names, evidence rows, the plotted keys, the topics' counts)
    # takes a few columns or the row groups of a few keys. Caching every column cost more than all
    # of them (1M delivery rows: 11.3 s cached, against 5.0 s for the checks).
    return build(judge_run(publishes, deliveries, info), info, shown or evidence_dir, publishes, deliveries)


def build(verdict: RunVerdict, info: evidence.RunInfo, evidence_dir: Path, publishes, deliveries) -> dict:
    """The report of a judged run (plus the data its plots need: aggregated by the checks' pass,
    `verdict.plot`, and the deliveries of the keys it plots, read from `deliveries`): the
    verdict's findings with their sentences and ids, per subscription; each finding that a
    conformance scenario violated on the same target explains names it (`explained_by`)."""
    from validation.conformance import explained_by

    conformance = info.parameters.get("conformance")
    results = {s["id"]: s["result"] for s in conformance["scenarios"]} if conformance else {}
    ordered = {sub.name for sub in info.subscriptions if sub.ordering}
    start_us = run_start_us(info, verdict.plot)
    findings = []
    for number, f in enumerate(verdict.findings, 1):
        finding = {**f, "id": f"finding-{number}", "detail": describe(f, start_us)}
        explained = explained_by(f, results, f["subscription"] in ordered)
        if explained:
            finding["explained_by"] = explained
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
        "observations": [*info.parameters.get("observations", []), *verdict.observations],
        "config_drift": [f for f in findings if f["kind"] == "config_drift"],
        "conformance": _conformance_section(conformance),
        "subscriptions": subscriptions,
        "evidence": str(evidence_dir),
    }
    groups = finding_groups(findings)
    result["explanations"] = explanations(result, groups)
    result["_plots"] = _plot_data(deliveries, info, groups, start_us, verdict.plot)
    return result


def run_start_us(info: evidence.RunInfo, aggregates: dict) -> int | None:
    """The run's start, which every time in the report is offset from: when the probe's twins existed
    (run.json), else (generated evidence) the run's first publish (on a probed subscription's topic,
    from the checks' pass: `aggregates`, checks.CheckResults.plot)."""
    created = info.parameters.get("twins_created_us")
    if created is not None:
        return int(created)
    return aggregates["first_publish_us"]


def finding_groups(findings: list[dict]) -> list[dict]:
    """The findings grouped by subscription, kind, form (a config drift: its setting), severity and what
    explains them, in the order of each group's first finding; that finding is the group's worked
    example. Every finding is in exactly one group."""
    groups: dict[tuple, dict] = {}
    for f in findings:
        form = f["drift"]["setting"] if f["kind"] == "config_drift" else f.get("form")
        explained = tuple(f.get("explained_by", ()))
        key = (f["subscription"], f["kind"], form, f["severity"], explained)
        if key not in groups:
            groups[key] = {"subscription": f["subscription"], "kind": f["kind"], "form": form,
                           "severity": f["severity"], "guarantee": f["guarantee"], "explained_by": list(explained),
                           "findings": []}
        groups[key]["findings"].append(f)
    # per subscription, errors first, the largest group first
    ordered = sorted(groups.values(), key=lambda g: (g["subscription"], g["severity"] != "error", -len(g["findings"])))
    return [{"id": f"group-{number}", **g} for number, g in enumerate(ordered, 1)]


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
    if not conformance_ran:
        return ("unexplained: the conformance scenarios did not run (verify --conform says which documented "
                "behaviours the target lacks); read its worked example (the key's plot and evidence rows) and "
                "the check in docs/checks.md")
    return ("unexplained: no conformance scenario covers it; read its worked example (the key's plot and evidence "
            "rows) and the check in docs/checks.md, and re-run to see whether it repeats")


def explanations(result: dict, groups: list[dict]) -> dict:
    """Why the verdict is what it is, as data: one item per violated or inconclusive guarantee (each with
    the error findings behind it, per kind and explanation, and what to do), then the advisory findings
    merged across subscriptions. Unsettled messages (an inconclusive guarantee) are said as a cause
    with their count; nothing here changes a status or leaves a finding out."""
    target, drain = result["target"], result["parameters"].get("drain") or {}
    ran = result.get("conformance") is not None

    def causes(selected: list[dict]) -> list[dict]:
        merged: dict[tuple, dict] = {}
        for group in selected:
            cause = merged.setdefault((group["kind"], tuple(group["explained_by"])), {
                "kind": group["kind"], "count": 0, "forms": {}, "groups": [], "explained_by": group["explained_by"],
                "subscriptions": [], "action": _action(target, group["kind"], group["explained_by"], ran)})
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
                      and g["severity"] == "error"]
            item = {"subscription": name, "guarantee": guarantee, "status": status, "causes": causes(behind)}
            figures = sub["figures"] or {}
            unsettled = (drain.get("unsettled") or {}).get(name) or (
                figures.get("published", 0) - figures.get("settled", 0) if figures else 0)
            if status == "inconclusive" and unsettled:
                item["causes"].append({
                    "kind": "unsettled", "count": unsettled, "forms": {}, "groups": [], "explained_by": [],
                    "subscriptions": [name],
                    "action": ("unsettled messages: see how their last delivery ended under 'What the target did', "
                               "re-run with a longer --drain-timeout; if they stay unsettled, the target keeps them")})
            items.append(item)
    advisories = causes([g for g in groups if g["severity"] == "advisory"])
    return {"guarantees": items, "advisories": advisories}


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
    """The conformance results the run measured, each scenario with its severity (evidence.severity_of_result)."""
    if not conformance:
        return None
    return {**conformance, "scenarios": [{**s, "severity": evidence.severity_of_result(s["result"])}
                                         for s in conformance["scenarios"]]}


def _plot_data(deliveries, info: evidence.RunInfo, groups: list[dict], start_us: int | None, aggregates: dict) -> dict:
    """What the plots need, its size bounded whatever the run's: the binned timeline and the latency
    CDFs come aggregated from the checks' pass (`aggregates`, checks.CheckResults.plot); the
    deliveries of the keys with findings (at most MAX_TIMELINES keys: first the keys of the groups'
    worked examples) are the one read here, filtered by those keys. Times on the plots are seconds
    since `start_us`, as in the findings' sentences."""
    from pyspark.sql import functions as F

    if aggregates["timeline"] is None:
        return {"t0": None, "start": start_us, "timeline": None, "latency": {}, "timelines": {}, "violations": {}}
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
            "violations": {k: v for k, v in violations.items() if k in timelines}}


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
    """The sentence a report shows for a finding, rendered from its fields alone; times as `clock`
    renders them, offset from `start_us` (the run's start) when given."""
    kind, form = finding["kind"], finding.get("form")
    times = finding.get("times") or {}
    seqs = finding.get("seqs") or {}
    attempts = finding.get("attempts") or {}
    seq = finding.get("seq")

    def at(name: str) -> str:
        return clock(times[name], start_us)

    if kind == "config_drift":
        drift = finding["drift"]
        return f"{drift['path']}: {drift['setting']} declared {drift['declared']!r}, target holds {drift['actual']!r}"
    if kind == "endpoint_mismatch":
        where = finding["endpoint"]
        declared = where["declared"]
        if form in ("unobserved_publish", "unobserved_consumer"):
            what = f"{where['messages']} published messages of" if form == "unobserved_publish" else "no pull of"
            return f"{what} {where['resource']} seen on any endpoint listener: the client went around its declared endpoint {declared}"
        used = where["used"] + (" (the global endpoint)" if where["used"] == facts.GLOBAL_ENDPOINT else "")
        if form == "declared_global":
            return f"traffic for {where['resource']} went through {used} as declared: no region is declared, so it is not pinned"
        what = f"{where['messages']} messages in {where['requests']} Publish requests" if form == "publisher" \
            else f"{where['requests']} pull/ack requests"
        return f"{what} for {where['resource']} went through {used}, not the declared {declared}"
    if kind == "lost":
        return f"published at {at('published_us')} (status ok) and never delivered nor dead-lettered"
    if kind == "unexpected":
        if form == "foreign":
            return f"received at {at('received_us')} a message without this run's probe attributes (another run, or not a probe message)"
        return f"received at {at('received_us')} a message (key, seq) this run never published"
    if kind == "duplicate_after_ack":
        gap = (times["received_us"] - times["acked_us"]) / 1e6
        return f"delivered again at {at('received_us')}, {gap:.3f} s after a successful ack at {at('acked_us')}"
    if kind == "duplicate_while_outstanding":
        return (
            f"delivered again at {at('received_us')} while an earlier delivery was outstanding until "
            f"{at('outstanding_until_us')} (no nack, deadline not passed)"
        )
    if kind == "stale_ack_accepted":
        if form == "late_ack":
            return f"ack sent at {at('acked_us')} after the deadline ({at('deadline_us')}) returned success"
        return (
            f"ack sent at {at('acked_us')} returned success although a later delivery at "
            f"{at('superseded_us')} superseded its ack id"
        )
    if kind == "out_of_order":
        previous = seqs.get("previous")
        if form == "rewind_without_replay":
            sentence = (
                f"rewind_without_replay: seq {seq} received at {at('received_us')} right after seq {previous}, "
                "below the highest seq delivered so far: the rewind stopped replaying"
            )
        else:
            after = "(none)" if previous is None else previous
            blocked = "?" if seqs.get("blocking") is None else seqs["blocking"]
            sentence = (f"{form}: seq {seq} received at {at('received_us')} started a run after seq {after} while "
                        f"seq {blocked} was not settled")
        if finding["severity"] == "advisory":
            sentence += "; advisory: the key has a dead-lettered message and order is best effort for those"
        return sentence
    if kind == "dead_letter_missing":
        return (
            f"{attempts['seen']} delivery attempts, never acked, not forwarded to the dead-letter topic "
            f"(max {attempts['max']})"
        )
    if kind == "dead_letter_after_ack":
        return f"forwarded at {at('forwarded_us')} although its last delivery was acked with success"
    if kind == "dead_letter_early":
        return (
            f"forwarded at {at('forwarded_us')} after {attempts['seen']} delivery attempts, fewer than the "
            f"declared {attempts['max']}"
        )
    if kind == "delivery_attempts_exceeded":
        return f"{attempts['seen']} delivery attempts, more than the declared {attempts['max']} (best effort)"
    raise ValueError(f"finding kind {kind!r}: no sentence for it")


# ------------------------------------------------------------------------------------- outputs
def write(result: dict, report: Path, location: Path | str | None = None) -> None:
    """report.json and report.html in `report`; they name the HTML where it ends up (`location`:
    default `report`)."""
    from pubsubguard import storage

    report.mkdir(parents=True, exist_ok=True)
    public = {k: v for k, v in result.items() if not k.startswith("_")}
    public["report_html"] = storage.join(location or report, "report.html")
    (report / "report.json").write_text(json.dumps(public, indent=2, sort_keys=True, default=str) + "\n")
    (report / "report.html").write_text(render_html(result))


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


LEGEND_OUTSIDE = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
ACTION_COLOURS = {"ack": "tab:green", "nack": "tab:orange", "late_ack": "tab:red", "expire": "tab:purple",
                  "crash": "black", "none": "tab:blue"}


def _timeline_plot(data: dict, plt):
    """Throughput (published, delivered, settled per second) and outstanding messages over the run,
    with the faults as bands: nacks (orange), expiries held to their deadline (purple), the crash (grey)."""
    import numpy as np

    bins, bin_s = int(data["bins"]), data["bin_us"] / 1e6
    x = np.arange(bins) * bin_s + (data["t0"] - data["start"]) / 1e6  # seconds since the run's start

    def series(name):
        out = np.zeros(bins)
        for b, n in data["timeline"].get(name, {}).items():
            if 0 <= b < bins:
                out[b] += n
        return out

    published, settled = series("published"), series("settled")
    delivered = sum((series(n) for n in data["timeline"] if n.startswith("delivered:")), np.zeros(bins))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
    top.plot(x, published / bin_s, label="published (per subscription)", color="tab:blue")
    top.plot(x, delivered / bin_s, label="delivered", color="tab:gray")
    top.plot(x, settled / bin_s, label="settled", color="tab:green")
    top.set_ylabel("messages / s")
    top.set_title("Throughput and outstanding messages, with the injected faults")
    bottom.plot(x, np.cumsum(published) - np.cumsum(settled), color="tab:red", label="outstanding (published − settled)")
    bottom.set_ylabel("messages")
    bottom.set_xlabel(f"seconds since the run's start ({clock(data['start'])})")
    nacks, expiries = series("delivered:nack"), series("delivered:expire") + series("delivered:late_ack")
    deadline = max(data["expiry_deadline_s"].values(), default=0)
    for ax in (top, bottom):
        for b in np.flatnonzero(nacks):
            ax.axvspan(x[b], x[b] + bin_s, color="tab:orange", alpha=min(0.5, 0.1 + 0.05 * nacks[b]), lw=0)
        for b in np.flatnonzero(expiries):
            ax.axvspan(x[b], x[b] + deadline, color="tab:purple", alpha=0.08, lw=0)
        if data["crash"]:
            first, last = ((t - data["start"]) / 1e6 for t in data["crash"])
            ax.axvspan(first, last + bin_s, color="black", alpha=0.25, lw=0)
    from matplotlib.patches import Patch

    handles = top.get_legend_handles_labels()[0] + [Patch(color="tab:orange", alpha=0.4, label="nacks"),
                                                    Patch(color="tab:purple", alpha=0.2, label="expiries (held to the deadline)"),
                                                    Patch(color="black", alpha=0.25, label="crash (deliveries held by the dying task)")]
    top.legend(handles=handles, **LEGEND_OUTSIDE)  # beside the axes, never over the data
    bottom.legend(**LEGEND_OUTSIDE)
    return fig


def _latency_plot(data: dict, plt):
    import numpy as np

    fig, ax = plt.subplots(figsize=(10, 4))
    summarised = False
    for name in sorted(data["latency"]):
        cdf = data["latency"][name]
        values = np.maximum(np.asarray(cdf["ms"]), 1e-3)  # a log axis: clamp at 1 µs
        ax.step(values, cdf["fraction"], where="post", label=f"{name} ({cdf['messages']})")
        summarised |= len(values) < cdf["messages"]
    ax.set_xscale("log")
    ax.set_xlabel("publish → first receive (ms, log scale)")
    ax.set_ylabel("fraction of messages")
    for q in (0.5, 0.95, 0.99):
        ax.axhline(q, color="#bbb", lw=0.7, ls=":")
    ax.set_title("Latency CDF per subscription" + (" (steps evenly spaced in rank)" if summarised else ""))
    ax.legend(**LEGEND_OUTSIDE)
    return fig


def _sequence_plot(title: str, rows: list[dict], violations: list[dict], start_us: int, plt):
    fig, ax = plt.subplots(figsize=(10, 3))
    t0 = start_us
    for action, colour in ACTION_COLOURS.items():
        pts = [r for r in rows if r["action"] == action and r["seq"] is not None]
        if pts:
            ax.scatter([(r["receive_time_us"] - t0) / 1e6 for r in pts], [r["seq"] for r in pts], s=14, color=colour, label=action)
    if violations:
        ax.scatter([(v["t"] - t0) / 1e6 for v in violations], [v["seq"] for v in violations], s=90, marker="x",
                   color="red", linewidths=2, label="violating delivery")
        examples = [v for v in violations if v.get("example")]
        if examples:
            ax.scatter([(v["t"] - t0) / 1e6 for v in examples], [v["seq"] for v in examples], s=260, marker="o",
                       facecolors="none", edgecolors="black", linewidths=1.2, label="the worked example")
    ax.set_xlabel(f"seconds since the run's start ({clock(start_us)})")
    ax.set_ylabel("seq")
    ax.set_title(f"Deliveries of {title} (seq over time, by what the subscriber did)")
    ax.legend(**LEGEND_OUTSIDE)
    return fig


def _plots(result: dict) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The run's plots (timeline, latency CDF) and the sequence plot per key ("subscription / key")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = result["_plots"]
    if data.get("timeline") is None:
        return [], {}
    images = [("Timeline", _png(_timeline_plot(data, plt)))]
    if data["latency"]:
        images.append(("Latency CDF per subscription", _png(_latency_plot(data, plt))))
    keys = {title: _png(_sequence_plot(title, rows, data["violations"].get(title, []), data["start"], plt))
            for title, rows in sorted(data["timelines"].items())}
    return images, keys


def _ms(value) -> str:
    return "–" if value is None else f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def _evidence_columns(rows: list[dict]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    return columns


def _drain_text(parameters: dict) -> str:
    drain = parameters.get("drain") or {}
    unsettled = ", ".join(f"{n} {c}" for n, c in sorted((drain.get("unsettled") or {}).items()))
    return {"settled": "every published message settled",
            "stuck": f"ended with messages provably stuck ({unsettled})",
            "timeout": f"timed out after {parameters.get('drain_timeout_s')} s with messages outstanding ({unsettled})",
            }.get(drain.get("ended"), "not recorded")


def _all_findings(result: dict) -> list[dict]:
    """Every finding of a report once, in its order (a drift of a declared subscription is in both lists)."""
    by_id = {f["id"]: f for sub in result["subscriptions"].values() for items in sub["findings"].values() for f in items}
    by_id.update({f["id"]: f for f in result["config_drift"]})
    return sorted(by_id.values(), key=lambda f: int(f["id"].rsplit("-", 1)[1]))


def _cell(column: str, value, start_us):
    """An evidence row's value as the report shows it: a `*_us` time as `clock` renders it."""
    if value is None:
        return ""
    if column.endswith("_us") and isinstance(value, int) and value > 10**12:
        return clock(value, start_us)
    return value


def _what_to_do(why: dict) -> list[tuple[str, list[int]]]:
    """Each distinct action of the why list once, with the numbers of its items (the guarantees first,
    then the advisories, numbered on)."""
    actions: dict[str, list[int]] = {}
    items = [item["causes"] for item in why["guarantees"]] + [[cause] for cause in why["advisories"]]
    for number, causes in enumerate(items, 1):
        for cause in causes:
            numbers = actions.setdefault(cause["action"], [])
            if number not in numbers:
                numbers.append(number)
    return list(actions.items())


def render_html(result: dict) -> str:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("validation", "templates"), autoescape=select_autoescape(["j2", "html"]),
                      undefined=StrictUndefined)  # a missing field is a bug, not an empty cell
    plots, key_plots = _plots(result)
    start_us = result["_plots"].get("start")
    scenarios = {s["id"]: s for s in (result["conformance"] or {}).get("scenarios", [])}
    return env.get_template("report.html.j2").render(
        r=result, guarantees=evidence.GUARANTEES, plots=plots, key_plots=key_plots, ms=_ms,
        dash=lambda v: "–" if v is None else v, evidence_columns=_evidence_columns,
        groups=finding_groups(_all_findings(result)), why=result["explanations"], scenarios=scenarios,
        what_to_do=_what_to_do(result["explanations"]),
        cell=lambda column, value: _cell(column, value, start_us), word=lambda v: str(v).replace("_", " "),
        drain_text=_drain_text(result["parameters"]), max_findings=MAX_FINDINGS_SHOWN,
        access=access_line(result))


def access_line(result: dict) -> str:
    """Who the run was, on which project, through which endpoints (run.json parameters)."""
    parameters = result.get("parameters") or {}
    dialled = (parameters.get("endpoints") or {}).get("dialled") or {}
    through = ", ".join(f"{endpoint} -> {address}" for endpoint, address in sorted(dialled.items())) or "as declared"
    declared = ""
    if "declared_source" in parameters:  # runs before issue 25 did not record it
        from pubsubguard.state import describe

        declared = f" · judged against {describe(parameters['declared_source'])}"
    return (f"identity {parameters.get('identity', 'not recorded')} · project {parameters.get('project')} · "
            f"endpoints {through}{declared}")


SUMMARY_MIN_WIDTH = 200  # when stdout is not a terminal (a log, CI): wide enough for the whole table


def _console():
    """A terminal's own width; otherwise at least SUMMARY_MIN_WIDTH columns (rich would assume 80 and
    truncate the table's cells to "orders…")."""
    import shutil
    import sys

    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=max(shutil.get_terminal_size((SUMMARY_MIN_WIDTH, 24)).columns, SUMMARY_MIN_WIDTH))


def print_summary(result: dict, report: Path | str) -> None:
    from rich.table import Table

    from pubsubguard import storage

    console = _console()
    table = Table(title=f"pubsubguard verify · run {result['run_id'][:8]} · target {result['target']}")
    table.add_column("subscription", no_wrap=True)  # names and figures whole; the findings list wraps
    for g in evidence.GUARANTEES:
        table.add_column(g, no_wrap=True)
    table.add_column("findings")
    table.add_column("delivered", justify="right", no_wrap=True)
    table.add_column("p50/p95/p99 ms", justify="right", no_wrap=True)
    style = {"holds": "green", "violated": "bold red", "inconclusive": "yellow", "not_tested": "dim"}
    for name, sub in result["subscriptions"].items():
        fig = sub["figures"] or {}
        lat = "/".join("–" if fig.get(k) is None else f"{fig[k]:.0f}" for k in ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms"))
        kinds = ", ".join(f"{k}×{len(v)}" for k, v in sorted(sub["findings"].items())) or "–"
        table.add_row(name, *[f"[{style[sub['guarantees'][g]]}]{sub['guarantees'][g]}[/]" for g in evidence.GUARANTEES],
                      kinds, str(fig.get("delivered", "–")), lat)
    console.print(table)
    console.print(access_line(result), markup=False)
    for observation in result["observations"]:
        console.print(f"[yellow]observed:[/] {observation}", highlight=False)
    for line in explanation_lines(result):
        console.print(line, highlight=False)
    for line in what_to_do_lines(result):
        console.print(line, highlight=False)
    colour = {"violated": "red", "inconclusive": "yellow"}.get(result["verdict"], "green")
    console.print(f"verdict: [{colour}]{result['verdict']}[/] · {result['verdict_reason']}", highlight=False)
    console.print(f"report: {storage.join(report, 'report.html')} (json: {storage.join(report, 'report.json')})",
                  highlight=False)


def what_to_do_lines(result: dict) -> list[str]:
    """report.html's "What to do", each action once with the guarantees (and advisories) it is for."""
    why = result.get("explanations")
    if not why:
        return []
    labels = [f"{item['subscription']}.{item['guarantee']}" for item in why["guarantees"]]
    labels += [f"advisory {cause['kind']}" for cause in why["advisories"]]
    return [f"what to do ({', '.join(labels[n - 1] for n in numbers)}): {action}" for action, numbers in _what_to_do(why)]


def explanation_lines(result: dict) -> list[str]:
    """Per subscription and finding kind (and form), how many findings a violated conformance scenario
    explains and which; the findings no scenario explains are said too."""
    if not result.get("conformance"):
        return []
    summary = result["conformance"]["summary"]
    lines = [f"conformance on this target (run {result['conformance']['run_id']}): "
             + ", ".join(f"{n} {r}" for r, n in summary.items())]
    groups: dict[tuple, list[int]] = {}
    for name, sub in result["subscriptions"].items():
        for kind, items in sub["findings"].items():
            for f in items:
                group = (name, kind, f.get("form") if kind != "config_drift" else f["drift"]["setting"],
                         f["severity"], tuple(f.get("explained_by", ())))
                groups.setdefault(group, []).append(1)
    for (name, kind, form, severity, explained), items in sorted(groups.items()):
        what = f"{name}: {len(items)} {kind}{f' ({form})' if form else ''}, {severity}"
        lines.append(f"  {what}: explained by {', '.join(explained)}" if explained
                     else f"  {what}: no scenario explains it")
    return lines
