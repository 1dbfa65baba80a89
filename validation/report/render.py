"""The verification report, rendered from the document `pubsubguard.validation.report.document` builds:
`report.json`, a self-contained `report.html` and the terminal summary table. Rendering only: it neither
reads evidence nor judges.

report.html opens with why: each violated or inconclusive guarantee with what explains it and what to
do; then the guarantees table, the run, and the findings grouped (`document.finding_groups`), each group
with one worked example and its key's sequence plot, the rest folded. Nothing is filtered: every
finding is in report.json, and in report.html up to MAX_FINDINGS_SHOWN per group.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

from ..checks.findings import GUARANTEES
from ..checks.wording import counted
from .document import INCONCLUSIVE_ACTION, clock, finding_groups

MAX_FINDINGS_SHOWN = 50  # per group in report.html, folded (report.json holds every one)


def write(result: dict, report: Path, location: Path | str | None = None) -> None:
    """report.json and report.html in `report`; they name the HTML where it ends up (`location`:
    default `report`)."""
    from pubsubguard.core import storage

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


# the network faults of the fault layer (`--nemesis`) on the timeline, in this order
NETWORK_BANDS = {"kill_stream": ("tab:red", "stream kills"), "lose_response": ("tab:brown", "lost replies"),
                 "delay": ("tab:olive", "delayed calls"), "partition": ("tab:cyan", "partitions (cut off)"),
                 "netem": ("tab:pink", "packet faults (netem)")}


def _bands(ax, starts, ends, colour: str, alphas) -> None:
    """Full-height bands from `starts` to `ends` (data x), as `axvspan` draws each, in one collection:
    a run's timeline can have hundreds (one per bin with nacks or expiries), which as single patches
    took most of the report's render time."""
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    if not len(starts):
        return
    boxes = [[(a, 0.0), (a, 1.0), (b, 1.0), (b, 0.0)] for a, b in zip(starts, ends)]
    colours = [to_rgba(colour, alpha) for alpha in alphas]
    ax.add_collection(PolyCollection(boxes, facecolors=colours, linewidths=0, transform=ax.get_xaxis_transform()),
                      autolim=False)
    ax.update_datalim(np.column_stack([np.concatenate([starts, ends]), np.zeros(2 * len(starts))]), updatey=False)


def _timeline_plot(data: dict, plt):
    """Throughput (published, delivered, settled per second) and outstanding messages over the run,
    with the faults as bands: nacks (orange), expiries held to their deadline (purple), the crash (grey),
    and the network faults the fault layer applied (`data["network"]`, NETWORK_BANDS): a band per bin
    with stream kills, lost or delayed replies (darker with more), a partition from its start to its end."""
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
    nacked, expired = np.flatnonzero(nacks), np.flatnonzero(expiries)
    for ax in (top, bottom):
        _bands(ax, x[nacked], x[nacked] + bin_s, "tab:orange", np.minimum(0.5, 0.1 + 0.05 * nacks[nacked]))
        _bands(ax, x[expired], x[expired] + deadline, "tab:purple", np.full(len(expired), 0.08))
        if data["crash"]:
            first, last = ((t - data["start"]) / 1e6 for t in data["crash"])
            ax.axvspan(first, last + bin_s, color="black", alpha=0.25, lw=0)
    network = data.get("network") or {}
    for kind, (colour, _) in NETWORK_BANDS.items():
        if not network.get(kind):
            continue
        spans = (np.asarray(network[kind], np.float64) - data["start"]) / 1e6
        if kind in ("partition", "netem"):  # windows
            starts, ends, alphas = spans[:, 0], spans[:, 1], np.full(len(spans), 0.2)
        else:  # instants: one band per bin of the timeline, darker with more faults in it
            bins_of, counts = np.unique(np.floor((spans[:, 0] - x[0]) / bin_s).astype(np.int64), return_counts=True)
            starts = x[0] + bins_of * bin_s
            ends, alphas = starts + bin_s, np.minimum(0.5, 0.1 + 0.05 * counts)
        for ax in (top, bottom):
            _bands(ax, starts, ends, colour, alphas)
    from matplotlib.patches import Patch

    handles = top.get_legend_handles_labels()[0] + [Patch(color="tab:orange", alpha=0.4, label="nacks"),
                                                    Patch(color="tab:purple", alpha=0.2, label="expiries (held to the deadline)"),
                                                    Patch(color="black", alpha=0.25, label="crash (deliveries held by the dying task)")]
    handles += [Patch(color=colour, alpha=0.3, label=f"network: {label}")
                for kind, (colour, label) in NETWORK_BANDS.items() if network.get(kind)]
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
            "ceiling": f"reached its ceiling after {(drain.get('clock') or {}).get('drained_s')} s while the target "
                       f"still made progress ({unsettled})",
            "timeout": f"timed out after {parameters.get('drain_timeout_s')} s with messages outstanding ({unsettled})",
            }.get(drain.get("ended"), "not recorded")


def _all_findings(result: dict) -> list[dict]:
    """Every finding of a report once, in its order (a drift of a declared subscription is in both lists)."""
    by_id = {f["id"]: f for sub in result["subscriptions"].values() for items in sub["findings"].values() for f in items}
    by_id.update({f["id"]: f for f in result.get("config_drift") or ()})
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

    env = Environment(loader=PackageLoader("pubsubguard.validation.report", "templates"), autoescape=select_autoescape(["j2", "html"]),
                      undefined=StrictUndefined)  # a missing field is a bug, not an empty cell
    plots, key_plots = _plots(result)
    start_us = result["_plots"].get("start")
    scenarios = {s["id"]: s for s in (result["conformance"] or {}).get("scenarios", [])}
    return env.get_template("report.html.j2").render(
        r=result, guarantees=GUARANTEES, plots=plots, key_plots=key_plots, ms=_ms,
        dash=lambda v: "–" if v is None else v, evidence_columns=_evidence_columns,
        groups=finding_groups(_all_findings(result)), why=result["explanations"], scenarios=scenarios,
        what_to_do=_what_to_do(result["explanations"]),
        cell=lambda column, value: _cell(column, value, start_us), word=lambda v: str(v).replace("_", " "),
        drain_text=_drain_text(result["parameters"]), max_findings=MAX_FINDINGS_SHOWN, inconclusive_action=INCONCLUSIVE_ACTION,
        access=access_line(result))


def access_line(result: dict) -> str:
    """Who the run was, on which project, through which endpoints (run.json parameters)."""
    parameters = result.get("parameters") or {}
    dialled = (parameters.get("endpoints") or {}).get("dialled") or {}
    through = ", ".join(f"{endpoint} -> {address}" for endpoint, address in sorted(dialled.items())) or "as declared"
    declared = ""
    if "declared_source" in parameters:  # runs before issue 25 did not record it
        declared = f" · judged against {_declared_source(parameters['declared_source'], result.get('_absent', ()))}"
    schedule = parameters.get("nemesis")
    faults = ",".join(f"{k}={v}" for k, v in (parameters.get("faults") or {}).items() if v) or "none"
    under = f" · faults {faults}" + (f" · fault schedule {schedule.get('source')} "
                                     f"({counted(len(schedule.get('faults') or ()), 'entry', 'entries')}, "
                                     f"seed {schedule.get('seed')})" if schedule else "")
    return (f"identity {parameters.get('identity', 'not recorded')} · project {parameters.get('project')} · "
            f"endpoints {through}{declared}{under}")


def _declared_source(source: dict | None, absent) -> str:
    """What the run was judged against (`state.describe`), a file that is not there named, not pathed."""
    from pubsubguard.core.state import describe

    if not source or not absent:
        return describe(source)
    gone = {k: f"{Path(str(v)).name} (the run's, not here)" for k, v in source.items() if k in ("location", "names_from")
            and v in absent}
    return describe({**source, **gone})


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


SUMMARY_ROWS = 40  # beyond this many subscriptions the terminal's table folds those where every tested guarantee holds


def _standing(sub: dict) -> int:
    """0: a guarantee violated, 1: one inconclusive, 2: every tested guarantee holds (or none was tested)."""
    statuses = set(sub["guarantees"].values())
    return 0 if "violated" in statuses else 1 if "inconclusive" in statuses else 2


def summary_rows(subscriptions: dict) -> tuple[list[str], list[str]]:
    """The terminal table's rows, what is not `holds` first (violated, then inconclusive, each in name order,
    then the rest), and the rows folded into one line: those holding every tested guarantee, once the estate has
    more than SUMMARY_ROWS subscriptions. report.html and report.json keep every subscription."""
    ordered = sorted(subscriptions, key=lambda name: (_standing(subscriptions[name]), name))
    if len(ordered) <= SUMMARY_ROWS:
        return ordered, []
    return ([n for n in ordered if _standing(subscriptions[n]) < 2],
            [n for n in ordered if _standing(subscriptions[n]) == 2])


def summary_headline(subscriptions: dict) -> str:
    """`300 subscriptions: 92 with a guarantee violated, 0 inconclusive, 208 holding every tested guarantee`."""
    counts = [0, 0, 0]
    for sub in subscriptions.values():
        counts[_standing(sub)] += 1
    return (f"{len(subscriptions)} subscription{'s' if len(subscriptions) != 1 else ''}: {counts[0]} with a guarantee "
            f"violated, {counts[1]} inconclusive, {counts[2]} holding every tested guarantee")


def print_summary(result: dict, report: Path | str) -> None:
    from rich.table import Table

    from pubsubguard.core import storage

    console = _console()
    table = Table(title=f"pubsubguard verify · run {result['run_id'][:8]} · target {result['target']}")
    table.add_column("subscription", no_wrap=True)  # names and figures whole; the findings list wraps
    for g in GUARANTEES:
        table.add_column(g, no_wrap=True)
    table.add_column("findings")
    table.add_column("delivered", justify="right", no_wrap=True)
    table.add_column("p50/p95/p99 ms", justify="right", no_wrap=True)
    style = {"holds": "green", "violated": "bold red", "inconclusive": "yellow", "not_tested": "dim"}
    shown, folded = summary_rows(result["subscriptions"])
    console.print(summary_headline(result["subscriptions"]), highlight=False)
    for name in shown:
        sub = result["subscriptions"][name]
        fig = sub["figures"] or {}
        lat = "/".join("–" if fig.get(k) is None else f"{fig[k]:.0f}" for k in ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms"))
        kinds = ", ".join(f"{k}×{len(v)}" for k, v in sorted(sub["findings"].items())) or "–"
        table.add_row(name, *[f"[{style[sub['guarantees'][g]]}]{sub['guarantees'][g]}[/]" for g in GUARANTEES],
                      kinds, str(fig.get("delivered", "–")), lat)
    if folded:
        table.add_row(f"… {len(folded)} more", *["" for _ in GUARANTEES],
                      "every tested guarantee holds (all rows: report.html)", "", "")
    console.print(table)
    colour = {"violated": "red", "inconclusive": "yellow"}.get(result["verdict"], "green")
    console.print(f"verdict: [{colour}]{result['verdict']}[/] · {result['verdict_reason']}", highlight=False)
    for line in what_to_do_lines(result):
        console.print(line, highlight=False)
    for line in explanation_lines(result):
        console.print(line, highlight=False)
    for line in [*schedule_lines(result), *network_fault_lines(result)]:
        console.print(line, highlight=False)
    shown_observations, internals = observations_shown(result["observations"])
    for observation in shown_observations:
        console.print(f"[yellow]observed:[/] {observation}", highlight=False)
    if internals:
        console.print(f"[yellow]observed:[/] {counted(len(internals), 'more observation')} of the probe's own clients "
                      f"(the client library's warnings, failed calls, streams opened and closed): "
                      f"{storage.join(report, 'report.html')} (What the target did), report.json `observations`",
                      highlight=False)
    console.print(access_line(result), markup=False)
    console.print(f"report: {storage.join(report, 'report.html')} (json: {storage.join(report, 'report.json')})",
                  highlight=False)


# Observations about the probe's own clients rather than the target (the client library's internals, a task's
# calls and streams): the terminal folds them into a count with a pointer to the report, which lists every one.
CLIENT_INTERNALS = ("subscriber task ", "publisher task ", "the Pub/Sub client library ")


def observations_shown(observations: list[str]) -> tuple[list[str], list[str]]:
    """(the observations the terminal prints, those it folds into one line: CLIENT_INTERNALS)."""
    folded = [o for o in observations if o.startswith(CLIENT_INTERNALS)]
    return [o for o in observations if not o.startswith(CLIENT_INTERNALS)], folded


def schedule_lines(result: dict) -> list[str]:
    """One line per entry of the fault schedule (`--nemesis`), whatever happened to it: how many times the fault
    layer applied it, and how many times it did not and why (the commonest reason, its numbers as recorded), or
    that nothing it selects ever passed the layer. Entries numbered as the schedule's `faults` (from 0), as every
    message and report.json's rows number them."""
    nemesis = (result.get("parameters") or {}).get("nemesis") or {}
    rows: dict[int, list[dict]] = {}
    for row in nemesis.get("applied") or ():
        rows.setdefault(row["entry"], []).append(row)
    lines = []
    for entry in nemesis.get("faults") or ():
        index = entry.get("index")
        on = entry.get("subscription") or entry.get("topic")
        what = f"schedule entry {index} ({entry.get('kind')}{f' on {on}' if on else ''})"
        done = [r for r in rows.get(index, ()) if not r["detail"].startswith("NOT applied")]
        refused = [r["detail"].removeprefix("NOT applied").lstrip(": ") for r in rows.get(index, ())
                   if r["detail"].startswith("NOT applied")]
        said = [f"applied {counted(len(done), 'time')}"] if done else []
        if refused:  # the reasons told apart by their words (a time or a count in them differs from row to row)
            kinds = {re.sub(r"[\d.,+]+", "N", reason) for reason in refused}
            said.append(f"not applied {counted(len(refused), 'time')} (the first: {refused[0]}"
                        + (f"; {counted(len(kinds) - 1, 'other reason')} in report.json" if len(kinds) > 1 else "") + ")")
        if not said:
            said.append("not applied: nothing it selects passed the fault layer while it applied")
        lines.append(f"{what}: {', '.join(said)}")
    return lines


def network_fault_lines(result: dict) -> list[str]:
    """Each guarantee named under the network faults its subscription went through (`--nemesis`):
    `orders-eod: exactly_once holds, completeness inconclusive under 3 stream kills, 12 lost ack responses`."""
    lines = []
    for name, sub in result["subscriptions"].items():
        under = (sub.get("network_faults") or {}).get("under")
        if under:
            statuses = ", ".join(f"{g} {s}" for g, s in sub["guarantees"].items() if s != "not_tested")
            lines.append(f"under faults: {name}: {statuses} under {under}")
    return lines


def what_to_do_lines(result: dict) -> list[str]:
    """report.html's "What to do", each action once with the guarantees (and advisories) it is for."""
    why = result.get("explanations")
    if not why:
        return []
    labels = [f"{item['subscription']}.{item['guarantee']}" for item in why["guarantees"]]
    labels += [f"advisory {cause['kind']}" for cause in why["advisories"]]
    lines = []
    for action, numbers in _what_to_do(why):
        planted = _planted_by(why, action)
        lines.append(f"what to do ({', '.join(labels[n - 1] for n in numbers)}): "
                     + (f"{', '.join(planted)}: {action}" if planted else action))
    return lines


def _planted_by(why: dict, action: str) -> list[str]:
    """The schedule entries of the causes whose action is `action` (`planted by schedule entry N (kind)`), once each."""
    causes = [c for item in why["guarantees"] for c in item["causes"]] + list(why["advisories"])
    planted = [entry for c in causes if c["action"] == action for entry in c.get("caused_by", ())
               if entry.startswith("planted by ")]
    return sorted(set(planted), key=lambda said: int(re.search(r"entry (\d+)", said).group(1)))  # in the schedule's order


def explanation_lines(result: dict) -> list[str]:
    """Per subscription and finding kind (and form), how many findings a violated conformance scenario
    explains and which; the findings no scenario explains are said too."""
    if not result.get("conformance"):
        return []
    summary = result["conformance"]["summary"]
    lines = [f"conformance on this target (run {result['conformance']['run_id']}): "
             + ", ".join(f"{n} {r}" for r, n in summary.items())]
    groups: dict[tuple, list[int]] = {}
    for f in _all_findings(result):  # the config drift of plumbing (a dead-letter drain not probed) included, as report.json
        kind = f["kind"]
        group = (f["subscription"], kind, f.get("form") if kind != "config_drift" else f["drift"]["setting"],
                 f["severity"], tuple(f.get("explained_by", ())), tuple(f.get("planted_by", ())))
        groups.setdefault(group, []).append(1)
    for (name, kind, form, severity, explained, planted), items in sorted(groups.items()):
        what = f"{name}: {len(items)} {kind}{f' ({form})' if form else ''}, {severity}"
        lines.append(f"  {what}: planted by {', '.join(planted)}, as the schedule meant" if planted
                     else f"  {what}: rests on rows the evidence may lack, no error against the target"
                     if severity == "inconclusive" else f"  {what}: explained by {', '.join(explained)}" if explained
                     else f"  {what}: no scenario explains it")
    for item in (result.get("explanations") or {}).get("guarantees", ()):
        for cause in item["causes"]:
            if cause["kind"] != "unsettled":
                continue
            forms = ", ".join(cause["forms"])
            what = f"{item['subscription']}: {cause['count']} never settled{f' ({forms})' if forms else ''}"
            line = (f"  {what}: explained by {', '.join(cause['explained_by'])}" if cause["explained_by"]
                    else f"  {what}: caused by the run's own fault: {', '.join(cause['caused_by'])}"
                    if cause.get("caused_by") else f"  {what}: no scenario explains it")
            if line not in lines:  # one cause of several guarantees (completeness, exactly_once, ...) said once
                lines.append(line)
    return lines
