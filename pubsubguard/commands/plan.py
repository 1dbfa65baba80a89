"""`pubsubguard plan`: the offline preview, written as the resource graph (see pubsubguard.plan)."""

from __future__ import annotations

import sys
from pathlib import Path

from pubsubguard import plan as planning


def add_stack_arguments(parser) -> None:
    parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    parser.add_argument("--root", type=Path, default=None, help="project directory holding Pulumi.yaml")


def register(subparsers) -> None:
    parser = subparsers.add_parser("plan", help="run the Pulumi program offline and write the resource graph")
    add_stack_arguments(parser)
    parser.add_argument("--out", type=Path, help="write the plan JSON here (default: stdout)")
    parser.set_defaults(run=run)


def run(args) -> int:
    plan = planning.make_plan(args.stack, args.root)
    text = planning.dumps(plan)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"plan: {len(plan['resources'])} resources for stack {args.stack!r} -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
