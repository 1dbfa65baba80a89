"""Judge a plan with the policy pack the way the Pulumi CLI does, without the CLI.

The CLI starts a Python pack as `<pack venv python> -u -m pulumi.policy <engine address> <pack dir>`,
reads the port the pack prints on stdout, and talks the gRPC Analyzer protocol to it:
`GetAnalyzerInfo` (policies and their default levels), `Configure` (every policy's effective level and
config properties), `ConfigureStack`, `Analyze` once per resource (its inputs), and `AnalyzeStack`
once with every resource (with parents, dependencies and property dependencies). This module does
the same from the project's virtualenv (protobuf 6) against the pack's own (protobuf 5): they only
share the wire.

Plan values equal to `pubsubguard.core.plan.UNKNOWN` travel as the engine's unknown sentinel, which is
what the CLI sends for a value not known during preview; secrets travel in the engine's envelope.
Resources the program only reads (`Topic.get(...)`) are not judged, as in a preview. Each resource
carries its provider (the default gcp provider with the stack's `gcp:*` config, or the explicit
provider resource it names), so rules know the provider's project.

The package, one job per module: `result` (the model and the verdict), `pack` (the pack's process and its
config), `wire` (the Analyzer messages both ways), `judge` (the judging processes; `run_check` for a saved
plan, `check_program` for a program), `formats` (text, JSON, SARIF, source locations). Everything is
re-exported here, so `from pubsubguard import check` is the one name callers use.
"""

from __future__ import annotations

from pubsubguard.check.result import (  # noqa: F401
    CheckError, CheckResult, LEVELS, PolicyInfo, Violation,
)
from pubsubguard.check.pack import (  # noqa: F401
    ENGINE_ADDRESS, PackProcess, STARTUP_TIMEOUT_S, _JSON_TYPES, _level, _peak_mib, default_pack_dir,
    pack_python, read_manifest, read_policy_config, reconcile_config,
)
from pubsubguard.check.wire import (  # noqa: F401
    CANNOT_JUDGE, _configure_stack, _level_name, _level_value, _pb, _provider, _sources_of, _struct,
    analyze_request, analyze_stack_request, cannot_judge_entries, judged_resources, plan_context,
    policy_infos, wire_value,
)
from pubsubguard.check.judge import (  # noqa: F401
    IN_FLIGHT, Judge, JudgeProcess, PARALLEL_FROM_RESOURCES, check_program, default_workers, judge_main,
    run_check,
)
from pubsubguard.check.formats import (  # noqa: F401
    COMPACT_FROM, EXAMPLES, PROGRAM_LINES, SARIF_SCHEMA, _SARIF_LEVEL, _not_judged, _per_rule, _program_json,
    _program_section, format_json, format_json_error, format_sarif, format_sarif_error, format_text, grouped,
    source_locator,
)
