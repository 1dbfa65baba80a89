"""`pubsubguard plan`: the offline preview, written as the resource graph (see pubsubguard.plan).

Also the options every command shares: `-s/--stack` and `-C/--cwd` (the project directory)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pubsubguard import plan as planning
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


def add_stack_arguments(parser) -> None:
    parser.add_argument("-s", "--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    add_project_argument(parser)


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "plan", "run the Pulumi program offline and write the resource graph (JSON)",
        exit_codes={0: "the plan was written", 2: "bad option, project, stack file or estate"},
        example="pubsubguard plan -s dev --out out/dev/plan.json",
    )
    add_stack_arguments(parser)
    parser.add_argument("--out", type=options.output_file, default=None, metavar="FILE",
                        help="write the plan JSON to this FILE (default: stdout)")
    parser.set_defaults(run=run)


def run(args) -> int:
    plan = planning.make_plan(args.stack, args.root)
    text = planning.dumps(plan)
    if args.out:
        options.write_text(args.out, text, "--out")
        print(f"plan: {len(plan['resources'])} resources for stack {args.stack!r} -> {args.out}", file=sys.stderr)
    else:
        options.write_stdout(text)
    return 0
