"""`pubsubguard verify`: probe the deployed estate with the PySpark verification job, check, report.

The job itself is `validation.job` (also runnable unchanged with spark-submit, see its docstring).
Exit code 0: every declared guarantee holds; 1: one is violated; 2: user error.
"""

from __future__ import annotations


def register(subparsers) -> None:
    from validation.job import add_arguments

    parser = subparsers.add_parser(
        "verify", help="probe the deployed estate (Spark), check the guarantees, write the report"
    )
    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from validation.job import run as run_job

    return run_job(args)
