"""The check's reports: text for a person (as linters print), JSON, SARIF for code scanning, and where
in the program each resource was created."""

from __future__ import annotations

import json
from pathlib import Path

from pubsubguard.core.errors import UserError
from pubsubguard.core.project import source_lines
from pubsubguard.check.result import CheckResult, Violation


def grouped(result: CheckResult) -> list[tuple[str, list[Violation]]]:
    groups: dict[str, list[Violation]] = {}
    for v in result.violations:
        groups.setdefault(v.urn, []).append(v)
    return sorted(groups.items(), key=lambda item: (not any(v.level == "mandatory" for v in item[1]), item[0]))


COMPACT_FROM = 40  # violations: above this, text output summarises per rule (the machine formats keep all)


EXAMPLES = 3


def format_text(result: CheckResult, compact: bool | None = None, locate=None, verbose: bool = False) -> str:
    """The report for a person, as linters print: one line per violation, `file:line: level rule: message`
    (the line in the program that creates the resource, `locate(violation) -> (file, line)`), mandatory
    first; an advisory rule that fires on more than a few resources is one line with its count; URNs
    only with `verbose`; what could not be judged and what the program printed; the verdict last."""
    lines = [
        f"pubsubguard check: {result.source or 'plan'} (stack {result.stack}), {result.resources} resources, "
        f"pack {result.pack}@{result.pack_version} ({len(result.policies)} policies)",
        "",
    ]
    if compact is None:
        compact = len(result.mandatory) > COMPACT_FROM

    def where(v: Violation) -> str:
        if locate is None:
            return f"{v.resource_type.split(':')[-1]} {v.resource_name}: " if v.resource_name else "stack: "
        path, line = locate(v)
        return f"{path}:{line}: "

    def entry(v: Violation, level_width: int = 9) -> list[str]:
        text = [f"{where(v)}{v.level:<{level_width}} {v.policy}: {v.message}"]
        return text + ([f"    {v.urn}"] if verbose and v.urn else [])

    mandatory = [v for v in result.violations if v.level == "mandatory"]
    advisory = [v for v in result.violations if v.level != "mandatory"]
    if compact:
        lines += _per_rule(result)
    else:
        for v in sorted(mandatory, key=lambda v: (where(v), v.policy)):
            lines += entry(v)
        by_rule: dict[str, list[Violation]] = {}
        for v in advisory:
            by_rule.setdefault(v.policy, []).append(v)
        for rule, found in sorted(by_rule.items()):
            if len(found) > EXAMPLES and not verbose:
                names = sorted({v.resource_name or "stack" for v in found})
                lines.append(f"{where(found[0])}{found[0].level:<9} {rule} ({len(found)} resources: "
                             f"{', '.join(names[:EXAMPLES])} and {len(names) - EXAMPLES} more): {found[0].message}")
            else:
                for v in sorted(found, key=where):
                    lines += entry(v)
        if result.violations:
            lines.append("")
    lines += _not_judged(result)
    lines += _program_section(result)
    mandatory, advisory = len(result.mandatory), len(result.violations) - len(result.mandatory)
    if result.error:
        lines.append(f"ERROR: {result.error}")
        lines.append(f"Seen until then: {mandatory} mandatory, {advisory} advisory violation{'s' if advisory != 1 else ''} "
                     "(the stack rules did not run).")
        return "\n".join(lines) + "\n"
    verdict = "REJECTED" if result.failed else "PASSED"
    undecided = (f", {len(result.undecided_mandatory)} mandatory not judged (--unknowns fail)"
                 if result.unknowns_fail and result.undecided_mandatory else "")
    lines.append(f"{verdict}: {mandatory} mandatory, {advisory} advisory violation{'s' if advisory != 1 else ''}{undecided}.")
    return "\n".join(lines) + "\n"


PROGRAM_LINES = 20  # of each of the program's streams, in the text output


def _program_section(result: CheckResult) -> list[str]:
    """What the program printed and logged, under its own heading, as `pulumi preview` shows its
    diagnostics (never on this command's stdout as the program wrote it: here, indented and cut)."""
    run = result.program
    if run is None:
        return []
    lines = []
    for severity, message in run.messages:
        lines.append(f"  {severity}: {message.splitlines()[0] if message else ''}"[:300])
    for name, stream in (("stdout", run.stdout), ("stderr", run.stderr)):
        if not stream.total:
            continue
        text = stream.text().splitlines()
        shown = [f"    {line[:300]}" for line in text[:PROGRAM_LINES]]
        more = stream.total - sum(len(line) + 1 for line in text[:PROGRAM_LINES])
        lines.append(f"  {name}:")
        lines += shown
        if more > 0:
            lines.append(f"    ... {more:,} more bytes not shown")
    if not lines:
        return []
    return ["Program output (diagnostics):"] + lines + [""]


def _per_rule(result: CheckResult) -> list[str]:
    by_rule: dict[tuple[str, str], list[Violation]] = {}
    for v in result.violations:
        by_rule.setdefault((v.level, v.policy), []).append(v)
    lines = []
    for (level, policy), found in sorted(by_rule.items(), key=lambda item: (item[0][0] != "mandatory", item[0][1])):
        names = sorted({v.resource_name or "stack" for v in found})
        more = f" and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else ""
        lines.append(f"[{level}] {policy}: {len(found)} violation{'s' if len(found) != 1 else ''} "
                     f"({', '.join(names[:EXAMPLES])}{more})")
        lines.append(f"  e.g. {found[0].message}")
    return lines + ["", "(summary per rule; --format json or sarif lists every violation)", ""]


def _not_judged(result: CheckResult) -> list[str]:
    lines = []
    if result.unknown_invokes:
        tokens = sorted({i["token"] for i in result.unknown_invokes})
        lines.append(f"Unknown offline: the result{'s' if len(tokens) > 1 else ''} of {', '.join(tokens)} "
                     "(values built from them are unknown; give results with --invoke-results FILE).")
    if result.unjudged:
        by_rule: dict[str, set[str]] = {}
        for entry in result.unjudged:
            by_rule.setdefault(entry["policy"], set()).add(entry["resource_name"])
        parts = [f"{rule} on {', '.join(sorted(names)[:EXAMPLES])}" + (f" and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else "")
                 for rule, names in sorted(by_rule.items())]
        lines.append("Not judged (values unknown until deploy): " + "; ".join(parts) + ".")
        if result.unknowns_fail and result.undecided_mandatory:
            lines.append("With --unknowns fail, each mandatory rule above that could not decide fails the check.")
    return lines + [""] if lines else lines


def format_json(result: CheckResult, locate=None) -> str:
    """The machine document; `locate` gives each violation and not-judged entry its `file` and `line`
    (the same as the text and SARIF formats)."""

    def located(entry: dict, violation: Violation) -> dict:
        if locate is None:
            return entry
        path, line = locate(violation)
        return {**entry, "file": path, "line": line}

    return json.dumps(
        {
            "pack": result.pack, "version": result.pack_version, "stack": result.stack, "source": result.source,
            "resources": result.resources, "passed": None if result.error else not result.failed,
            "unknowns": "fail" if result.unknowns_fail else "advisory",
            "mandatory": len(result.mandatory), "advisory": len(result.violations) - len(result.mandatory),
            "levels": result.levels,
            "violations": [located(dict(v.__dict__), v) for v in result.violations],
            "unknown_invokes": result.unknown_invokes,
            "unjudged": [located(entry, _unjudged_violation(entry)) for entry in result.unjudged],
            "program": _program_json(result),
            "error": {"message": result.error, "kind": "program", "exit_code": 2} if result.error else None,
        },
        indent=2, sort_keys=True,
    ) + "\n"


def _unjudged_violation(entry: dict) -> Violation:
    """A not-judged entry as a violation record, to be located like one."""
    return Violation(policy=entry["policy"], level="advisory", message="", urn=entry["urn"],
                     resource_type=entry["resource_type"], resource_name=entry["resource_name"])


def _program_json(result: CheckResult) -> dict | None:
    run = result.program
    if run is None:
        return None
    return {
        "interpreter": run.interpreter, "confined": run.confined, "notes": run.notes, "exit_code": run.exit_code,
        "messages": [{"severity": s, "message": m} for s, m in run.messages],
        "stdout": run.stdout.text(), "stdout_bytes": run.stdout.total,
        "stderr": run.stderr.text(), "stderr_bytes": run.stderr.total,
    }


def format_json_error(error: UserError, *, stack: str = "", source: str = "") -> str:
    """The JSON document when there is no verdict (the program, stack file or command line is broken)."""
    return json.dumps(
        {"passed": None, "stack": stack, "source": source, "violations": [],
         "error": {"message": str(error), "kind": getattr(error, "kind", "input"), "exit_code": error.exit_code}},
        indent=2, sort_keys=True,
    ) + "\n"


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


_SARIF_LEVEL = {"mandatory": "error", "advisory": "warning", "remediate": "error", "disabled": "none"}


def format_sarif(result: CheckResult, locate=None) -> str:
    """SARIF 2.1.0 as GitHub code scanning loads it. `locate(violation) -> (uri, line)` places a
    result in a file of the repository (default: the judged source, line 1)."""
    rule_index = {p.name: i for i, p in enumerate(result.policies)}
    rules = [
        {
            "id": p.name, "name": p.name,
            "shortDescription": {"text": p.description},
            "fullDescription": {"text": p.description},
            "help": {"text": f"{p.description} See docs/policies.md#{p.name}."},
            "defaultConfiguration": {"level": _SARIF_LEVEL[result.levels.get(p.name, p.level)]},
            "properties": {"kind": p.kind, "enforcementLevel": result.levels.get(p.name, p.level)},
        }
        for p in result.policies
    ]
    results = []
    for v in result.violations:
        uri, line = locate(v) if locate else (result.source or "Pulumi.yaml", 1)
        entry = {
            "ruleId": v.policy,
            "level": _SARIF_LEVEL.get(v.level, "warning"),
            "message": {"text": v.message},
            "locations": [
                {
                    "physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(1, line)}},
                    "logicalLocations": [
                        {"name": v.resource_name or "stack", "fullyQualifiedName": v.urn or result.stack,
                         "kind": "resource"}
                    ],
                }
            ],
            "partialFingerprints": {"pulumiUrnPolicy/v1": f"{v.urn}|{v.policy}"},
        }
        if v.policy in rule_index:
            entry["ruleIndex"] = rule_index[v.policy]
        results.append(entry)
    for entry in result.unjudged:
        blocking = result.unknowns_fail and result.levels.get(entry["policy"]) == "mandatory"
        uri, line = locate(_unjudged_violation(entry)) if locate else (result.source or "Pulumi.yaml", 1)
        results.append({
            "ruleId": entry["policy"], "level": "error" if blocking else "note",
            "message": {"text": f"Not judged: {', '.join(entry['properties'])} unknown until deploy."},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(1, line)}},
                           "logicalLocations": [{"name": entry["resource_name"] or "stack",
                                                 "fullyQualifiedName": entry["urn"], "kind": "resource"}]}],
            "partialFingerprints": {"pulumiUrnPolicy/v1": f"{entry['urn']}|{entry['policy']}|not-judged"},
            "properties": {"notJudged": True, "unknownInputs": entry.get("unknown_inputs") or {}},
            **({"ruleIndex": rule_index[entry["policy"]]} if entry["policy"] in rule_index else {}),
        })
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "pubsubguard", "semanticVersion": result.pack_version,
                                    "informationUri": "https://www.pulumi.com/docs/using-pulumi/crossguard/",
                                    "rules": rules}},
                "automationDetails": {"id": f"pubsubguard-check/{result.stack}/"},
                "invocations": [{"executionSuccessful": not result.error, "toolExecutionNotifications": [
                    {"level": "note", "message": {"text": line}} for line in _not_judged(result) if line
                ] + ([{"level": "error", "message": {"text": f"the program did not complete: {result.error}"}}]
                     if result.error else [])}],
                "results": results,
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"


def format_sarif_error(error: UserError, *, stack: str = "") -> str:
    """A SARIF run with no results and `executionSuccessful: false` when there is no verdict."""
    return json.dumps({
        "$schema": SARIF_SCHEMA, "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "pubsubguard", "rules": []}},
                  "automationDetails": {"id": f"pubsubguard-check/{stack}/"},
                  "invocations": [{"executionSuccessful": False, "exitCode": error.exit_code,
                                   "toolExecutionNotifications": [{"level": "error", "message": {"text": str(error)}}]}],
                  "results": []}],
    }, indent=2) + "\n"


def source_locator(files: list[Path], relative_to: Path, plan: dict | None = None, root: Path | None = None):
    """`locate(violation) -> (file, line)` for every format: where the program constructs the resource
    (the source position the SDK sends with its registration: inside a component's class, that line, as
    plan.json and suppression comments have it), else where the nearest component around it was created
    (a component from an installed library has no position in the project), else the first line of
    `files` naming it, else line 1 of the first file."""
    records = {r["urn"]: r for r in (plan or {}).get("resources", [])}
    positions = {}
    for urn, record in records.items():
        found, parent = record.get("source"), record.get("parent")
        while not found and parent in records and records[parent]["type"] != "pulumi:pulumi:Stack":
            found, parent = records[parent].get("source"), records[parent].get("parent")
        if found:
            positions[urn] = found
    texts = []
    for path in files:
        try:
            texts.append((path, source_lines(path)))
        except OSError:
            continue

    def uri(path: Path) -> str:
        try:
            return path.resolve().relative_to(relative_to.resolve()).as_posix()
        except ValueError:
            return path.as_posix()

    def locate(violation: Violation) -> tuple[str, int]:
        position = positions.get(violation.urn)
        if position and root is not None:
            return uri(root / position["path"]), position["line"]
        needles, parent = [violation.resource_name], records.get(violation.urn, {}).get("parent")
        while parent in records and records[parent]["type"] != "pulumi:pulumi:Stack":
            needles.append(records[parent]["name"])  # a component's name, where the program creates it
            parent = records[parent].get("parent")
        for needle in filter(None, needles):
            for path, lines in texts:
                for number, text in enumerate(lines, 1):
                    if f'"{needle}"' in text or f"'{needle}'" in text:
                        return uri(path), number
        for path, lines in texts:
            for number, text in enumerate(lines, 1):
                if violation.resource_name and violation.resource_name in text:
                    return uri(path), number
        return (uri(texts[0][0]), 1) if texts else ("Pulumi.yaml", 1)

    return locate
