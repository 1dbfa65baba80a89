"""`pubsubguard plan`: the offline preview, written as the resource graph (see pubsubguard.core.plan)."""

from __future__ import annotations

import sys

from pubsubguard.core import plan as planning
from pubsubguard.core import plan_file as plan_files
from pubsubguard.commands import options


def show_diagnostics(run, show_secrets: bool = False, secrets: frozenset[str] = frozenset()) -> None:
    """The program's warnings on stderr, as `pulumi preview` shows them (secrets masked: the plan's, and
    `secrets`, the stack's secret configuration values)."""
    for severity, message in run.messages:
        if severity == "warning":
            print(message if show_secrets else plan_files.mask(message, run.secrets | set(secrets)), file=sys.stderr)


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "plan", "run the Pulumi program offline and write the resource graph (JSON)",
        exit_codes={0: "the plan was written", 2: "bad option, project, stack file or estate"},
        example="pubsubguard plan -s dev --out out/dev/plan.json",
    )
    options.add_stack_arguments(parser)
    parser.add_argument("--out", type=options.output_file, default=None, metavar="FILE",
                        help="write the plan JSON to this FILE (default: stdout)")
    options.add_environment_values_argument(parser)
    options.add_program_arguments(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    inputs = planning.read_inputs(args.root, args.stack, args.environment_values)  # Pulumi.yaml and the stack, once
    secrets = inputs.config.secret_strings()
    if inputs.config.environments:
        print(f"plan: {inputs.config.environments_said()}", file=sys.stderr)
    try:
        run = planning.run_program(inputs.stack, inputs.project.root, inputs=inputs, **options.run_options(args))
    except planning.ProgramFailed as failed:
        show_diagnostics(failed.run, args.show_secrets, secrets)
        if args.show_secrets:
            raise
        raise planning.ProgramFailed(plan_files.mask(str(failed), failed.run.secrets | set(secrets)), failed.run,
                                     failed.stopped) from None
    show_diagnostics(run, args.show_secrets, secrets)
    plan = run.plan
    text = plan_files.dumps(plan, show_secrets=args.show_secrets, secrets=secrets)
    if args.out:
        options.write_text(args.out, text, "--out")
        print(f"plan: {len(plan['resources'])} resources for stack {args.stack!r} -> {args.out}", file=sys.stderr)
    else:
        options.write_stdout(text)
    return 0
