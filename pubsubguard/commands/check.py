"""`pubsubguard check`: judge a stack's plan (or a saved plan) with the policy pack, as
`pulumi preview --policy-pack policies` would, offline and without the Pulumi CLI.

Exit codes: 0 no mandatory violation (advisories may be printed), 1 at least one mandatory
violation, 2 a user error (bad option, file or missing pack virtualenv)."""

from __future__ import annotations

import sys
from pathlib import Path

from pubsubguard import check as checking
from pubsubguard import plan as planning
from pubsubguard.commands.plan import add_stack_arguments

FORMATS = ("text", "json", "sarif")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "check", help="judge the plan with the Pub/Sub policy pack (exit 1 on a mandatory violation)"
    )
    add_stack_arguments(parser)
    parser.add_argument("--plan", type=Path, help="judge this plan file (from `pubsubguard plan --out`) instead")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument(
        "--policy-config", type=Path,
        help="JSON policy config, as `pulumi preview --policy-pack-config`: {\"rule\": \"advisory\"|..., ...}",
    )
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.set_defaults(run=run)


def run(args) -> int:
    root = (args.root or planning.project_root()).resolve()
    if args.plan:
        plan = planning.load_plan(args.plan)
        source = str(args.plan)
        files = [args.plan]
    else:
        plan = planning.make_plan(args.stack, args.root)
        source = f"Pulumi.{args.stack}.yaml"
        project = planning.read_project(root)
        main = root / str(project.get("main", "."))
        files = [root / source] + ([main / "__main__.py"] if main.is_dir() else [main])
    config = checking.read_policy_config(args.policy_config)
    result = checking.run_check(
        plan, policy_config=config, source=source,
        config_source=f"--policy-config {args.policy_config}" if args.policy_config else "policy config",
    )
    if args.format == "json":
        text = checking.format_json(result)
    elif args.format == "sarif":
        text = checking.format_sarif(result, checking.source_locator(files, Path.cwd()))
    else:
        text = checking.format_text(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"check: {len(result.mandatory)} mandatory, {len(result.violations) - len(result.mandatory)} "
              f"advisory -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return result.exit_code
