"""`pubsubguard verify`: probe the deployed estate with the PySpark verification job, check, report.

The job itself is `validation.job` (also runnable unchanged with spark-submit, see its docstring); its
options are declared there. Here they get the CLI's conventions (`-s`, `-C`, validation at parse time,
defaults relative to the project) and a pre-flight that decides, before Spark starts, whatever can be
decided without it: a writable report directory, Java, credentials for `--target gcp`.
Exit code 0: every declared guarantee holds; 1: one is violated; 2: user or environment error.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pubsubguard import plan as planning
from pubsubguard import state
from pubsubguard.commands import options
from pubsubguard.commands.plan import add_stack_arguments
from pubsubguard.errors import UserError
from validation.access import check_credentials
from validation.session import DEFAULT_MASTER

# Spark master URLs (Spark's "Master URLs" documentation): local, local[N], local[*], local[N,F],
# local[*,F], local-cluster[N,C,M], spark://HOST:PORT[,HOST:PORT...], yarn, k8s://..., mesos://...
_MASTER = re.compile(
    r"local(\[([1-9]\d*|\*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[\w.-]+:\d{1,5}(,[\w.-]+:\d{1,5})*"
    r"|yarn"
    r"|k8s://\S+"
    r"|mesos://\S+"
)
MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn, k8s://URL or mesos://URL"
JAVA_HINT = ("Spark needs Java 17: install it (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) "
             "and put `java` on PATH or set JAVA_HOME")


def spark_master(text: str) -> str:
    if not _MASTER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark master URL (expected {MASTER_FORMS})")
    return text.strip()


def evidence_directory(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory (expected the evidence/ directory of a report)")
    return path


# (dest, type, help): the job's options as the CLI validates and explains them.
REFINED = (
    ("plan", options.remote_or(options.input_file), "a plan FILE or URI (gs://, s3a://, hdfs://) (`pubsubguard plan --out`) instead of planning --stack"),
    ("state", options.or_checkpoint(options.remote_or(options.input_file)), "verify what `pulumi up` deployed: a `pulumi stack export` FILE "
                                                      "or URI (gs://, s3a://) instead of a plan, judged under the "
                                                      "deployed names; `--state` alone with --stack: that stack's "
                                                      "checkpoint in a self-managed backend (PULUMI_BACKEND_URL=file://DIR)"),
    ("target", None, "where the estate is deployed: emulator (PUBSUB_EMULATOR_HOST, else this project's "
                     "`pubsubguard emulator`) or gcp (Application Default Credentials)"),
    ("faults", options.faults, "faults to inject: nack=F,expire=F,poison=F (fractions 0..1), crash=N (subscriber "
                               "tasks killed), misroute=1 (publishers on the global endpoint); "
                               "e.g. nack=0.1,expire=0.05,poison=0.01,crash=1 (default: none)"),
    ("endpoint", options.endpoint_mapping, None),
    ("push_port", options.port, None),
    ("keys", options.positive_int, "ordering keys per topic"),
    ("messages_per_key", options.positive_int, "messages published per key"),
    ("subscribers", options.positive_int, "subscriber tasks"),
    ("drain_timeout", options.positive_seconds, None),
    ("skew_us", options.non_negative_int, "clock skew tolerated between tasks, in microseconds"),
    ("report", options.remote_or(options.output_directory), "report DIRECTORY: report.json, report.html and evidence/ "
                                          "(default: <project>/out/<stack>/report)"),
    ("from_evidence", options.remote_or(evidence_directory), None),
    ("master", spark_master, f"Spark master URL ({MASTER_FORMS}) when none is configured (spark-submit's "
                             f"--master wins; default: {DEFAULT_MASTER})"),
)


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options (validation.job.add_arguments) with `-s/--stack`, `-C/--cwd` and validators."""
    from validation.job import add_arguments

    add_arguments(parser)
    add_stack_arguments(parser)  # replaces the job's --stack/--root (the parser resolves conflicts)
    actions = {action.dest: action for action in parser._actions}
    actions["plan"].metavar, actions["report"].metavar, actions["state"].metavar = "FILE", "DIR", "FILE"
    for dest, type_, help_ in REFINED:
        if type_ is not None:
            actions[dest].type = type_
        if help_ is not None:
            actions[dest].help = help_


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "verify", "probe the deployed estate (Spark), check the guarantees, write the report",
        exit_codes={0: "every declared guarantee holds",
                    1: "a declared guarantee is violated, or inconclusive (messages not settled by the end of the drain)",
                    2: "bad option, project, plan or evidence; no emulator, Java or credentials"},
        example="pubsubguard verify -s dev --faults nack=0.1,expire=0.05,poison=0.01,crash=1\n"
                "  pulumi stack export --file state.json && pubsubguard verify --state state.json --target gcp",
        conflict_handler="resolve",
    )
    add_verify_arguments(parser)
    parser.set_defaults(stack=None, run=run)  # validation.target: --plan and --stack exclude each other


def preflight(args) -> None:
    """What verify needs, checked before any plan, Spark session or client exists; UserError otherwise.
    Fills the default report directory: `<project>/out/<stack>/report` (from evidence: beside it)."""
    from pubsubguard.emulator import find_java

    if args.target == "gcp" and not args.from_evidence and not loopback_only(args.endpoint):
        check_credentials()  # with loopback stand-ins only, the probe decides once it knows the endpoints
    if args.cleanup:  # deletes probe twins: no Spark, no report
        return
    if args.report is None and not args.from_evidence:
        stack = args.stack or (planning.load_plan(args.plan)["stack"] if args.plan else
                               state.load(args.state or None, None, args.root)["stack"] if args.state is not None
                               else "dev")
        args.report = args.root / "out" / stack / "report"
        options.require_writable(args.report, "--report", directory=True)
    if find_java() is None:
        raise UserError(f"Java was not found (no java on PATH, JAVA_HOME unset or without bin/java); {JAVA_HINT}")


def loopback_only(endpoint_items: list[str] | None) -> bool:
    """`--endpoint` maps the global endpoint and every other one it names to loopback stand-ins."""
    from validation.endpoints import GLOBAL, endpoint_of, is_loopback, parse_endpoint_map

    mapping = parse_endpoint_map(endpoint_items)
    return endpoint_of(GLOBAL) in mapping and all(is_loopback(address) for address in mapping.values())


def run(args) -> int:
    from validation.job import run as run_job

    preflight(args)
    return run_job(args)
