"""`pubsubguard pack`: where the policy pack is, so the real CLI enforces the same rules:

    pulumi preview --policy-pack "$(pubsubguard pack path)"

`path` prints the pack's folder (its virtualenv beside it, made on first use: one line on stderr);
`python` prints the pack's interpreter."""

from __future__ import annotations

from pubsubguard.judging import packenv
from pubsubguard.commands import options


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "pack", "print the policy pack's folder (for `pulumi preview --policy-pack`) or interpreter",
        exit_codes={0: "printed", 2: "the pack is not a policy pack, or its virtualenv cannot be made "
                                     "(no network, no venv module)"},
        example='pulumi preview --policy-pack "$(pubsubguard pack path)"',
    )
    parser.add_argument("what", choices=("path", "python"), help="path: the pack's folder; python: its interpreter")
    parser.add_argument("--policy-pack", metavar="DIR", default=None,
                        help="another pack (a team's fork) instead of pubsubguard's own (default: the bundled pack)")
    options.add_project_argument(parser)  # as every command takes it; the pack does not depend on the project
    parser.set_defaults(run=run)


def run(args) -> int:
    folder = packenv.resolve(args.policy_pack)
    python = packenv.pack_python(folder)  # made now, so the folder is complete when printed
    print(python if args.what == "python" else folder)
    return 0
