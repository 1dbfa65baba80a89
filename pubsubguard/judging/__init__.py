"""Judge a plan with the policy pack the way the Pulumi CLI does, without the CLI.

The CLI starts a Python pack as `<pack venv python> -u -m pulumi.policy <engine address> <pack dir>`,
reads the port the pack prints on stdout, and talks the gRPC Analyzer protocol to it:
`GetAnalyzerInfo` (policies and their default levels), `Configure` (every policy's effective level and
config properties), `ConfigureStack`, `Analyze` once per resource (its inputs), and `AnalyzeStack`
once with every resource (with parents, dependencies and property dependencies). This module does
the same from the project's virtualenv (protobuf 6) against the pack's own (protobuf 5): they only
share the protocol.

Plan values equal to `pubsubguard.core.plan.UNKNOWN` travel as the engine's unknown sentinel, which is
what the CLI sends for a value not known during preview; secrets travel in the engine's envelope.
Resources the program only reads (`Topic.get(...)`) are not judged, as in a preview. Each resource
carries its provider (the default gcp provider with the stack's `gcp:*` config, or the explicit
provider resource it names), so rules know the provider's project.

The package, one job per module: `result` (the records: the pack's `Judgement`, the check's `Outcome`
and `compose`, which builds it once), `pack` (the pack's process and its config), `analyzer` (the Analyzer
messages both ways), `judge` (the judging processes; `judge_plan` for a saved plan, `judge_program` for
a program), `suppressions` (suppression comments and files, baselines, matched to a judgement),
`formats` (text, JSON, SARIF, source locations, each rendering an `Outcome`), `summary` (the GitHub job
summary). The public names are below; everything else is imported from its module.
"""

from __future__ import annotations

from pubsubguard.judging.formats import format_json, format_sarif, format_text, source_locator
from pubsubguard.judging.judge import Judge, JudgeProcess, ProgramJudgement, judge_plan, judge_program
from pubsubguard.judging.pack import PackProcess, default_pack_dir, read_policy_config
from pubsubguard.judging.result import (
    BaselineUse, CheckError, Judgement, Outcome, PolicyInfo, Suppression, Violation, compose,
)

__all__ = [
    "BaselineUse", "CheckError", "Judge", "JudgeProcess", "Judgement", "Outcome", "PackProcess", "PolicyInfo",
    "ProgramJudgement", "Suppression", "Violation", "compose", "default_pack_dir", "format_json", "format_sarif",
    "format_text", "judge_plan", "judge_program", "read_policy_config", "source_locator",
]
