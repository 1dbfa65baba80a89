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
         "findings": {kind: [finding, ...]},      # finding: evidence.FINDING_COLUMNS, evidence parsed
         "figures": {published, delivered, distinct_delivered, acked, dead_lettered, redeliveries,
                     redelivery_rate, latency_p50_ms, latency_p95_ms, latency_p99_ms, hottest_keys}}}}

The verdict is `violated` (exit code 1) when any declared guarantee of any subscription is violated:
an `error` finding from the checks or a `config_drift` on a guarantee-bearing setting.
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import asdict
from pathlib import Path

from validation import evidence

REPORT_FORMAT = "pubsubguard-report/1"
MAX_TIMELINES = 8
MAX_LATENCY_POINTS = 200_000


def read_evidence(spark, evidence_dir: Path):
    """(publishes, deliveries) DataFrames of an evidence directory, in the contract's schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    frames = []
    for name, schema in (("publishes", evidence.PUBLISH_SCHEMA), ("deliveries", evidence.DELIVERY_SCHEMA)):
        directory = evidence_dir / name
        directory.mkdir(parents=True, exist_ok=True)
        frames.append(spark.read.schema(from_arrow_schema(schema)).parquet(str(directory)))
    return tuple(frames)


def _finding(row: dict) -> dict:
    out = dict(row)
    try:
        out["evidence"] = json.loads(out["evidence"]) if isinstance(out.get("evidence"), str) else out.get("evidence")
    except json.JSONDecodeError:
        pass
    return out


def build(spark, evidence_dir: Path, info: evidence.RunInfo) -> dict:
    """Run the checks on the evidence and assemble the report (plus the data its plots need)."""
    from pyspark.sql import functions as F

    from validation.checks import guarantee_status, run_checks

    publishes, deliveries = read_evidence(spark, evidence_dir)
    # The checks, the figures and the plots all read the evidence: read its part files once.
    publishes, deliveries = publishes.cache(), deliveries.cache()
    try:
        return _build(spark, evidence_dir, info, publishes, deliveries)
    finally:
        publishes.unpersist()
        deliveries.unpersist()


def _build(spark, evidence_dir: Path, info: evidence.RunInfo, publishes, deliveries) -> dict:
    from pyspark.sql import functions as F

    from validation.checks import guarantee_status, run_checks

    probed = [s for s in info.subscriptions if s.name not in info.tested]
    results = run_checks(publishes, deliveries, probed, skew_us=int(info.parameters.get("skew_us", 250_000)))
    findings = [_finding(r.asDict(recursive=True)) for r in results.findings.collect()]
    stats = {r["subscription"]: r.asDict(recursive=True) for r in results.stats.collect()}
    drift = [_finding(f) for f in info.parameters.get("config_drift", [])]
    poison_topics = {
        r["topic"] for r in publishes.where(F.col("poison") & (F.col("status") == "ok")).select("topic").distinct().collect()
    }
    all_findings = findings + drift

    subscriptions = {}
    verdict = "holds"
    for sub in info.subscriptions:
        tested = sub.name not in info.tested
        status = guarantee_status(all_findings, sub, tested=tested, poison_published=sub.topic in poison_topics)
        if "violated" in status.values():
            verdict = "violated"
        by_kind: dict[str, list] = {}
        for f in all_findings:
            if f["subscription"] == sub.name:
                by_kind.setdefault(f["kind"], []).append(f)
        figures = stats.get(sub.name)
        if figures:
            figures = {k: v for k, v in figures.items() if k != "subscription"}
        subscriptions[sub.name] = {
            "declared": asdict(sub),
            "tested": tested,
            "not_tested_reason": info.tested.get(sub.name),
            "guarantees": status,
            "findings": by_kind,
            "figures": figures,
        }
    result = {
        "format": REPORT_FORMAT,
        "run_id": info.run_id,
        "target": info.target,
        "stack": info.parameters.get("stack"),
        "verdict": verdict,
        "exit_code": 1 if verdict == "violated" else 0,
        "parameters": {k: v for k, v in info.parameters.items() if k not in ("config_drift", "observations")},
        "observations": list(info.parameters.get("observations", [])),
        "config_drift": drift,
        "subscriptions": subscriptions,
        "evidence": str(evidence_dir),
    }
    created = info.parameters.get("twins_created_us")
    if created:
        replayed = deliveries.where(
            (F.col("probe_run").isNull() | (F.col("probe_run") != info.run_id)) & (F.col("publish_time_us") < created)
        ).count()
        if replayed:
            result["observations"].append(
                f"{replayed} deliveries on the probe's new twin subscriptions were messages published before the "
                "twins existed (foreign to this run, reported as `unexpected`): this target delivers a topic's "
                "retained backlog to a newly created subscription"
            )
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


# ------------------------------------------------------------------------------------- outputs
def write(result: dict, report: Path, spark=None, evidence_dir: Path | None = None) -> None:
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
