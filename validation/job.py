"""The verification job: probe a deployed estate with Spark tasks, record evidence, check, report.

Run it through the CLI (`pubsubguard verify --stack dev --faults nack=0.1,expire=0.05,poison=0.01,crash=1`)
or unchanged with spark-submit, with what `pubsubguard bundle --out out/bundle` writes and prints:

    pubsubguard bundle --out out/bundle
    spark-submit --master spark://HOST:7077 --archives out/bundle/pubsubguard-env.tar.gz#env \
        --conf spark.pyspark.python=./env/bin/python --conf spark.pyspark.driver.python=.venv/bin/python \
        --py-files out/bundle/pubsubguard.zip validation/job.py --plan plan.json --target gcp --report /shared/run1

`--py-files` puts the project's packages on every executor's PYTHONPATH, so the probe's task functions
(`validation.probe.publish_partition` / `subscribe_partition`) unpickle there; `--archives ...#env`
unpacks the executors' Python with google-cloud-pubsub, pyarrow, numpy and pandas
(`pubsubguard.bundle`). Evidence is written by executors straight to `<report>/evidence`, so on a
cluster `--report` must be on storage all nodes share. `--from-evidence DIR` re-runs checks and
report on recorded evidence alone; DIR, `--report` with it, and `--plan` may be object store URIs
(gs://, s3a://, hdfs://: `pubsubguard.storage`). The submitter decides the master: the job's
`--master` applies only when none is configured (`validation.session`).

This module is the entry point only; the rooms of a run:
    validation/target.py    the declared estate from the plan, the target (emulator or gcp) resolved
    validation/driver.py    config drift check, filter canary, twins, publisher and subscriber jobs, drain
    validation/endpoints.py the endpoint map, recording listeners, clients per endpoint, endpoint_pinning
    validation/access.py    identity, testIamPermissions, the twins' service agent grant
    validation/push.py      the push twins' receiver answers (per the fault plan)
    validation/drift.py     declared vs. deployed as `config_drift` findings
    validation/progress.py  the evidence tally and progress bars
    validation/failures.py  why a Spark job failed, in one line; crash log silencing; VerifyError
    validation/signals.py   SIGINT/SIGTERM as `Interrupted` while twins exist
    validation/verdict.py   the checks (validation/checks.py) folded per guarantee
    validation/report.py    report.json, report.html, the terminal summary
Exit code: 0 all declared guarantees hold, 1 one is violated, 2 user error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pubsub_facts as facts

from pubsubguard import storage
from pubsubguard.errors import UserError
from validation import evidence
from validation.driver import DEFAULT_FAULT_DEADLINE_S, DRAIN_SLACK_S, EXPIRE_MARGIN_S, probe
from validation.failures import VerifyError
from validation.judge import DEFAULT_SKEW_US
from validation.session import DEFAULT_MASTER, spark_session
from validation.target import load_estate, resolve_target

DEFAULT_FAULTS = ""


def location(text: str) -> Path | str:
    """A local path as a Path, an object store URI (pubsubguard.storage) as it is."""
    return text if storage.is_remote(text) else Path(text)


def fault_deadline(text: str) -> float | None:
    """`--fault-deadline`: seconds (1..600, what ModifyAckDeadline accepts) or `declared` (None)."""
    if text.strip() == "declared":
        return None
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1 <= value <= facts.ACK_DEADLINE_MAX_S or value != int(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole seconds from 1 to {facts.ACK_DEADLINE_MAX_S}, "
                                         "or `declared`")
    return value


def tcp_port(text: str) -> int:
    """`--push-port`: a TCP port, 1..65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port from 1 to 65535, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("what to verify")
    source.add_argument("--stack", default=None, help="stack whose plan is made offline (default: dev)")
    source.add_argument("--root", type=Path, default=None, help="project directory holding Pulumi.yaml")
    source.add_argument("--plan", type=location, default=None,
                        help="a plan file or URI (gs://, s3a://, hdfs://; `pubsubguard plan --out`) instead of --stack")
    source.add_argument("--state", type=lambda text: text if text == "" else location(text), nargs="?", const="",
                        default=None,
                        help="verify what `pulumi up` deployed: a `pulumi stack export` file or URI instead of a plan; "
                             "`--state` alone with --stack: that stack's checkpoint in a self-managed backend")
    source.add_argument("--target", choices=("emulator", "gcp"), default="emulator")
    source.add_argument("--project", default=None, help="Google Cloud project (default: the plan's gcp:project)")
    source.add_argument("--endpoint", action="append", default=None, metavar="REGION=HOST:PORT",
                        help="map a declared locational endpoint (REGION, or `global` for the global endpoint) to a "
                             "host; repeatable. A loopback host is dialled without TLS or credentials and its "
                             "traffic is recorded (endpoint_pinning)")
    source.add_argument("--push-receiver", default=None, metavar="URL",
                        help="on gcp, a URL Pub/Sub can push to that reaches the probe's push receiver on loopback "
                             "port --push-port; push subscriptions are probed through it (else not_tested)")
    source.add_argument("--push-port", type=tcp_port, default=8080,
                        help="the loopback port of the probe's push receiver with --push-receiver")
    source.add_argument("--allow-shared-subscriptions", action="store_true",
                        help="on gcp, probe although production subscriptions do not exclude probe messages")
    work = parser.add_argument_group("workload")
    work.add_argument("--faults", default=DEFAULT_FAULTS, help="e.g. nack=0.1,expire=0.05,poison=0.01,crash=1")
    work.add_argument("--keys", type=int, default=8, help="ordering keys per topic (default 8)")
    work.add_argument("--messages-per-key", type=int, default=25, help="messages per key (default 25)")
    work.add_argument("--subscribers", type=int, default=2, help="subscriber tasks (default 2)")
    work.add_argument("--fault-deadline", type=fault_deadline, default=DEFAULT_FAULT_DEADLINE_S, metavar="SECONDS",
                      help="ack deadline the probe sets (ModifyAckDeadline) on deliveries the expire and crash faults "
                           "hold, so they come back after it; `declared` keeps each subscription's own "
                           f"(default {DEFAULT_FAULT_DEADLINE_S:.0f}, Pub/Sub's smallest)")
    work.add_argument("--drain-timeout", type=float, default=None,
                      help="seconds to wait after publishing for every message to be settled (default: the "
                           f"fault deadline (push: the ack deadline) + {EXPIRE_MARGIN_S:.0f} s expire margin + the "
                           f"longest retry backoff + {DRAIN_SLACK_S:.0f} s)")
    work.add_argument("--conform", action="store_true",
                      help="run the conformance scenarios (validation.conformance) on the same target, beside the probe; the "
                           "report names, per finding, the violated scenarios that explain it")
    work.add_argument("--skew-us", type=int, default=DEFAULT_SKEW_US,
                      help=f"clock skew tolerated between tasks (default {DEFAULT_SKEW_US})")
    out = parser.add_argument_group("output")
    out.add_argument("--report", type=location, default=None,
                     help="report directory or URI (default: out/<stack>/report; a URI with --from-evidence only)")
    out.add_argument("--from-evidence", type=location, default=None, metavar="DIR",
                     help="re-run checks and report on recorded evidence only (no target needed)")
    out.add_argument("--cleanup", action="store_true", help="delete probe twins left by killed runs, then exit")
    out.add_argument("--master", default=None,
                     help=f"Spark master when none is configured (spark-submit's --master wins; default {DEFAULT_MASTER})")
    out.add_argument("--no-progress", action="store_true", help="no progress bars")


def main(argv: list[str] | None = None, spark=None) -> int:
    parser = argparse.ArgumentParser(prog="validation/job.py", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args, spark=spark)
    except UserError as err:
        print(f"verify: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("verify: interrupted", file=sys.stderr)
        return 130


def run(args, spark=None) -> int:
    if args.from_evidence:
        return from_evidence(args, spark)
    if args.cleanup:
        return run_cleanup(args)
    if storage.is_remote(args.report or ""):
        return probe_to_store(args, spark)
    session, evidence_dir, report = probe(args, spark)
    return check_and_report(session, evidence_dir, report, not args.no_progress)


def probe_to_store(args, spark=None) -> int:
    """A probe run whose `--report` is an object store URI (gs://, s3a://, hdfs://). The evidence is
    written there as the run goes, by the Spark tasks wherever they run (other hosts than the driver's
    included) and read back by the driver from there: `<URI>/evidence` is all they share (parts,
    run.json, the readiness and stop flags, notes, client logs). The driver's own files (conformance.json,
    spark.log, report.json, report.html) are made in a scratch directory and written to the URI at the
    end. The URI is tried for writing before anything is created on the target."""
    destination = args.report
    storage.require_writable(destination)
    evidence_at = storage.join(destination, "evidence")
    with tempfile.TemporaryDirectory(prefix="pubsubguard-run-") as scratch:
        args.report = Path(scratch) / "report"
        try:
            session, evidence_dir, report = probe(args, spark, evidence_at=evidence_at)
            code = check_and_report(session, evidence_dir, report, not args.no_progress, location=destination)
        finally:
            args.report = destination
        copied = storage.copy_tree(report, destination)
    print(f"report: {len(copied)} files written to {destination} (and the evidence, as the run went)", file=sys.stderr)
    return code


# ------------------------------------------------------------------------------- check + report
def evidence_location(directory: Path | str) -> Path | str:
    for candidate in (directory, storage.join(directory, "evidence")):
        if storage.exists(storage.join(candidate, "run.json")):
            return candidate if storage.is_remote(candidate) else Path(candidate)
    raise VerifyError(f"--from-evidence {directory}: no run.json here or in {storage.join(directory, 'evidence')} "
                      "(expected the evidence directory of a verify run)")


def from_evidence(args, spark=None) -> int:
    evidence_dir = evidence_location(args.from_evidence)
    report = args.report or storage.parent(evidence_dir)
    report = report if storage.is_remote(report) else Path(report).resolve()
    session = spark or spark_session(args.master, log_dir=None if storage.is_remote(report) else report)
    return check_and_report(session, evidence_dir, report, not args.no_progress)


def check_and_report(spark, evidence_dir: Path | str, report: Path | str, terminal: bool = True,
                     shown: Path | str | None = None, location: Path | str | None = None) -> int:
    """Judge a run's evidence (validation.verdict) and write its report; the report's exit code.
    Evidence and report may be object store URIs (pubsubguard.storage): see `staged`. The report names
    its evidence as `shown` and itself as `location` (default: where they are read and written)."""
    with tempfile.TemporaryDirectory(prefix="pubsubguard-staging-") as staging:
        local_evidence = staged_evidence(spark, evidence_dir, Path(staging) / "evidence")
        local_report = Path(staging) / "report" if storage.is_remote(report) else report
        code = _check_and_report(spark, local_evidence, local_report, terminal, shown=shown or evidence_dir,
                                 location=location or report)
        if storage.is_remote(report):
            copied = storage.copy_tree(local_report, report)
            print(f"report: {len(copied)} files written to {report}", file=sys.stderr)
        return code


def staged_evidence(spark, evidence_dir: Path | str, staging: Path) -> Path | str:
    """Where Spark reads the evidence: where it is, when Spark's Hadoop has a connector for its
    scheme; else, in local mode, a local copy (removed afterwards); on a cluster (whose executors do not
    see the driver's disk) the driver reads the parts and hands them to Spark (report.read_evidence).
    Either is said on stderr."""
    if storage.hadoop_can_read(spark, evidence_dir):
        return evidence_dir
    kind = storage.scheme(evidence_dir)
    missing = f"this Spark has no Hadoop filesystem for {kind}:// (it needs {storage.CONNECTORS.get(kind, 'a connector')})"
    if not spark.sparkContext.master.startswith("local"):
        parts = [name for name in storage.files(evidence_dir) if name.endswith(".parquet")]
        print(f"evidence: {missing}; the driver reads the {len(parts)} part files of {evidence_dir} and sends them "
              "to the executors (bounded by the driver's memory: add the connector for large runs)", file=sys.stderr)
        return evidence_dir
    copied = storage.copy_tree(evidence_dir, staging)
    print(f"evidence: {missing}; copied {len(copied)} files from {evidence_dir} to local staging {staging} to check them",
          file=sys.stderr)
    return staging


def _check_and_report(spark, evidence_dir: Path | str, report: Path, terminal: bool, shown: Path | str,
                      location: Path | str) -> int:
    from validation import report as reporting

    result = reporting.judged(spark, evidence_dir, shown)
    reporting.write(result, report, location)
    if terminal:
        reporting.print_summary(result, location)
    else:
        print(f"report: {storage.join(location, 'report.json')} verdict={result['verdict']}", file=sys.stderr)
    return result["exit_code"]


# ------------------------------------------------------------------------------------ cleanup
def run_cleanup(args) -> int:
    from google.cloud import pubsub_v1

    from validation.isolation import cleanup

    _, estate = load_estate(args)
    resolve_target(args, estate)
    subscriber = pubsub_v1.SubscriberClient()
    topic_paths = [t.path for t in estate.topics.values()]
    topic_paths += [t.dead_letter_topic for t in estate.subscriptions.values() if t.dead_letter_topic]
    try:
        deleted = cleanup(subscriber, estate.project, topic_paths)
    except Exception as err:  # noqa: BLE001
        raise VerifyError(f"--cleanup: cannot list subscriptions of projects/{estate.project}: {err}") from None
    for path in deleted:
        print(f"deleted probe twin {path}")
    print(f"cleanup: {len(deleted)} probe twin(s) deleted from projects/{estate.project}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
