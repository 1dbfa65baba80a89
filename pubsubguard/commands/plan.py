"""`pubsubguard plan`: the offline preview, written as the resource graph (see pubsubguard.core.plan).

Also the options every command shares: `-s/--stack` and `-C/--cwd` (the project directory)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pubsubguard.core import plan as planning
from pubsubguard.commands import options


def project_directory(text: str) -> Path:
    """`-C/--cwd DIR`: an existing directory, resolved (the project: Pulumi.yaml, stacks, state)."""
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory (expected the project directory holding Pulumi.yaml)")
    return path.resolve()


def add_project_argument(parser) -> None:
    parser.add_argument(
        "-C", "--cwd", "--root", dest="root", type=project_directory, default=".", metavar="DIR",
        help="project directory holding Pulumi.yaml and Pulumi.<stack>.yaml (--root is an alias); other "
             "relative paths stay relative to where you run the command (default: the current directory)",
    )


def stack_name(text: str) -> str:
    """`-s/--stack NAME`: a Pulumi stack name (letters, digits, `-`, `_`, `.`; an `org/project/` prefix is
    allowed and the last part names the stack file)."""
    name = text.rsplit("/", 1)[-1]
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name in (".", ".."):
        raise argparse.ArgumentTypeError(f"expected a stack name (letters, digits, -, _ or .), got {text!r}")
    return name


def add_stack_arguments(parser) -> None:
    parser.add_argument("-s", "--stack", default="dev", type=stack_name,
                        help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    add_project_argument(parser)


def env_name(text: str) -> str:
    if not text or "=" in text or not text.replace("_", "a").isalnum():
        raise argparse.ArgumentTypeError(f"expected an environment variable's name, got {text!r}")
    return text


def add_program_arguments(parser) -> None:
    """How the program runs (pubsubguard.core.langhost): its Python, its environment, its limits."""
    from pubsubguard.core.engine import Limits

    defaults = Limits()
    group = parser.add_argument_group("the program's process (see docs/security.md)")
    group.add_argument("--python", metavar="PATH",
                       help="run the program with this Python (default: as Pulumi finds it: runtime.options."
                            "virtualenv or toolchain in Pulumi.yaml, an active VIRTUAL_ENV, python3 on PATH)")
    group.add_argument("--pass-env", action="append", default=[], type=env_name, metavar="NAME",
                       help="pass this environment variable to the program (repeatable; default: only PATH, "
                            "locale and time zone)")
    group.add_argument("--timeout", type=options.positive_seconds, default=defaults.timeout_s, metavar="SECONDS",
                       help="stop a program still running after this many seconds")
    group.add_argument("--memory-limit", type=options.positive_int, default=defaults.memory_mib, metavar="MIB",
                       help="the program's memory (data segment) limit in MiB")
    group.add_argument("--max-resources", type=options.positive_int, default=defaults.max_resources, metavar="N",
                       help="stop a program that registers more resources than this")
    group.add_argument("--max-input-bytes", type=options.positive_int, default=defaults.max_input_bytes,
                       metavar="BYTES", help="stop a program one of whose resources has larger inputs")
    group.add_argument("--require-isolation", action="store_true",
                       help="exit 2 where the program cannot be confined (no bubblewrap, or no namespaces)")
    group.add_argument("--show-secrets", action="store_true",
                       help="show secret values in the output and plan (default: [secret], as Pulumi)")


def run_options(args) -> dict:
    from pubsubguard.core.engine import Limits

    return {
        "python": args.python, "pass_env": tuple(args.pass_env), "require_isolation": args.require_isolation,
        "limits": Limits(max_resources=args.max_resources, max_input_bytes=args.max_input_bytes,
                         timeout_s=args.timeout, memory_mib=args.memory_limit),
    }


def show_diagnostics(run, show_secrets: bool = False) -> None:
    """The program's warnings on stderr, as `pulumi preview` shows them (secrets masked)."""
    for severity, message in run.messages:
        if severity == "warning":
            print(message if show_secrets else planning.mask(message, run.secrets), file=sys.stderr)


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "plan", "run the Pulumi program offline and write the resource graph (JSON)",
        exit_codes={0: "the plan was written", 2: "bad option, project, stack file or estate"},
        example="pubsubguard plan -s dev --out out/dev/plan.json",
    )
    add_stack_arguments(parser)
    parser.add_argument("--out", type=options.output_file, default=None, metavar="FILE",
                        help="write the plan JSON to this FILE (default: stdout)")
    add_program_arguments(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    inputs = planning.read_inputs(args.root, args.stack)  # Pulumi.yaml and the stack, read once
    try:
        run = planning.run_program(inputs.stack, inputs.project.root, inputs=inputs, **run_options(args))
    except planning.ProgramFailed as failed:
        show_diagnostics(failed.run, args.show_secrets)
        raise
    show_diagnostics(run, args.show_secrets)
    plan = run.plan
    text = planning.dumps(plan, show_secrets=args.show_secrets)
    if args.out:
        options.write_text(args.out, text, "--out")
        print(f"plan: {len(plan['resources'])} resources for stack {args.stack!r} -> {args.out}", file=sys.stderr)
    else:
        options.write_stdout(text)
    return 0
