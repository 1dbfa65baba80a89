"""A GitHub job summary (Markdown) from `pubsubguard check --format sarif` reports: per stack, the
verdict line and one table row per violation: level, rule, resource, file:line, the fix (the rule's
sentence); suppressed ones are listed with their reason in a table of their own.

    python -m pubsubguard.check.summary dev=pubsubguard-dev.sarif prod=pubsubguard-prod.sarif >> "$GITHUB_STEP_SUMMARY"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MAX_ROWS = 200  # per stack: GitHub caps a step summary at 1 MiB; the SARIF upload keeps every result


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rows(results: list[dict]) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for result in results:
        location = (result.get("locations") or [{}])[0]
        physical = location.get("physicalLocation", {})
        where = f"{physical.get('artifactLocation', {}).get('uri', '')}:{physical.get('region', {}).get('startLine', 1)}"
        logical = (location.get("logicalLocations") or [{}])[0]
        suppression = (result.get("suppressions") or [{}])[0]
        level = {"error": "mandatory", "warning": "advisory"}.get(result.get("level"), result.get("level", ""))
        rows.append((level, result.get("ruleId", ""), logical.get("name", ""), where,
                     result.get("message", {}).get("text", ""), suppression.get("justification", "")))
    rows.sort(key=lambda row: (row[0] != "mandatory", row[1], row[2]))
    return rows


def summary(reports: list[tuple[str, dict]]) -> str:
    lines = ["## pubsubguard check", ""]
    for stack, sarif in reports:
        run = sarif["runs"][0]
        results = run.get("results", [])
        open_ = _rows([r for r in results if not r.get("suppressions")])
        suppressed = _rows([r for r in results if r.get("suppressions")])
        mandatory = sum(1 for row in open_ if row[0] == "mandatory")
        failed = not all(inv.get("executionSuccessful", True) for inv in run.get("invocations", []))
        verdict = "ERROR (the program did not complete)" if failed else ("REJECTED" if mandatory else "PASSED")
        lines.append(f"### Stack `{stack}`: {verdict}: {mandatory} mandatory, {len(open_) - mandatory} advisory, "
                     f"{len(suppressed)} suppressed")
        lines.append("")
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


def main(argv: list[str] | None = None) -> int:
    reports = []
    for argument in argv if argv is not None else sys.argv[1:]:
        stack, _, path = argument.rpartition("=")
        try:
            reports.append((stack or Path(path).stem, json.loads(Path(path).read_text())))
        except (OSError, json.JSONDecodeError) as err:
            print(f"pubsubguard summary: {path}: cannot read a SARIF report ({err})", file=sys.stderr)
            return 2
    sys.stdout.write(summary(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
