"""The check's result model: policies, violations, the verdict and its exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pubsubguard.core.errors import UserError


LEVELS = ("advisory", "mandatory", "remediate", "disabled")


class CheckError(UserError):
    """The check could not run: the message names the file, option or pack at fault."""


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    level: str  # default level the pack declares
    kind: str  # "resource" or "stack"
    config_schema: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str  # effective level: "mandatory" or "advisory"
    message: str  # the rule's own sentence (the SDK's "description\n" prefix removed)
    urn: str  # "" when the violation is about the stack as a whole
    resource_type: str
    resource_name: str


@dataclass
class CheckResult:
    pack: str
    pack_version: str
    stack: str
    source: str  # what was judged: "Pulumi.dev.yaml" or a plan file
    resources: int
    policies: list[PolicyInfo]
    levels: dict[str, str]  # effective level of every policy
    violations: list[Violation]
    unknown_invokes: list[dict] = field(default_factory=list)  # invokes whose results were unknown offline
    unjudged: list[dict] = field(default_factory=list)  # {urn, resource_name, policy, properties}: not judged
    error: str | None = None  # the program did not complete (what happened); the verdict is then exit 2
    unknowns_fail: bool = False  # `--unknowns fail`: a mandatory rule that could not decide fails the check
    program: Any = None  # the program's run (`plan.ProgramRun`: its output, log, notes), when one ran

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.level == "mandatory"]

    @property
    def undecided_mandatory(self) -> list[dict]:
        """Not-judged entries of mandatory rules (they fail the check with `--unknowns fail`)."""
        return [e for e in self.unjudged if self.levels.get(e["policy"]) == "mandatory"]

    @property
    def failed(self) -> bool:
        return bool(self.mandatory) or (self.unknowns_fail and bool(self.undecided_mandatory))

    @property
    def exit_code(self) -> int:
        if self.error:
            return 2
        return 1 if self.failed else 0

    @property
    def secrets(self) -> set[str]:
        return self.program.secrets if self.program is not None else set()
