"""The verification report, rendered from the document `pubsubguard.validation.report.document` builds:
`report.json` and a self-contained `report.html` (its plots: `plots`; the terminal summary: `terminal`).
Rendering only: it neither reads evidence nor judges.

report.html opens with why: each violated or inconclusive guarantee with what explains it and what to
do; then the guarantees table, the run, and the findings grouped (`conformance.explains.finding_groups`), each group
with one worked example and its key's sequence plot, the rest folded. Nothing is filtered: every
finding is in report.json, and in report.html up to MAX_FINDINGS_SHOWN per group.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..checks.findings import GUARANTEES
from ..checks.wording import clock, counted
from ..conformance.explains import INCONCLUSIVE_ACTION, finding_groups
from .plots import plots as draw

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


def all_findings(result: dict) -> list[dict]:
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


def what_to_do(why: dict) -> list[tuple[str, list[int]]]:
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
    plots, key_plots = draw(result)
    start_us = result["_plots"].get("start")
    scenarios = {s["id"]: s for s in (result["conformance"] or {}).get("scenarios", [])}
    return env.get_template("report.html.j2").render(
        r=result, guarantees=GUARANTEES, plots=plots, key_plots=key_plots, ms=_ms,
        dash=lambda v: "–" if v is None else v, evidence_columns=_evidence_columns,
        groups=finding_groups(all_findings(result)), why=result["explanations"], scenarios=scenarios,
        what_to_do=what_to_do(result["explanations"]),
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
