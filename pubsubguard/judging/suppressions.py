"""Suppressions and baselines: how a team adopts the check without fixing everything first, and says
why a violation it keeps is acceptable.

- **A suppression** names one rule and one resource and carries a reason; it is never a silent drop: a
  suppressed violation does not count towards the verdict but is listed as suppressed, with its reason,
  in every format (text; JSON `"suppressed": {kind, reason, where}` on the violation; SARIF's standard
  `suppressions` on the result, kind `inSource` or `external`, with the reason as `justification`).
  - In the program's source, on the line that creates the resource (the position the SDK records with
    its registration) or on a comment line just above it:
    `# pubsubguard: ignore[rule-name] the reason` (several rules: `ignore[rule-a, rule-b]`); in TypeScript
    and JavaScript `// pubsubguard: ignore[rule-name] the reason`.
  - In a file (`check --suppressions FILE`, YAML or JSON):
    `suppressions: [{rule: rule-name, resource: name-or-URN, reason: "..."}]`.
  A suppression without a reason, of a rule the pack does not have, or of a resource the program does not
  declare (a comment on a line that creates none) is an error: exit 2, one line.
- **A baseline** (`check --create-baseline FILE`, then `check --baseline FILE`) records the violations of
  today by fingerprint, rule plus the resource's URN without its stack and project (type chain and name),
  so unrelated edits, line moves and other stacks keep it valid. With it a check fails only on
  violations that are new; known ones are listed as suppressed (kind `external`, "in the baseline").

This module reads suppressions and baselines and matches them to the pack's judgement (`match`: which
violation each suppresses); `result.compose` puts that state on each violation of the check's `Outcome`,
which every format renders.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pubsubguard.judging.result import BaselineUse, Judgement, Suppression
from pubsubguard.core.recorder import STACK_TYPE
from pubsubguard.core.errors import UserError
from pubsubguard.core.user_files import read_mapping
from pubsubguard.core.project import source_lines

BASELINE_FORMAT = "pubsubguard-baseline/1"
COMMENT = re.compile(r"(?:#|//)\s*pubsubguard:\s*ignore\[(?P<rules>[^\]]*)\](?P<reason>.*)$")  # Python, TS/JS
COMMENT_LINE = ("#", "//")


class SuppressionError(UserError):
    """A suppression or baseline that cannot be used: the file (and line or entry), what was expected."""


# --- Reading --------------------------------------------------------------------------------------
def load_file(path: Path) -> list[Suppression]:
    """`--suppressions FILE`: {suppressions: [{rule, resource, reason}, ...]} in YAML or JSON."""
    where = f"--suppressions {path}"
    data = read_mapping(path, SuppressionError, where=where, language="YAML or JSON")
    entries = data.get("suppressions") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise SuppressionError(f"{where}: expected a mapping with a list 'suppressions' of "
                               "{rule, resource, reason}")
    found = []
    for index, entry in enumerate(entries):
        at = f"{where}: suppressions[{index}]"
        if not isinstance(entry, dict):
            raise SuppressionError(f"{at}: expected a mapping {{rule, resource, reason}}, got {json.dumps(entry)}")
        unknown = sorted(set(entry) - {"rule", "resource", "reason"})
        if unknown:
            raise SuppressionError(f"{at}: unknown key {unknown[0]!r} (keys: rule, resource, reason)")
        for key in ("rule", "resource"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise SuppressionError(f"{at}.{key}: expected a non-empty string")
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise SuppressionError(f"{at}.reason: a suppression needs a reason (why this violation is acceptable)")
        found.append(Suppression(entry["rule"].strip(), entry["resource"].strip(), reason.strip(), "external",
                                 f"{path}: suppressions[{index}]"))
    return found


def comments(plan: dict, root: Path) -> list[tuple[Suppression, set[str]]]:
    """The `# pubsubguard: ignore[...]` comments in the files that create the plan's resources, each with
    the URNs of the resources created on its line (or the line below a comment-only line)."""
    by_line: dict[tuple[str, int], set[str]] = {}
    for resource in plan.get("resources", []):
        source = resource.get("source")
        if source and not resource.get("external"):
            by_line.setdefault((source["path"], int(source["line"])), set()).add(resource["urn"])
    found = []
    for relative in sorted({path for path, _ in by_line}):
        try:
            lines = source_lines(Path(root) / relative)
        except OSError:
            continue
        for number, text in enumerate(lines, 1):
            match = COMMENT.search(text)
            if match is None:
                continue
            at = f"{relative}:{number}"
            rules = [rule.strip() for rule in match["rules"].split(",") if rule.strip()]
            reason = match["reason"].strip().lstrip(":-–— ").strip()
            if not rules:
                raise SuppressionError(f"{at}: `pubsubguard: ignore[...]` names no rule (ignore[rule-name] reason)")
            if not reason:
                raise SuppressionError(f"{at}: `pubsubguard: ignore[{', '.join(rules)}]` needs a reason after the "
                                       "bracket (why this violation is acceptable)")
            urns = set(by_line.get((relative, number), set()))
            if text.lstrip().startswith(COMMENT_LINE):  # a comment line: it applies to the line below
                urns |= by_line.get((relative, number + 1), set())
            if not urns:
                raise SuppressionError(f"{at}: `pubsubguard: ignore[{', '.join(rules)}]` is not on (or just above) "
                                       "a line that creates a resource")
            for rule in rules:
                found.append((Suppression(rule, "", reason, "inSource", at), urns))
    return found


def load_baseline(path: Path) -> dict[str, dict]:
    """`--baseline FILE`: fingerprint -> entry."""
    where = f"--baseline {path}"
    data = read_mapping(path, SuppressionError, where=where, language="JSON",
                        missing=f"{where}: no such file (make one with --create-baseline FILE)")
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT or not isinstance(data.get("violations"), list):
        raise SuppressionError(f"{where}: expected a baseline written by --create-baseline "
                               f'({{"format": "{BASELINE_FORMAT}", "violations": [...]}})')
    entries = {}
    for index, entry in enumerate(data["violations"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("fingerprint"), str):
            raise SuppressionError(f"{where}: violations[{index}]: expected an object with a 'fingerprint' string")
        entries[entry["fingerprint"]] = entry
    return entries


def fingerprint(violation) -> str:
    """Stable across unrelated edits and stacks: the rule and the URN without `urn:pulumi:STACK::PROJECT::`."""
    if not violation.urn:
        return f"{violation.policy}::stack::{violation.message}"
    parts = violation.urn.split("::", 2)
    return f"{violation.policy}::{parts[2] if len(parts) == 3 else violation.urn}"


def same_resource(print_: str) -> str:
    """A fingerprint in a form both URN forms share: its rule, its name and the last two types of its type chain
    without the stack's. Baselines written before 0.1's URNs followed the engine (their chain: the stack's type
    at the top, else only the parent's own type; now: every ancestor's but the stack's) still match."""
    policy, _, rest = print_.partition("::")
    chain, sep, name = rest.rpartition("::")
    if not sep:
        return print_
    types = [t for t in chain.split("$") if t and t != STACK_TYPE]
    return f"{policy}::{'$'.join(types[-2:])}::{name}"


def baseline_document(violations, stack: str) -> str:
    from pubsubguard.core import __version__

    entries = sorted(({"fingerprint": fingerprint(v), "policy": v.policy, "level": v.level,
                       "resource_type": v.resource_type, "resource_name": v.resource_name, "message": v.message}
                      for v in violations), key=lambda entry: entry["fingerprint"])
    unique = list({entry["fingerprint"]: entry for entry in entries}.values())
    return json.dumps({"format": BASELINE_FORMAT, "created_by": f"pubsubguard {__version__}", "stack": stack,
                       "violations": unique}, indent=2, sort_keys=True) + "\n"


# --- Matching -------------------------------------------------------------------------------------
def match(judgement: Judgement, plan: dict, *, from_file: list[Suppression] = (), from_source=(),
          baseline: dict | None = None, baseline_file: str | None = None, completed: bool = True
          ) -> tuple[dict[int, Suppression], BaselineUse | None]:
    """Which of the judgement's violations each suppression covers (by index), and what the baseline did.
    Raises for a suppression of a rule the pack lacks, or of a resource the plan does not hold (unless the
    program did not complete, when an unseen resource may simply not have been registered yet)."""
    rules = {policy.name for policy in judgement.policies}
    resources = [r for r in plan.get("resources", []) if not r.get("external")]
    names = {r["name"] for r in resources} | {r["urn"] for r in resources}
    for suppression in list(from_file) + [s for s, _ in from_source]:
        if suppression.rule not in rules:
            raise SuppressionError(f"{suppression.where}: suppresses {suppression.rule!r}, which is not a rule of "
                                   f"the pack (rules: {', '.join(sorted(rules))})")
        if suppression.resource and suppression.resource not in names and completed:
            raise SuppressionError(f"{suppression.where}: suppresses {suppression.rule!r} on {suppression.resource!r}, "
                                   "which the program does not declare (a resource name or URN)")
    suppressed: dict[int, Suppression] = {}
    known, seen = 0, set()
    # an entry written with the earlier URN form is found by the form both share
    recorded = {same_resource(print_): print_ for print_ in baseline or ()}
    for index, violation in enumerate(judgement.violations):
        found = next((s for s, urns in from_source if s.rule == violation.policy and violation.urn in urns), None)
        found = found or next((s for s in from_file if s.rule == violation.policy
                               and s.resource in (violation.urn, violation.resource_name)), None)
        print_ = fingerprint(violation)
        if baseline is not None and print_ not in baseline:
            print_ = recorded.get(same_resource(print_), print_)
        if found is None and baseline is not None and print_ in baseline:
            found = Suppression(violation.policy, violation.urn, f"known violation, in the baseline {baseline_file}",
                                "external", str(baseline_file), baseline=True)
            known += 1
        seen.add(print_)
        if found is not None:
            suppressed[index] = found
    if baseline is None:
        return suppressed, None
    gone = tuple(sorted(set(baseline) - seen)) if completed else ()
    return suppressed, BaselineUse(file=str(baseline_file), known=known, gone=gone)
