"""The check's records: what the pack judged (`Judgement`) and the check's outcome (`Outcome`), the one
value every format renders. Both are frozen: an outcome is built once, by `compose`, with every value as
it is known (the pack's judgement, the program's failure, the suppressions, the unknowns mode), and its
verdict and exit code are derived from it, never set."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from pubsubguard.core.errors import UserError
from pubsubguard.policies.pubsub_facts.levels import EnforcementLevel


UNKNOWNS_MODES = ("advisory", "fail")  # what a mandatory rule that could not decide does (`--unknowns`)


class CheckError(UserError):
    """The check could not run: the message names the file, option or pack at fault."""


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    level: EnforcementLevel  # default level the pack declares
    kind: str  # "resource" or "stack"
    config_schema: dict = field(default_factory=dict)
    remediation: str = ""  # what the pack says fixes a violation and why (its PolicyInfo.remediation_steps)
    url: str = ""  # where the pack documents the rule (its PolicyInfo.url), if it says


@dataclass(frozen=True)
class Suppression:
    """Why a violation does not count: a comment in the program, an entry of a suppressions file, or the
    baseline (a known violation)."""
    rule: str
    resource: str  # a resource name or URN (file), or "" for a comment (it applies to the line's resources)
    reason: str
    kind: str  # SARIF's suppression kind: "inSource" (a comment) or "external" (a file, the baseline)
    where: str  # "channel.py:37", "suppressions.yaml: suppressions[0]", "baseline.json"
    baseline: bool = False  # a known violation the baseline lists, not a suppression someone wrote

    @property
    def state(self) -> str:
        """"comment", "file" or "baseline"."""
        return "baseline" if self.baseline else "comment" if self.kind == "inSource" else "file"

    def as_json(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "where": self.where}


@dataclass(frozen=True)
class Violation:
    policy: str
    level: EnforcementLevel  # effective level: mandatory or advisory
    message: str  # the rule's own sentence (the SDK's "description\n" prefix removed)
    urn: str  # "" when the violation is about the stack as a whole
    resource_type: str
    resource_name: str
    suppression: Suppression | None = None  # why it does not count (set by `compose`), None: it counts

    @property
    def state(self) -> str:
        """The suppression state: "none", "comment", "file" or "baseline"."""
        return self.suppression.state if self.suppression else "none"

    def as_json(self) -> dict:
        """The pack's finding as the machine formats write it (without the suppression)."""
        return {"policy": self.policy, "level": self.level, "message": self.message, "urn": self.urn,
                "resource_type": self.resource_type, "resource_name": self.resource_name}


def sort_key(violation: Violation) -> tuple:
    return violation.urn, violation.level != EnforcementLevel.MANDATORY, violation.policy, violation.message


@dataclass(frozen=True)
class Judgement:
    """What the pack judged: its policies and effective levels, every violation it reported (sorted by
    `sort_key`), and the not-judged entries (a rule that could not decide on a value unknown until deploy)."""
    pack: str
    pack_version: str
    stack: str
    source: str  # what was judged: "Pulumi.dev.yaml" or a plan file
    resources: int
    policies: tuple[PolicyInfo, ...]
    levels: dict[str, EnforcementLevel]  # effective level of every policy
    violations: tuple[Violation, ...]
    unknown_invokes: tuple[dict, ...] = ()  # invokes whose results were unknown offline
    unjudged: tuple[dict, ...] = ()  # {urn, resource_name, policy, properties}: not judged


@dataclass(frozen=True)
class BaselineUse:
    """What `--baseline FILE` did: how many violations found it lists, and its entries found no more."""
    file: str
    known: int
    gone: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    """The check's outcome, rendered by every format (text, JSON, SARIF, the job summary): the pack's
    judgement (its fields, copied), every violation with its suppression state, the unknowns mode, the
    program's failure and run, what the baseline did; the counts, verdict and exit code derive from it."""
    pack: str
    pack_version: str
    stack: str
    source: str
    resources: int
    policies: tuple[PolicyInfo, ...]
    levels: dict[str, EnforcementLevel]
    violations: tuple[Violation, ...]  # every violation the pack reported, each with its suppression state
    unknown_invokes: tuple[dict, ...] = ()
    unjudged: tuple[dict, ...] = ()
    unknowns: str = "advisory"  # UNKNOWNS_MODES
    error: str | None = None  # the program did not complete (what happened); the verdict is then exit 2
    program: Any = None  # the program's run (`plan.ProgramRun`: its output, log, notes), when one ran
    baseline: BaselineUse | None = None
    environments: tuple[str, ...] = ()  # the ESC environments the stack imports (`environment:`)
    environment_values: str = ""  # the file their values were read from (--environment-values), or ""
    config_secrets: frozenset[str] = frozenset()  # the strings of the stack's secret config values known here

    @property
    def counted(self) -> list[Violation]:
        """The violations that count towards the verdict (not suppressed)."""
        return [v for v in self.violations if v.suppression is None]

    @property
    def suppressed(self) -> list[Violation]:
        return [v for v in self.violations if v.suppression is not None]

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.counted if v.level == EnforcementLevel.MANDATORY]

    @property
    def advisory(self) -> list[Violation]:
        return [v for v in self.counted if v.level != EnforcementLevel.MANDATORY]

    @property
    def unknowns_fail(self) -> bool:
        return self.unknowns == "fail"

    @property
    def undecided_mandatory(self) -> list[dict]:
        """Not-judged entries of mandatory rules (they fail the check with `--unknowns fail`)."""
        return [e for e in self.unjudged if self.levels.get(e["policy"]) == EnforcementLevel.MANDATORY]

    @property
    def failed(self) -> bool:
        return bool(self.mandatory) or (self.unknowns_fail and bool(self.undecided_mandatory))

    @property
    def passed(self) -> bool | None:
        """None when there is no verdict (the program did not complete)."""
        return None if self.error else not self.failed

    @property
    def exit_code(self) -> int:
        if self.error:
            return 2
        return 1 if self.failed else 0

    @property
    def secrets(self) -> set[str]:
        return (self.program.secrets if self.program is not None else set()) | set(self.config_secrets)


def compose(judgement: Judgement, *, unknowns: str = "advisory", error: str | None = None, program: Any = None,
            suppressed: dict[int, Suppression] | None = None, baseline: BaselineUse | None = None,
            environments: tuple[str, ...] = (), environment_values: str = "",
            config_secrets: frozenset[str] = frozenset()) -> Outcome:
    """The outcome of one check, built once from what is known: the pack's judgement, the unknowns mode,
    the program's failure and run, the suppression of each violation (by its index in the judgement)."""
    suppressed = suppressed or {}
    violations = tuple(replace(v, suppression=suppressed[i]) if i in suppressed else v
                       for i, v in enumerate(judgement.violations))
    judged = {f.name: getattr(judgement, f.name) for f in fields(Judgement)}
    return Outcome(**{**judged, "violations": violations}, unknowns=unknowns, error=error, program=program,
                   baseline=baseline, environments=tuple(environments), environment_values=environment_values,
                   config_secrets=frozenset(config_secrets))
