"""`pubsubguard check`: judge a stack's plan (or a saved plan) with the policy pack, as
`pulumi preview --policy-pack policies` would, offline and without the Pulumi CLI.

Exit codes: 0 passed (advisories may be printed), 1 rejected by a mandatory rule, 2 the program, stack
file, plan or command line is broken (one line naming the file and line; with `--format json` the
document holds an `error` object instead of a verdict)."""

from __future__ import annotations

import sys
from pathlib import Path

from pubsubguard.judging import formats, judge, pack, packenv, summary, suppressions
from pubsubguard.judging.result import UNKNOWNS_MODES, Outcome, compose
from pubsubguard.core import plan as planning
from pubsubguard.core import plan_file as plan_files
from pubsubguard.commands import options
from pubsubguard.core.invokes import InvokeResults
from pubsubguard.core.errors import UserError

FORMATS = ("text", "json", "sarif")


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
    options.add_stack_arguments(parser)
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
        help="a JSON or YAML FILE of data-source and component-method results [{token, args, result}, ...]; "
             "invokes and calls not in it are unknown offline (gcp.organizations.getIAMPolicy is evaluated "
             "locally) (default: none)",
    )
    options.add_environment_values_argument(parser)
    compact = parser.add_mutually_exclusive_group()
    compact.add_argument("--compact", action="store_true", default=None,
                         help=f"text: summarise per rule (the default above {formats.COMPACT_FROM} violations)")
    compact.add_argument("--full", dest="compact", action="store_false", help="text: every violation by resource")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="text: each violation's URN")
    parser.add_argument("--out", type=options.output_file, metavar="FILE",
                        help="write the report to this FILE (default: stdout)")
    parser.add_argument(
        "--unknowns", choices=UNKNOWNS_MODES, default="advisory",
        help="what a mandatory rule that cannot decide (values unknown until deploy) does: advisory lists it "
             "under 'Not judged', as Pulumi's policy SDK does; fail fails the check (exit 1) for a closed gate")
    adopt = parser.add_argument_group("the pack, suppressions and baselines (see pubsubguard/judging/suppressions.py)")
    adopt.add_argument("--policy-pack", metavar="DIR", default=None,
                       help="judge with this policy pack folder (a team's fork) (default: pubsubguard's own; "
                            "`pubsubguard pack path` prints it)")
    adopt.add_argument("--suppressions", type=options.input_file, metavar="FILE",
                       help="a YAML or JSON FILE {suppressions: [{rule, resource, reason}]}; comments "
                            "`# pubsubguard: ignore[rule] reason` on a resource's line are read too (default: none)")
    adopt.add_argument("--baseline", type=options.input_file, metavar="FILE",
                       help="violations listed in this FILE (from --create-baseline) are known: only new ones fail")
    parser.add_argument("--summary", type=options.output_file, metavar="FILE",
                        help="append this stack's GitHub job summary (Markdown) to FILE, as the Action does "
                             "with $GITHUB_STEP_SUMMARY (default: none)")
    adopt.add_argument("--create-baseline", type=options.output_file, metavar="FILE",
                       help="write every violation found to this baseline FILE (the verdict is unchanged)")
    options.add_program_arguments(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    source = str(args.plan) if args.plan else f"Pulumi.{args.stack}.yaml"
    try:
        return _run(args, source)
    except UserError as err:
        if args.format == "json":
            _emit(args, formats.format_json_error(err, stack=str(args.stack or ""), source=source), None)
        elif args.format == "sarif":  # code scanning still gets a run, marked as failed, with the reason
            _emit(args, formats.format_sarif_error(err, stack=str(args.stack or "")), None)
        if args.summary:
            try:
                _append(args.summary, summary.error_section(str(args.stack or ""), err))
            except UserError:
                pass  # the error being raised is the one to report
        raise


def _run(args, source: str) -> int:
    root = args.root
    pack_dir = packenv.resolve(args.policy_pack)
    pack.pack_python(pack_dir)  # its virtualenv made now (first use), before the program runs
    from_file = suppressions.load_file(args.suppressions) if args.suppressions else []
    baseline = suppressions.load_baseline(args.baseline) if args.baseline else None
    config = pack.read_policy_config(args.policy_config)
    invokes = InvokeResults.load(args.invoke_results)
    config_source = f"--policy-config {args.policy_config}" if args.policy_config else "policy config"
    judging = dict(policy_config=config, invoke_results=invokes, source=source, config_source=config_source,
                   pack_dir=pack_dir)
    if args.plan:
        plan = plan_files.load_plan(args.plan)
        files = [args.plan]
        judgement, run, failure = judge.judge_plan(plan, **judging), None, None
    else:
        inputs = planning.read_inputs(root, args.stack, args.environment_values)
        judged = judge.judge_program(inputs, run_options=options.run_options(args), **judging)
        judgement, run, failure, plan = judged.judgement, judged.run, judged.failure, judged.run.plan
        files = [root / source] + inputs.project.program_files
    suppressed, baseline_use = suppressions.match(
        judgement, plan, from_file=from_file, from_source=suppressions.comments(plan, root), baseline=baseline,
        baseline_file=str(args.baseline) if args.baseline else None, completed=failure is None)
    config = None if args.plan else inputs.config
    outcome = compose(judgement, unknowns=args.unknowns, error=failure, program=run, suppressed=suppressed,
                      baseline=baseline_use, environments=config.environments if config else (),
                      environment_values=config.environment_values if config else "",
                      config_secrets=config.secret_strings() if config else frozenset())
    if args.create_baseline and not outcome.error:
        found = outcome.violations
        options.write_text(args.create_baseline, suppressions.baseline_document(found, outcome.stack), "--create-baseline")
        print(f"check: baseline of {len(found)} violation{'s' if len(found) != 1 else ''} -> {args.create_baseline}",
              file=sys.stderr)
    locate = formats.source_locator(files, Path.cwd(), plan, root)  # one location per violation, every format
    if args.format == "json":
        text = formats.format_json(outcome, locate)
    elif args.format == "sarif":
        text = formats.format_sarif(outcome, locate)
    else:
        text = formats.format_text(outcome, args.compact, locate, args.verbose, error_on_stderr=not args.out)
    shown = (lambda text: text) if args.show_secrets else (lambda text: plan_files.mask(text, outcome.secrets))
    _emit(args, shown(text), outcome)
    if args.summary:
        _append(args.summary, shown(summary.section(outcome, locate)))
    if outcome.error:
        print(f"pubsubguard check: {outcome.error if args.show_secrets else plan_files.mask(outcome.error, outcome.secrets)}",
              file=sys.stderr)
    return outcome.exit_code


def _append(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as err:
        raise UserError(f"--summary {path}: cannot write ({err.strerror or err})") from None


def _emit(args, text: str, outcome: Outcome | None) -> None:
    if not args.out:
        options.write_stdout(text)
        return
    options.write_text(args.out, text, "--out")
    if outcome is not None and not outcome.error:
        print(f"check: {len(outcome.mandatory)} mandatory, {len(outcome.advisory)} advisory -> {args.out}",
              file=sys.stderr)
