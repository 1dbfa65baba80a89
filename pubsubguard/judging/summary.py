"""The GitHub job summary (Markdown) of one stack's check, rendered from its `Outcome` like every other
format (`pubsubguard check --summary FILE` appends it): the verdict line and one table row per
violation: level, rule, resource, file:line, the fix (the rule's sentence), the not-judged entries as
SARIF lists them (`note`, or `mandatory` when `--unknowns fail` makes them block); suppressed ones with
their reason in a table of their own. The Action writes the heading (`## pubsubguard check`) once and each stack's
check appends its section."""

from __future__ import annotations

from pubsubguard.judging.result import Outcome, Violation
from pubsubguard.policies.pubsub_facts.levels import EnforcementLevel
from pubsubguard.core.errors import UserError

MAX_ROWS = 200  # per stack: GitHub caps a step summary at 1 MiB; the SARIF upload keeps every result


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _level(violation: Violation) -> str:
    """The level a row shows: SARIF's error is mandatory, its warning advisory."""
    return {EnforcementLevel.MANDATORY: "mandatory", EnforcementLevel.REMEDIATE: "mandatory",
            EnforcementLevel.DISABLED: "none"}.get(violation.level, "advisory")


def _sorted(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return sorted(rows, key=lambda row: (row[0] != "mandatory", row[1], row[2]))


def section(outcome: Outcome, locate=None) -> str:
    """This stack's part of the summary. `locate(violation) -> (file, line)`, as for the other formats."""
    from pubsubguard.judging.formats import unjudged_violation

    def where(violation: Violation) -> str:
        path, line = locate(violation) if locate else (outcome.source or "Pulumi.yaml", 1)
        return f"{path}:{max(1, line)}"

    open_ = [(_level(v), v.policy, v.resource_name or "stack", where(v), v.message, "") for v in outcome.counted]
    for entry in outcome.unjudged:
        blocking = outcome.unknowns_fail and outcome.levels.get(entry["policy"]) == EnforcementLevel.MANDATORY
        open_.append(("mandatory" if blocking else "note", entry["policy"], entry["resource_name"] or "stack",
                      where(unjudged_violation(entry)),
                      f"Not judged: {', '.join(entry['properties'])} unknown until deploy.", ""))
    suppressed = [(_level(v), v.policy, v.resource_name or "stack", where(v), v.message,
                   f"{v.suppression.reason} ({v.suppression.where})") for v in outcome.suppressed]
    open_, suppressed = _sorted(open_), _sorted(suppressed)
    mandatory = sum(1 for row in open_ if row[0] == "mandatory")
    verdict = "ERROR (the program did not complete)" if outcome.error else ("REJECTED" if outcome.failed else "PASSED")
    return _lines(outcome.stack, verdict, mandatory, open_, suppressed)


def error_section(stack: str, error: UserError) -> str:
    """A stack whose check could not run (no outcome): the error line, no table."""
    return _lines(stack, "ERROR (the program did not complete)", 0, [], [])


def _lines(stack: str, verdict: str, mandatory: int, open_: list, suppressed: list) -> str:
    lines = [f"### Stack `{stack}`: {verdict}: {mandatory} mandatory, {len(open_) - mandatory} advisory, "
             f"{len(suppressed)} suppressed", ""]
    if open_:
        lines += ["| level | rule | resource | file:line | fix |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {level} | `{rule}` | `{_cell(name)}` | `{where}` | {_cell(message)} |"
                  for level, rule, name, where, message, _ in open_[:MAX_ROWS]]
        if len(open_) > MAX_ROWS:
            lines.append(f"\n{len(open_) - MAX_ROWS} more in the SARIF report (code scanning).")
        lines.append("")
    if suppressed:
        lines += ["<details><summary>Suppressed (not counted)</summary>", "",
                  "| level | rule | resource | file:line | reason |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {level} | `{rule}` | `{_cell(name)}` | `{where}` | {_cell(reason)} |"
                  for level, rule, name, where, _, reason in suppressed[:MAX_ROWS]]
        lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"
