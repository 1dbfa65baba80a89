"""`pubsubguard verify`: probe the deployed estate with the PySpark verification job, check, report.

The job itself is `pubsubguard.validation.job` (also runnable unchanged with spark-submit, see its docstring); its
options are declared once, in `pubsubguard.validation.config`, and this command uses that parser with the CLI's
project options (`-s`, `-C`), defaults relative to the project, and a pre-flight that decides, before Spark starts, whatever can be
decided without it: a writable report directory, Java, credentials for `--target gcp`. A plan or state it reads
to learn the stack is handed to the job, which reads nothing again.
Exit code 0: every declared guarantee holds; 1: one is violated; 2: user or environment error.
"""

from __future__ import annotations

from pathlib import Path

from pubsubguard.commands import options
from pubsubguard.commands.plan import add_stack_arguments
from pubsubguard.core.declared import plan_from
from pubsubguard.core.errors import UserError
from pubsubguard.validation.access import check_credentials
from pubsubguard.validation.config import RunConfig, add_arguments

JAVA_HINT = ("Spark needs Java 17: install it (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) "
             "and put `java` on PATH or set JAVA_HOME")


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "verify", "probe the deployed estate (Spark), check the guarantees, write the report",
        exit_codes={0: "every declared guarantee holds",
                    1: "a declared guarantee is violated, or inconclusive (messages not settled by the end of the drain)",
                    2: "bad option, project, plan or evidence; no emulator, Java or credentials"},
        example="pubsubguard verify -s dev --faults nack=0.1,expire=0.05,poison=0.01,crash=1\n"
                "  pulumi stack export --file state.json && pubsubguard verify --state state.json --target gcp",
    )
    add_arguments(parser, project=add_stack_arguments)  # the job's options, one parser; the project as the CLI names it
    parser.set_defaults(stack=None, run=run)  # pubsubguard.validation.target: --plan and --stack exclude each other


def preflight(config: RunConfig) -> tuple[RunConfig, dict | None]:
    """What verify needs, checked before any Spark session or client exists; UserError otherwise. The
    configuration with its default report directory, `<project>/out/<stack>/report` (from evidence: beside
    it), and the plan or state read to learn that stack (`--plan FILE` or `--state` without `--stack`),
    which the job is handed rather than reading it again (None: the job reads or makes it)."""
    from pubsubguard.core.emulator import find_java

    if config.target == "gcp" and not config.from_evidence and not loopback_only(config.endpoint):
        check_credentials()  # with loopback stand-ins only, the probe decides once it knows the endpoints
    if config.cleanup:  # deletes probe twins: no Spark, no report
        return config, None
    plan = None
    if config.report is None and not config.from_evidence:
        if config.stack is None and (config.plan is not None or config.state is not None):
            plan = plan_from(config.plan, None, config.root, config.state)  # read once, handed to the job
        stack = config.stack or (plan["stack"] if plan is not None else "dev")
        config = config.but(report=Path(config.root or ".") / "out" / stack / "report")
        options.require_writable(config.report, "--report", directory=True)
    if find_java() is None:
        raise UserError(f"Java was not found (no java on PATH, JAVA_HOME unset or without bin/java); {JAVA_HINT}")
    return config, plan


def loopback_only(endpoint_items: list[str] | None) -> bool:
    """`--endpoint` maps the global endpoint and every other one it names to loopback stand-ins."""
    from pubsubguard.validation.endpoints import GLOBAL, endpoint_of, is_loopback, parse_endpoint_map

    mapping = parse_endpoint_map(endpoint_items)
    return endpoint_of(GLOBAL) in mapping and all(is_loopback(address) for address in mapping.values())


def run(args) -> int:
    from pubsubguard.validation.job import run as run_job

    config, plan = preflight(RunConfig.from_options(args))
    return run_job(config, plan=plan)
