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
                     redelivery_rate, latency_p50_ms, latency_p95_ms, latency_p99_ms, hottest_keys}}}}

The verdict is `violated` (exit code 1) when any declared guarantee of any subscription is violated:
an `error` finding from the checks or a `config_drift` on a guarantee-bearing setting.

The report does not judge: `build` receives a `validation.verdict.RunVerdict` and renders it; each
finding's sentence is made from its fields by `describe`.
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import asdict
from pathlib import Path

from pubsubguard import storage
from validation import evidence
from validation.verdict import RunVerdict

REPORT_FORMAT = "pubsubguard-report/1"
MAX_TIMELINES = 8
MAX_LATENCY_POINTS = 200_000


def read_evidence(spark, evidence_dir: Path):
    """(publishes, deliveries) DataFrames of an evidence directory, in the contract's schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    frames = []
    for name, schema in (("publishes", evidence.PUBLISH_SCHEMA), ("deliveries", evidence.DELIVERY_SCHEMA)):
        directory = storage.join(evidence_dir, name)  # a path, or a URI Spark's Hadoop reads
        if not storage.is_remote(directory):
            Path(directory).mkdir(parents=True, exist_ok=True)
        frames.append(spark.read.schema(from_arrow_schema(schema)).parquet(directory))
    return tuple(frames)


def build(verdict: RunVerdict, info: evidence.RunInfo, evidence_dir: Path, deliveries) -> dict:
    """The report of a judged run (plus the data its plots need, read from `deliveries`): the
    verdict's findings with their sentences, per subscription."""
    findings = [{**f, "detail": describe(f)} for f in verdict.findings]
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
        "run_id": info.run_id,
        "target": info.target,
        "stack": info.parameters.get("stack"),
        "verdict": verdict.verdict,
        "exit_code": 1 if verdict.verdict == "violated" else 0,
        "parameters": {k: v for k, v in info.parameters.items() if k not in ("config_drift", "observations")},
        "observations": [*info.parameters.get("observations", []), *verdict.observations],
        "config_drift": [f for f in findings if f["kind"] == "config_drift"],
        "subscriptions": subscriptions,
        "evidence": str(evidence_dir),
    }
    result["_plots"] = _plot_data(deliveries, info, findings)
    return result


def _plot_data(deliveries, info: evidence.RunInfo, findings: list[dict]) -> dict:
    from pyspark.sql import functions as F

    mine = deliveries.where((F.col("probe_run") == info.run_id) & (F.col("kind") == "delivery"))
    first = (
        mine.where(F.col("publish_time_us").isNotNull())
        .groupBy("subscription", "key", "seq")
        .agg(F.min(F.col("receive_time_us") - F.col("publish_time_us")).alias("latency_us"))
        .limit(MAX_LATENCY_POINTS)
        .collect()
    )
    latency: dict[str, list[float]] = {}
    for r in first:
        latency.setdefault(r["subscription"], []).append(r["latency_us"] / 1000.0)
    attempts: dict[str, dict[int, int]] = {}
    for r in mine.groupBy("subscription", "delivery_attempt").count().collect():
        attempts.setdefault(r["subscription"], {})[r["delivery_attempt"] if r["delivery_attempt"] is not None else 0] = r["count"]
    keyed = []
    for f in findings:
        pair = (f["subscription"], f["key"])
        if f["key"] is not None and pair not in keyed and f["severity"] in ("error", "advisory"):
            keyed.append(pair)
    keyed = keyed[:MAX_TIMELINES]
    timelines: dict[str, list] = {}
    if keyed:
        cond = None
        for sub, key in keyed:
            c = (F.col("subscription") == sub) & (F.col("key") == key)
            cond = c if cond is None else cond | c
        for r in (deliveries.where((F.col("probe_run") == info.run_id) & cond)
                  .select("subscription", "key", "seq", "receive_time_us", "action", "ack_result", "kind",
                          "subscriber_task").collect()):
            timelines.setdefault(f"{r['subscription']} / {r['key']}", []).append(r.asDict())
    return {"latency": latency, "attempts": attempts, "timelines": timelines}


# ------------------------------------------------------------------------------------- sentences
def describe(finding: dict) -> str:
    """The sentence a report shows for a finding, rendered from its fields alone."""
    kind, form = finding["kind"], finding.get("form")
    times = finding.get("times") or {}
    seqs = finding.get("seqs") or {}
    attempts = finding.get("attempts") or {}
    received, seq = times.get("received_us"), finding.get("seq")
    if kind == "config_drift":
        drift = finding["drift"]
        return f"{drift['path']}: {drift['setting']} declared {drift['declared']!r}, target holds {drift['actual']!r}"
    if kind == "lost":
        return f"published at {times['published_us']} (status ok) and never delivered nor dead-lettered"
    if kind == "unexpected":
        if form == "foreign":
            return f"received at {received} a message without this run's probe attributes (another run, or not a probe message)"
        return f"received at {received} a message (key, seq) this run never published"
    if kind == "duplicate_after_ack":
        acked = times["acked_us"]
        return f"delivered again at {received}, {(received - acked) / 1e6:.3f} s after a successful ack at {acked}"
    if kind == "duplicate_while_outstanding":
        return (
            f"delivered again at {received} while an earlier delivery was outstanding until "
            f"{times['outstanding_until_us']} (no nack, deadline not passed)"
        )
    if kind == "stale_ack_accepted":
        if form == "late_ack":
            return f"ack sent at {times['acked_us']} after the deadline ({times['deadline_us']}) returned success"
        return (
            f"ack sent at {times['acked_us']} returned success although a later delivery at "
            f"{times['superseded_us']} superseded its ack id"
        )
    if kind == "out_of_order":
        previous = seqs.get("previous")
        if form == "rewind_without_replay":
            sentence = (
                f"rewind_without_replay: seq {seq} received at {received} right after seq {previous}, "
                "below the highest seq delivered so far: the rewind stopped replaying"
            )
        else:
            after = "(none)" if previous is None else previous
            blocked = "?" if seqs.get("blocking") is None else seqs["blocking"]
            sentence = f"{form}: seq {seq} received at {received} started a run after seq {after} while seq {blocked} was not settled"
        if finding["severity"] == "advisory":
            sentence += "; advisory: the key has a dead-lettered message and order is best effort for those"
        return sentence
    if kind == "dead_letter_missing":
        return (
            f"{attempts['seen']} delivery attempts, never acked, not forwarded to the dead-letter topic "
            f"(max {attempts['max']})"
        )
    if kind == "dead_letter_after_ack":
        return f"forwarded at {times['forwarded_us']} although its last delivery was acked with success"
    if kind == "dead_letter_early":
        return (
            f"forwarded at {times['forwarded_us']} after {attempts['seen']} delivery attempts, fewer than the "
            f"declared {attempts['max']}"
        )
    if kind == "delivery_attempts_exceeded":
        return f"{attempts['seen']} delivery attempts, more than the declared {attempts['max']} (best effort)"
    raise ValueError(f"finding kind {kind!r}: no sentence for it")


# ------------------------------------------------------------------------------------- outputs
def write(result: dict, report: Path) -> None:
    report.mkdir(parents=True, exist_ok=True)
    public = {k: v for k, v in result.items() if not k.startswith("_")}
    public["report_html"] = str(report / "report.html")
    (report / "report.json").write_text(json.dumps(public, indent=2, sort_keys=True, default=str) + "\n")
    (report / "report.html").write_text(render_html(result))


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _plots(result: dict) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = result["_plots"]
    images = []
    if data["latency"]:
        fig, ax = plt.subplots(figsize=(9, 4))
        names = sorted(data["latency"])
        ax.hist([data["latency"][n] for n in names], bins=40, label=names, histtype="step", linewidth=1.5)
        ax.set_xlabel("publish → first delivery (ms)")
        ax.set_ylabel("messages")
        ax.set_title("Latency distribution per subscription")
        ax.legend(fontsize=8)
        images.append(("Latency distribution per subscription", _png(fig)))
    if data["attempts"]:
        names = sorted(data["attempts"])
        attempts = sorted({a for per in data["attempts"].values() for a in per})
        fig, ax = plt.subplots(figsize=(9, 4))
        width = 0.8 / max(1, len(names))
        for i, name in enumerate(names):
            ax.bar([a + i * width for a in attempts], [data["attempts"][name].get(a, 0) for a in attempts],
                   width=width, label=name)
        ax.set_xlabel("delivery attempt (0: no dead-letter policy, the service does not count)")
        ax.set_ylabel("deliveries")
        ax.set_yscale("log")
        ax.set_title("Deliveries per attempt")
        ax.legend(fontsize=8)
        images.append(("Deliveries per attempt", _png(fig)))
    colors = {"ack": "tab:green", "nack": "tab:orange", "late_ack": "tab:red", "expire": "tab:purple",
              "crash": "black", "none": "tab:blue"}
    for title, rows in sorted(data["timelines"].items()):
        fig, ax = plt.subplots(figsize=(9, 3))
        t0 = min(r["receive_time_us"] for r in rows)
        for action, color in colors.items():
            pts = [r for r in rows if r["action"] == action and r["seq"] is not None]
            if pts:
                ax.scatter([(r["receive_time_us"] - t0) / 1e6 for r in pts], [r["seq"] for r in pts], s=14,
                           color=color, label=action)
        ax.set_xlabel("seconds since first delivery of the key")
        ax.set_ylabel("seq")
        ax.set_title(f"Delivery timeline: {title}")
        ax.legend(fontsize=7)
        images.append((f"Delivery timeline: {title}", _png(fig)))
    return images


def _rate(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def render_html(result: dict) -> str:
    e = html.escape
    rows = []
    for name, sub in result["subscriptions"].items():
        g = sub["guarantees"]
        fig = sub["figures"] or {}
        kinds = ", ".join(f"{k} ×{len(v)}" for k, v in sorted(sub["findings"].items())) or "—"
        cells = "".join(f'<td class="{g[x]}">{g[x]}</td>' for x in evidence.GUARANTEES)
        lat = "/".join("–" if fig.get(k) is None else f"{fig[k]:.0f}" for k in ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms"))
        rows.append(f"<tr><td>{e(name)}</td>{cells}<td>{e(kinds)}</td><td>{fig.get('delivered', '–')}</td>"
                    f"<td>{lat}</td><td>{_rate(fig.get('redelivery_rate'))}</td></tr>")
    details = []
    for name, sub in result["subscriptions"].items():
        for kind, items in sorted(sub["findings"].items()):
            lis = "".join(
                f"<li><b>{e(f['severity'])}</b> key={e(str(f['key']))} seq={e(str(f['seq']))} "
                f"msg={e(str(f['message_id']))}: {e(str(f['detail']))}"
                f"<details><summary>evidence</summary><pre>{e(json.dumps(f['evidence'], indent=1, default=str)[:4000])}</pre></details></li>"
                for f in items[:50]
            )
            more = f"<li>… {len(items) - 50} more in report.json</li>" if len(items) > 50 else ""
            details.append(f"<h3>{e(name)}: {e(kind)} ({len(items)})</h3><ul>{lis}{more}</ul>")
    images = "".join(f'<h3>{e(t)}</h3><img alt="{e(t)}" src="data:image/png;base64,{b}">' for t, b in _plots(result))
    observations = "".join(f"<li>{e(o)}</li>" for o in result["observations"]) or "<li>none</li>"
    head = "".join(f"<th>{x}</th>" for x in evidence.GUARANTEES)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>pubsubguard verify {e(result['run_id'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:4px 8px}}table{{border-collapse:collapse}}
.holds{{background:#d7f5d7}}.violated{{background:#f7c6c6}}.not_tested{{background:#eee}}img{{max-width:100%}}</style></head><body>
<h1>pubsubguard verify: <span class="{e(result['verdict'])}">{e(result['verdict'])}</span></h1>
<p>run {e(result['run_id'])} · target {e(result['target'])} · stack {e(str(result['stack']))}</p>
<h2>Guarantees per subscription</h2>
<table><tr><th>subscription</th>{head}<th>findings</th><th>delivered</th><th>latency p50/p95/p99 ms</th><th>redelivery rate</th></tr>
{''.join(rows)}</table>
<h2>What the target did</h2><ul>{observations}</ul>
<h2>Plots</h2>{images}
<h2>Findings</h2>{''.join(details) or '<p>none</p>'}
</body></html>
"""


SUMMARY_MIN_WIDTH = 160  # when stdout is not a terminal (a log, CI): wide enough for the whole table


def _console():
    """A terminal's own width; otherwise at least SUMMARY_MIN_WIDTH columns (rich would assume 80 and
    truncate the table's cells to "orders…")."""
    import shutil
    import sys

    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=max(shutil.get_terminal_size((SUMMARY_MIN_WIDTH, 24)).columns, SUMMARY_MIN_WIDTH))


def print_summary(result: dict, report: Path) -> None:
    from rich.table import Table

    console = _console()
    table = Table(title=f"pubsubguard verify · run {result['run_id'][:8]} · target {result['target']}")
    table.add_column("subscription", no_wrap=True)  # names and figures whole; the findings list wraps
    for g in evidence.GUARANTEES:
        table.add_column(g, no_wrap=True)
    table.add_column("findings")
    table.add_column("delivered", justify="right", no_wrap=True)
    table.add_column("p50/p95/p99 ms", justify="right", no_wrap=True)
    style = {"holds": "green", "violated": "bold red", "not_tested": "dim"}
    for name, sub in result["subscriptions"].items():
        fig = sub["figures"] or {}
        lat = "/".join("–" if fig.get(k) is None else f"{fig[k]:.0f}" for k in ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms"))
        kinds = ", ".join(f"{k}×{len(v)}" for k, v in sorted(sub["findings"].items())) or "–"
        table.add_row(name, *[f"[{style[sub['guarantees'][g]]}]{sub['guarantees'][g]}[/]" for g in evidence.GUARANTEES],
                      kinds, str(fig.get("delivered", "–")), lat)
    console.print(table)
    for observation in result["observations"]:
        console.print(f"[yellow]observed:[/] {observation}")
    colour = "red" if result["verdict"] == "violated" else "green"
    console.print(f"verdict: [{colour}]{result['verdict']}[/] · report: {report / 'report.html'} (json: {report / 'report.json'})")
