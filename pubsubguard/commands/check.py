"""`pubsubguard check`: judge a stack's plan (or a saved plan) with the policy pack, as
`pulumi preview --policy-pack policies` would, offline and without the Pulumi CLI.

Exit codes: 0 passed (advisories may be printed), 1 rejected by a mandatory rule, 2 the program, stack
file, plan or command line is broken (one line naming the file and line; with `--format json` the
document holds an `error` object instead of a verdict)."""

from __future__ import annotations

import sys
from pathlib import Path

import pubsubguard.check as checking
from pubsubguard.core import plan as planning
from pubsubguard.check import suppressions
from pubsubguard.commands import options
from pubsubguard.commands import pack as pack_command
from pubsubguard.commands.plan import add_program_arguments, add_stack_arguments, run_options
from pubsubguard.core.engine import InvokeResults
from pubsubguard.core.errors import UserError

FORMATS = ("text", "json", "sarif")
GET_PROJECT = "gcp:organizations/getProject:getProject"


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "check", "judge the plan with the Pub/Sub policy pack (exit 1 on a mandatory violation)",
        exit_codes={0: "PASSED: the program completed and no mandatory rule fired (advisories may be listed)",
                    1: "REJECTED: at least one mandatory violation",
                    2: "bad option, stack file, plan, policy config, suppression or baseline; the program failed, "
                       "was stopped at a limit or ended early (violations seen until then are listed); the pack is "
                       "not a pack or its virtualenv cannot be made"},
        example="pubsubguard check -s dev --format sarif --out pubsubguard.sarif",
    )
    add_stack_arguments(parser)
    parser.add_argument("--plan", type=options.input_file, metavar="FILE",
                        help="judge this plan FILE (from `pubsubguard plan --out`) instead of planning --stack")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format")
    parser.add_argument(
        "--policy-config", type=options.input_file, metavar="FILE",
        help='a FILE of JSON, as `pulumi preview --policy-pack-config FILE` takes: '
             '{"rule": "advisory"|"mandatory"|"disabled", ...} (default: the pack\'s levels)',
    )
    parser.add_argument(
        "--invoke-results", type=options.input_file, metavar="FILE",
        help="a JSON or YAML FILE of data-source results [{token, args, result}, ...]; invokes not in it "
             "are unknown offline (gcp.organizations.getIAMPolicy is evaluated locally) (default: none)",
    )
    compact = parser.add_mutually_exclusive_group()
    compact.add_argument("--compact", action="store_true", default=None,
                         help=f"text: summarise per rule (the default above {checking.COMPACT_FROM} violations)")
    compact.add_argument("--full", dest="compact", action="store_false", help="text: every violation by resource")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="text: each violation's URN, and every advisory even when a rule repeats")
    parser.add_argument("--out", type=options.output_file, metavar="FILE",
                        help="write the report to this FILE (default: stdout)")
    parser.add_argument(
        "--unknowns", choices=("advisory", "fail"), default="advisory",
        help="what a mandatory rule that cannot decide (values unknown until deploy) does: advisory lists it "
             "under 'Not judged', as Pulumi's policy SDK does; fail fails the check (exit 1) for a closed gate")
    adopt = parser.add_argument_group("the pack, suppressions and baselines (see pubsubguard/check/suppressions.py)")
    adopt.add_argument("--policy-pack", metavar="DIR", default=None,
                       help="judge with this policy pack folder (a team's fork) (default: pubsubguard's own; "
                            "`pubsubguard pack path` prints it)")
    adopt.add_argument("--suppressions", type=options.input_file, metavar="FILE",
                       help="a YAML or JSON FILE {suppressions: [{rule, resource, reason}]}; comments "
                            "`# pubsubguard: ignore[rule] reason` on a resource's line are read too (default: none)")
    adopt.add_argument("--baseline", type=options.input_file, metavar="FILE",
                       help="violations listed in this FILE (from --create-baseline) are known: only new ones fail")
    adopt.add_argument("--create-baseline", type=options.output_file, metavar="FILE",
                       help="write every violation found to this baseline FILE (the verdict is unchanged)")
    add_program_arguments(parser)
    parser.set_defaults(run=run)


def project_numbers(invokes: InvokeResults, plan: dict) -> dict[str, str]:
    """Project id -> number from given getProject results (for the service-agent rule)."""
    numbers = {}
    entries = [(args, result) for (token, args), result in invokes.exact.items() if token == GET_PROJECT]
    entries += [("{}", invokes.any_args[GET_PROJECT])] if GET_PROJECT in invokes.any_args else []
    import json

    for args, result in entries:
        project = json.loads(args).get("projectId") or plan.get("gcp_project")
        if isinstance(result.get("number"), (str, int)) and project:
            numbers[str(project)] = str(result["number"])
    return numbers


def _with_numbers(config: dict, invokes: InvokeResults, plan: dict) -> dict:
    numbers = project_numbers(invokes, plan)
    if numbers and "dead-letter-service-agent-iam" not in config:
        return {**config, "dead-letter-service-agent-iam": {"projectNumbers": numbers}}
    return config


def run(args) -> int:
    source = str(args.plan) if args.plan else f"Pulumi.{args.stack}.yaml"
    try:
        return _run(args, source)
    except UserError as err:
        if args.format == "json":
            _emit(args, checking.format_json_error(err, stack=str(args.stack or ""), source=source), None)
        elif args.format == "sarif":  # code scanning still gets a run, marked as failed, with the reason
            _emit(args, checking.format_sarif_error(err, stack=str(args.stack or "")), None)
        raise


def _run(args, source: str) -> int:
    root = args.root
    pack_dir = pack_command.resolve(args.policy_pack)
    checking.pack_python(pack_dir)  # its virtualenv made now (first use), before the program runs
    from_file = suppressions.load_file(args.suppressions) if args.suppressions else []
    baseline = suppressions.load_baseline(args.baseline) if args.baseline else None
    config = checking.read_policy_config(args.policy_config)
    invokes = InvokeResults.load(args.invoke_results)
    config_source = f"--policy-config {args.policy_config}" if args.policy_config else "policy config"
    if args.plan:
        plan = planning.load_plan(args.plan)
        files = [args.plan]
        result = checking.run_check(plan, policy_config=_with_numbers(config, invokes, plan), source=source,
                                    config_source=config_source, pack_dir=pack_dir)
    else:
        project = planning.read_project(root)
        header = planning.plan_header(project, args.stack, planning.read_stack_config(project, args.stack))
        plan, result = checking.check_program(root, args.stack, invoke_results=invokes, source=source,
                                              policy_config=_with_numbers(config, invokes, header),
                                              config_source=config_source, run_options=run_options(args),
                                              pack_dir=pack_dir)
        files = [root / source] + project.program_files
    result.unknowns_fail = args.unknowns == "fail"
    found = list(result.violations)
    outcome = suppressions.apply(result, plan, from_file=from_file, from_source=suppressions.comments(plan, root),
                                 baseline=baseline, baseline_file=str(args.baseline) if args.baseline else None)
    if args.create_baseline and not result.error:
        options.write_text(args.create_baseline, suppressions.baseline_document(found, result.stack), "--create-baseline")
        print(f"check: baseline of {len(found)} violation{'s' if len(found) != 1 else ''} -> {args.create_baseline}",
              file=sys.stderr)
    locate = checking.source_locator(files, Path.cwd(), plan, root)  # one location per violation, every format
    if args.format == "json":
        text = suppressions.render_json(checking.format_json(result, locate), result, outcome, locate)
    elif args.format == "sarif":
        text = suppressions.render_sarif(result, outcome, locate)
    else:
        text = suppressions.render_text(checking.format_text(result, args.compact, locate, args.verbose), outcome)
    if not args.show_secrets:
        text = planning.mask(text, result.secrets)
    _emit(args, text, result)
    if result.error:
        print(f"pubsubguard check: {result.error if args.show_secrets else planning.mask(result.error, result.secrets)}",
              file=sys.stderr)
    return result.exit_code


def _emit(args, text: str, result) -> None:
    if not args.out:
        options.write_stdout(text)
        return
    options.write_text(args.out, text, "--out")
    if result is not None and not result.error:
        print(f"check: {len(result.mandatory)} mandatory, {len(result.violations) - len(result.mandatory)} "
              f"advisory -> {args.out}", file=sys.stderr)
