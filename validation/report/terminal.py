"""The terminal summary of a report (`pubsubguard verify`'s stdout): the headline, the guarantees table (what is
not `holds` first, folded beyond SUMMARY_ROWS subscriptions), the verdict, what to do, what explains the findings,
the fault schedule, the observations and where the report is. Rendered from the document
`pubsubguard.validation.report.document` builds, as report.html is (`render`)."""

from __future__ import annotations

import re
from pathlib import Path

from ..checks.findings import GUARANTEES
from ..checks.wording import counted
from .render import all_findings, what_to_do, access_line


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
    for action, numbers in what_to_do(why):
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
    for f in all_findings(result):  # the config drift of plumbing (a dead-letter drain not probed) included, as report.json
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
