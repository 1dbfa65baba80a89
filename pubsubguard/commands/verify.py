"""`pubsubguard verify`: probe the deployed estate with the PySpark verification job, check, report.

The job itself is `pubsubguard.validation.job` (also runnable unchanged with spark-submit, see its docstring); its
options are declared once, in `pubsubguard.validation.config`, and this command uses that parser with the CLI's
project options (`-s`, `-C`), defaults relative to the project, and a pre-flight that decides, before Spark starts, whatever can be
decided without it: a writable report directory, Java, credentials for `--target gcp`. A plan or state it reads
to learn the stack is handed to the job, which reads nothing again.
Exit code 0: every declared guarantee holds; 1: one is violated; 2: user or environment error.
"""

from __future__ import annotations

from pubsubguard.commands import options
from pubsubguard.commands.preflight import verify
from pubsubguard.validation.config import RunConfig, add_arguments


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "verify", "probe the deployed estate (Spark), check the guarantees, write the report",
        exit_codes={0: "every declared guarantee holds",
                    1: "a declared guarantee is violated, or inconclusive (messages not settled by the end of the drain)",
                    2: "bad option, project, plan or evidence; no emulator, Java or credentials"},
        example="pubsubguard verify -s dev --faults nack=0.1,expire=0.05,poison=0.01,crash=1\n"
                "  pulumi stack export --file state.json && pubsubguard verify --state state.json --target gcp",
    )
    add_arguments(parser, project=options.add_stack_arguments)  # the job's options, one parser; the project as the CLI names it
    parser.set_defaults(stack=None, run=run)  # pubsubguard.validation.target: --plan and --stack exclude each other


def run(args) -> int:
    return verify(RunConfig.from_options(args))
