"""The check's reports, each rendered from the one `Outcome` (every violation with its suppression state,
the counts and the verdict it derives): text for a person (as linters print), JSON, SARIF for code
scanning; and where in the program each resource was created."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from pubsubguard.core.errors import UserError
from pubsubguard.core.project import environments_said, source_lines
from pubsubguard.judging.result import Outcome, Violation
from pubsubguard.policies.pubsub_facts.levels import EnforcementLevel


COMPACT_FROM = 40  # violations: above this, text output summarises per rule (the machine formats keep all)


EXAMPLES = 3


def format_text(outcome: Outcome, compact: bool | None = None, locate=None, verbose: bool = False,
                error_on_stderr: bool = False) -> str:
    """The report for a person, as linters print: one line per violation, `file:line: level rule: message`
    (the line in the program that creates the resource, `locate(violation) -> (file, line)`), mandatory
    first, then the advisories by rule, every resource at its own line (`compact` summarises per rule);
    URNs only with `verbose`; what could not be judged and what the program printed; the suppressed
    violations with their reasons; the verdict last. A program's failure is the check's one error line
    on stderr; with `error_on_stderr` the report only points at it (it is not said twice on a terminal)."""
    lines = [
        f"pubsubguard check: {outcome.source or 'plan'} (stack {outcome.stack}), {_count(outcome.resources, 'resource')}"
        f"{' registered' if outcome.error else ''}, "
        f"pack {outcome.pack}@{outcome.pack_version} ({len(outcome.policies)} policies)",
        *_ran_by(outcome),
        *_environments(outcome),
        "",
    ]
    if compact is None:
        compact = len(outcome.mandatory) > COMPACT_FROM

    def where(v: Violation) -> str:
        if locate is None:
            return f"{v.resource_type.split(':')[-1]} {v.resource_name}: " if v.resource_name else "stack: "
        path, line = locate(v)
        return f"{path}:{line}: "

    def entry(v: Violation, level_width: int = 9) -> list[str]:
        text = [f"{where(v)}{v.level:<{level_width}} {v.policy}: {v.message}"]
        return text + ([f"    {v.urn}"] if verbose and v.urn else [])

    if compact:
        lines += _per_rule(outcome)
    else:
        for v in sorted(outcome.mandatory, key=lambda v: (where(v), v.policy)):
            lines += entry(v)
        for v in sorted(outcome.advisory, key=lambda v: (v.policy, where(v))):  # each resource at its own line
            lines += entry(v)
        if outcome.counted:
            lines.append("")
    lines += _not_judged(outcome, locate)
    lines += _program_section(outcome)
    mandatory, advisory = len(outcome.mandatory), len(outcome.advisory)
    if outcome.error:
        verdict = ["ERROR: the program did not complete (the error is on stderr)." if error_on_stderr
                   else f"ERROR: {outcome.error}",
                   f"Seen until then: {mandatory} mandatory, {advisory} advisory violation{'s' if advisory != 1 else ''} "
                   "(the stack rules did not run)."]
    else:
        undecided = (f", {len(outcome.undecided_mandatory)} mandatory not judged (--unknowns fail)"
                     if outcome.unknowns_fail and outcome.undecided_mandatory else "")
        verdict = [f"{'REJECTED' if outcome.failed else 'PASSED'}: {mandatory} mandatory, {advisory} advisory "
                   f"violation{'s' if advisory != 1 else ''}{undecided}."]
    suppressed = _suppressed_section(outcome)
    if suppressed:  # just above the verdict's last line
        verdict = verdict[:-1] + suppressed + [""] + verdict[-1:]
    return "\n".join(lines + verdict) + "\n"


def _ran_by(outcome: Outcome) -> list[str]:
    """The first screen's line on what ran the program: the interpreter (relative to the current folder
    where it is inside it) and how it was found (the toolchain and its environment)."""
    run = outcome.program
    if run is None or not run.interpreter:
        return []
    shown = run.interpreter
    try:
        shown = str(Path(shown).relative_to(Path.cwd())) if Path(shown).is_absolute() else shown
    except (OSError, ValueError):
        pass
    return [f"program run by: {shown}" + (f", {run.found_by}" if run.found_by else "")]


def _environments(outcome: Outcome) -> list[str]:
    """The first screen's line on the ESC environments the stack imports: whether their values were read."""
    return list(filter(None, [environments_said(outcome.environments, outcome.environment_values, outcome.source)]))


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _suppressed_section(outcome: Outcome) -> list[str]:
    """The suppressed violations, each with its reason; those the baseline knows, and its entries found no more."""
    section = []
    own = [v for v in outcome.suppressed if v.state != "baseline"]
    in_baseline = [v for v in outcome.suppressed if v.state == "baseline"]
    if own:
        section.append(f"Suppressed ({len(own)}; not counted in the verdict):")
        for v in own:
            section.append(f"  [{v.level}] {v.policy} on {v.resource_name or 'stack'}: {v.suppression.reason} "
                           f"({v.suppression.where})")
    if in_baseline:
        names = sorted({f"{v.policy} on {v.resource_name or 'stack'}" for v in in_baseline})
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        section.append(f"In the baseline {outcome.baseline.file} ({len(in_baseline)}; known, not counted): "
                       f"{'; '.join(names[:3])}{more}.")
    if outcome.baseline and outcome.baseline.gone:
        section.append(f"No longer found ({len(outcome.baseline.gone)} of the baseline's entries; "
                       "fixed or renamed: refresh it with --create-baseline).")
    return section


PROGRAM_LINES = 20  # of each of the program's streams, in the text output


def _program_section(outcome: Outcome) -> list[str]:
    """What the program printed and logged, under its own heading, as `pulumi preview` shows its
    diagnostics (never on this command's stdout as the program wrote it: here, indented and cut)."""
    run = outcome.program
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


def _per_rule(outcome: Outcome) -> list[str]:
    by_rule: dict[tuple[EnforcementLevel, str], list[Violation]] = {}
    for v in outcome.counted:
        by_rule.setdefault((v.level, v.policy), []).append(v)
    lines = []
    for (level, policy), found in sorted(by_rule.items(),
                                         key=lambda item: (item[0][0] != EnforcementLevel.MANDATORY, item[0][1])):
        names = sorted({v.resource_name or "stack" for v in found})
        more = f" and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else ""
        lines.append(f"[{level}] {policy}: {len(found)} violation{'s' if len(found) != 1 else ''} "
                     f"({', '.join(names[:EXAMPLES])}{more})")
        lines.append(f"  e.g. {found[0].message}")
    return lines + ["", "(summary per rule; --format json or sarif lists every violation)", ""]


def _unknown_offline(outcome: Outcome) -> list[str]:
    """The invokes (and calls) whose results nobody could know offline, in one line."""
    if not outcome.unknown_invokes:
        return []
    tokens = sorted({i["token"] for i in outcome.unknown_invokes})
    return [f"Unknown offline: the result{'s' if len(tokens) > 1 else ''} of {', '.join(tokens)} "
            "(values built from them are unknown; give results with --invoke-results FILE)."]


def _not_judged_heading(outcome: Outcome) -> str:
    rules = len({entry["policy"] for entry in outcome.unjudged})
    resources = len({entry["urn"] for entry in outcome.unjudged})
    return f"Not judged (values unknown until deploy): {_count(rules, 'rule')} on {_count(resources, 'resource')}"


def _origin(sources: list[dict]) -> str:
    """Where an unknown input comes from, as the JSON's `unknown_inputs` has it: `Function handler.httpsTriggerUrl`,
    or a configuration value an ESC environment sets (`config team:x, set by environment acme/dev`) or may set."""
    named = []
    for source in sources:
        if source.get("config"):
            environments = list(source.get("environments") or ())
            which = f"environment{'s' if len(environments) > 1 else ''} {', '.join(environments)}"
            named.append(f"config {source['config']}, " + (f"set by {which}" if source.get("values_from") else
                                                             f"which {which} may set: not read offline"))
            continue
        what = " ".join(filter(None, (source.get("type", "").split(":")[-1], source.get("name") or source.get("urn"))))
        named.append(what + (f".{source['output']}" if source.get("output") else ""))
    return f" (from {' and '.join(named)})" if named else ""


def _not_judged(outcome: Outcome, locate=None) -> list[str]:
    """The invokes unknown offline, then every not-judged entry on its own line, by rule: where the program
    creates the resource (`locate`), the rule (its level when mandatory), the resource, and each blocking
    input with where its unknown comes from: the JSON's `unjudged` list, every resource named."""
    lines = _unknown_offline(outcome)
    if outcome.unjudged:
        lines.append(_not_judged_heading(outcome) + ", each with the inputs that kept it from deciding:")
        rows = []
        for entry in outcome.unjudged:
            path, line = locate(unjudged_violation(entry)) if locate is not None else ("", 0)
            location = f"{path}:{line}: " if path else ""
            level = " (mandatory)" if outcome.levels.get(entry["policy"]) == EnforcementLevel.MANDATORY else ""
            resource = " ".join(filter(None, (entry["resource_type"].split(":")[-1], entry["resource_name"] or "stack")))
            inputs = "; ".join(f"{blocking}{_origin((entry.get('unknown_inputs') or {}).get(blocking) or [])}"
                               for blocking in entry["properties"])
            rows.append((entry["policy"], path, line, f"  {location}{entry['policy']}{level} on {resource}: {inputs}"))
        lines += [row[-1] for row in sorted(rows)]
        if outcome.unknowns_fail and outcome.undecided_mandatory:
            lines.append("With --unknowns fail, each mandatory rule above that could not decide fails the check.")
    return lines + [""] if lines else lines


def format_json(outcome: Outcome, locate=None) -> str:
    """The machine document: every violation, each with `"suppressed": null` or {kind, reason, where} (and
    its `file` and `line` from `locate`, as every not-judged entry, the same as the text and SARIF formats);
    `mandatory`/`advisory`/`passed` count those not suppressed, `suppressed` counts the others; `baseline`
    what `--baseline` did."""

    def located(entry: dict, violation: Violation) -> dict:
        if locate is None:
            return entry
        path, line = locate(violation)
        return {**entry, "file": path, "line": line}

    document = {
        "pack": outcome.pack, "version": outcome.pack_version, "stack": outcome.stack, "source": outcome.source,
        "resources": outcome.resources, "passed": outcome.passed, "unknowns": outcome.unknowns,
        "mandatory": len(outcome.mandatory), "advisory": len(outcome.advisory), "levels": outcome.levels,
        "violations": [{**located(v.as_json(), v), "suppressed": v.suppression.as_json() if v.suppression else None}
                       for v in outcome.violations],
        "suppressed": len(outcome.suppressed),
        "unknown_invokes": list(outcome.unknown_invokes),
        "unjudged": [located(entry, unjudged_violation(entry)) for entry in outcome.unjudged],
        "program": _program_json(outcome),
        "environments": {"imports": list(outcome.environments), "values_from": outcome.environment_values or None},
        "error": {"message": outcome.error, "kind": "program", "exit_code": 2} if outcome.error else None,
    }
    if outcome.baseline:
        document["baseline"] = {"file": outcome.baseline.file, "known": outcome.baseline.known,
                                "gone": list(outcome.baseline.gone)}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def unjudged_violation(entry: dict) -> Violation:
    """A not-judged entry as a violation record, to be located like one."""
    return Violation(policy=entry["policy"], level=EnforcementLevel.ADVISORY, message="", urn=entry["urn"],
                     resource_type=entry["resource_type"], resource_name=entry["resource_name"])


def _program_json(outcome: Outcome) -> dict | None:
    run = outcome.program
    if run is None:
        return None
    return {
        "interpreter": run.interpreter, "found_by": run.found_by, "confined": run.confined, "notes": run.notes,
        "exit_code": run.exit_code,
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


_SARIF_LEVEL = {EnforcementLevel.MANDATORY: "error", EnforcementLevel.ADVISORY: "warning",
                EnforcementLevel.REMEDIATE: "error", EnforcementLevel.DISABLED: "none"}


def format_sarif(outcome: Outcome, locate=None) -> str:
    """SARIF 2.1.0 as GitHub code scanning loads it: every violation (a suppressed one with its
    `suppressions`), then the not-judged entries. `locate(violation) -> (uri, line)` places a result in a
    file of the repository (default: the judged source, line 1)."""
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "pubsubguard", "semanticVersion": outcome.pack_version,
                                    "informationUri": "https://www.pulumi.com/docs/using-pulumi/crossguard/",
                                    "rules": _sarif_rules(outcome)}},
                "automationDetails": {"id": f"pubsubguard-check/{outcome.stack}/"},
                "invocations": [{"executionSuccessful": not outcome.error, "toolExecutionNotifications": [
                    {"level": "note", "message": {"text": line}}
                    for line in _unknown_offline(outcome)
                    + ([_not_judged_heading(outcome) + " (each a note result)."] if outcome.unjudged else [])
                ] + ([{"level": "error", "message": {"text": f"the program did not complete: {outcome.error}"}}]
                     if outcome.error else [])}],
                "results": _sarif_results(outcome, locate),
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"


def _sarif_rules(outcome: Outcome) -> list[dict]:
    """The run's rule descriptors, one per policy of the pack, at the level this check enforced it."""
    return [
        {
            "id": p.name, "name": p.name,
            "shortDescription": {"text": p.description},
            "fullDescription": {"text": p.description},
            "help": {"text": p.remediation or p.description,
                     "markdown": f"**{p.name}** ({p.kind} rule): {p.remediation or p.description}"},
            **({"helpUri": p.url} if p.url else {}),
            "defaultConfiguration": {"level": _SARIF_LEVEL[outcome.levels.get(p.name, p.level)]},
            "properties": {"kind": p.kind, "enforcementLevel": outcome.levels.get(p.name, p.level)},
        }
        for p in outcome.policies
    ]


def _sarif_results(outcome: Outcome, locate) -> list[dict]:
    """A result per violation (a suppressed one with its `suppressions`), then a note per not-judged entry (an error
    where `--unknowns fail` makes a mandatory one block)."""
    rule_index = {p.name: i for i, p in enumerate(outcome.policies)}
    results = []
    for v in outcome.violations:
        uri, line = locate(v) if locate else (outcome.source or "Pulumi.yaml", 1)
        entry = {
            "ruleId": v.policy,
            "level": _SARIF_LEVEL.get(v.level, "warning"),
            "message": {"text": v.message},
            "locations": [
                {
                    "physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(1, line)}},
                    "logicalLocations": [
                        {"name": v.resource_name or "stack", "fullyQualifiedName": v.urn or outcome.stack,
                         "kind": "resource"}
                    ],
                }
            ],
            "partialFingerprints": {"pulumiUrnPolicy/v1": f"{v.urn}|{v.policy}"},
        }
        if v.policy in rule_index:
            entry["ruleIndex"] = rule_index[v.policy]
        if v.suppression:  # SARIF 2.1.0 §3.27.23: code scanning shows it as suppressed, not as an open alert
            entry["suppressions"] = [{"kind": v.suppression.kind, "status": "accepted",
                                      "justification": f"{v.suppression.reason} ({v.suppression.where})"}]
        results.append(entry)
    for entry in outcome.unjudged:
        blocking = outcome.unknowns_fail and outcome.levels.get(entry["policy"]) == EnforcementLevel.MANDATORY
        uri, line = locate(unjudged_violation(entry)) if locate else (outcome.source or "Pulumi.yaml", 1)
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
    return results


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

    quoted: dict[str, tuple[str, int]] = {}  # "X" or 'X' (X without quotes) -> its first line, in file order
    for path, lines in texts:
        where = uri(path)
        for number, text in enumerate(lines, 1):
            for mark in ('"', "'"):
                if mark in text:
                    for token in text.split(mark)[1:-1]:
                        if token not in quoted:
                            quoted[token] = (where, number)

    @functools.lru_cache(maxsize=None)
    def mentioned(name: str) -> tuple[str, int] | None:
        for path, lines in texts:
            for number, text in enumerate(lines, 1):
                if name in text:
                    return uri(path), number
        return None

    def first_quoted(needle: str) -> tuple[str, int] | None:
        if '"' not in needle and "'" not in needle:
            return quoted.get(needle)
        for path, lines in texts:
            for number, text in enumerate(lines, 1):
                if f'"{needle}"' in text or f"'{needle}'" in text:
                    return uri(path), number
        return None

    def locate(violation: Violation) -> tuple[str, int]:
        position = positions.get(violation.urn)
        if position and root is not None:
            return uri(root / position["path"]), position["line"]
        needles, parent = [violation.resource_name], records.get(violation.urn, {}).get("parent")
        while parent in records and records[parent]["type"] != "pulumi:pulumi:Stack":
            needles.append(records[parent]["name"])  # a component's name, where the program creates it
            parent = records[parent].get("parent")
        for needle in filter(None, needles):
            found = first_quoted(needle)
            if found:
                return found
        found = mentioned(violation.resource_name) if violation.resource_name else None
        if found:
            return found
        return (uri(texts[0][0]), 1) if texts else ("Pulumi.yaml", 1)

    return locate
