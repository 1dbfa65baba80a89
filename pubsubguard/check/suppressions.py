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

This module works on `check.CheckResult` after the pack judged: `apply` moves suppressed violations out
of `result.violations` (so the verdict counts only the others) into an `Outcome`; `render` adds them back
to the report in the chosen format.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pubsubguard.core.errors import UserError
from pubsubguard.core.project import source_lines

BASELINE_FORMAT = "pubsubguard-baseline/1"
COMMENT = re.compile(r"(?:#|//)\s*pubsubguard:\s*ignore\[(?P<rules>[^\]]*)\](?P<reason>.*)$")  # Python, TS/JS
COMMENT_LINE = ("#", "//")


class SuppressionError(UserError):
    """A suppression or baseline that cannot be used: the file (and line or entry), what was expected."""


@dataclass(frozen=True)
class Suppression:
    rule: str
    resource: str  # a resource name or URN (file), or "" for a comment (it applies to the line's resources)
    reason: str
    kind: str  # SARIF's suppression kind: "inSource" (a comment) or "external" (a file, the baseline)
    where: str  # "channel.py:37", "suppressions.yaml: suppressions[0]", "baseline.json"
    baseline: bool = False  # a known violation the baseline lists, not a suppression someone wrote

    def as_json(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "where": self.where}


@dataclass
class Outcome:
    suppressed: list = field(default_factory=list)  # [(Violation, Suppression)]
    baseline_file: str | None = None
    baseline_known: int = 0  # violations found that the baseline lists
    baseline_gone: list = field(default_factory=list)  # baseline entries no longer found (fixed or renamed)


# --- Reading --------------------------------------------------------------------------------------
def load_file(path: Path) -> list[Suppression]:
    """`--suppressions FILE`: {suppressions: [{rule, resource, reason}, ...]} in YAML or JSON."""
    import yaml

    where = f"--suppressions {path}"
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise SuppressionError(f"{where}: no such file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise SuppressionError(f"{where}: not valid YAML or JSON ({' '.join(str(err).split())})") from None
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
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SuppressionError(f"{where}: no such file (make one with --create-baseline FILE)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SuppressionError(f"{where}: not JSON ({err})") from None
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


def baseline_document(violations, stack: str) -> str:
    from pubsubguard.core import __version__

    entries = sorted(({"fingerprint": fingerprint(v), "policy": v.policy, "level": v.level,
                       "resource_type": v.resource_type, "resource_name": v.resource_name, "message": v.message}
                      for v in violations), key=lambda entry: entry["fingerprint"])
    unique = list({entry["fingerprint"]: entry for entry in entries}.values())
    return json.dumps({"format": BASELINE_FORMAT, "created_by": f"pubsubguard {__version__}", "stack": stack,
                       "violations": unique}, indent=2, sort_keys=True) + "\n"


# --- Applying -------------------------------------------------------------------------------------
def apply(result, plan: dict, *, from_file: list[Suppression] = (), from_source=(), baseline: dict | None = None,
          baseline_file: str | None = None) -> Outcome:
    """Move the suppressed violations out of `result.violations` (see module doc). Raises for a
    suppression of a rule the pack lacks, or of a resource the plan does not hold (unless the program did
    not complete, when an unseen resource may simply not have been registered yet)."""
    rules = {policy.name for policy in result.policies}
    resources = [r for r in plan.get("resources", []) if not r.get("external")]
    names = {r["name"] for r in resources} | {r["urn"] for r in resources}
    for suppression in list(from_file) + [s for s, _ in from_source]:
        if suppression.rule not in rules:
            raise SuppressionError(f"{suppression.where}: suppresses {suppression.rule!r}, which is not a rule of "
                                   f"the pack (rules: {', '.join(sorted(rules))})")
        if suppression.resource and suppression.resource not in names and not result.error:
            raise SuppressionError(f"{suppression.where}: suppresses {suppression.rule!r} on {suppression.resource!r}, "
                                   "which the program does not declare (a resource name or URN)")
    outcome = Outcome(baseline_file=baseline_file)
    kept, seen = [], set()
    for violation in result.violations:
        match = next((s for s, urns in from_source if s.rule == violation.policy and violation.urn in urns), None)
        match = match or next((s for s in from_file if s.rule == violation.policy
                               and s.resource in (violation.urn, violation.resource_name)), None)
        print_ = fingerprint(violation)
        if match is None and baseline is not None and print_ in baseline:
            match = Suppression(violation.policy, violation.urn, f"known violation, in the baseline {baseline_file}",
                                "external", str(baseline_file), baseline=True)
            outcome.baseline_known += 1
        seen.add(print_)
        if match is None:
            kept.append(violation)
        else:
            outcome.suppressed.append((violation, match))
    if baseline is not None and not result.error:
        outcome.baseline_gone = sorted(set(baseline) - seen)
    result.violations = kept
    return outcome


# --- Rendering ------------------------------------------------------------------------------------
def _all_sorted(result, outcome: Outcome) -> list:
    suppressed = {id(v): s for v, s in outcome.suppressed}
    every = list(result.violations) + [v for v, _ in outcome.suppressed]
    every.sort(key=lambda v: (v.urn, v.level != "mandatory", v.policy, v.message))
    return [(v, suppressed.get(id(v))) for v in every]


def render_text(text: str, outcome: Outcome) -> str:
    """The suppressed violations, each with its reason, just above the verdict line."""
    if not outcome.suppressed and not outcome.baseline_gone:
        return text
    section = []
    in_baseline = [v for v, s in outcome.suppressed if s.baseline]
    own = [(v, s) for v, s in outcome.suppressed if not s.baseline]
    if own:
        section.append(f"Suppressed ({len(own)}; not counted in the verdict):")
        for v, s in own:
            section.append(f"  [{v.level}] {v.policy} on {v.resource_name or 'stack'}: {s.reason} ({s.where})")
    if in_baseline:
        names = sorted({f"{v.policy} on {v.resource_name or 'stack'}" for v in in_baseline})
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        section.append(f"In the baseline {outcome.baseline_file} ({len(in_baseline)}; known, not counted): "
                       f"{'; '.join(names[:3])}{more}.")
    if outcome.baseline_gone:
        section.append(f"No longer found ({len(outcome.baseline_gone)} of the baseline's entries; "
                       "fixed or renamed: refresh it with --create-baseline).")
    lines = text.rstrip("\n").split("\n")
    return "\n".join(lines[:-1] + section + [""] + lines[-1:]) + "\n"


def render_json(text: str, result, outcome: Outcome, locate=None) -> str:
    """Every violation in `violations`, each with `"suppressed": null` or {kind, reason, where} (and its
    `file` and `line` from `locate`); `mandatory`/`advisory`/`passed` count the others; `suppressed`
    counts these."""
    document = json.loads(text)
    document["violations"] = [{**v.__dict__, **(dict(zip(("file", "line"), locate(v))) if locate else {}),
                               "suppressed": s.as_json() if s else None}
                              for v, s in _all_sorted(result, outcome)]
    document["suppressed"] = len(outcome.suppressed)
    if outcome.baseline_file:
        document["baseline"] = {"file": str(outcome.baseline_file), "known": outcome.baseline_known,
                                "gone": outcome.baseline_gone}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def render_sarif(result, outcome: Outcome, locate=None) -> str:
    """SARIF with every violation; a suppressed one carries `suppressions` (SARIF 2.1.0 §3.27.23), which
    code scanning shows as suppressed instead of as an open alert."""
    from dataclasses import replace

    from pubsubguard.check.formats import format_sarif

    pairs = _all_sorted(result, outcome)
    sarif = json.loads(format_sarif(replace(result, violations=[v for v, _ in pairs]), locate))
    for entry, (_, suppression) in zip(sarif["runs"][0]["results"], pairs):
        if suppression is None:
            continue
        entry["suppressions"] = [{"kind": suppression.kind, "status": "accepted",
                                  "justification": f"{suppression.reason} ({suppression.where})"}]
    return json.dumps(sarif, indent=2) + "\n"
