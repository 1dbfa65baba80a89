"""The verification job: probe a deployed estate with Spark tasks, record evidence, check, report.

Run it through the CLI (`pubsubguard verify --stack dev --faults nack=0.1,expire=0.05,poison=0.01,crash=1`)
or unchanged with spark-submit, with what `pubsubguard bundle --out out/bundle` writes and prints:

    pubsubguard bundle --out out/bundle
    spark-submit --master spark://HOST:7077 --archives out/bundle/pubsubguard-env.tar.gz#env \
        --conf spark.pyspark.python=./env/bin/python --conf spark.pyspark.driver.python=.venv/bin/python \
        --py-files out/bundle/pubsubguard.zip validation/job.py --plan plan.json --target gcp --report /shared/run1

`--py-files` puts the project's packages on every executor's PYTHONPATH, so the probe's task functions
(`pubsubguard.validation.probe.publisher.publish_partition` / `subscriber.subscribe_partition`) unpickle there; `--archives ...#env`
unpacks the executors' Python with google-cloud-pubsub, pyarrow, numpy and pandas
(`pubsubguard.validation.bundle`). Evidence is written by executors straight to `<report>/evidence`, so on a
cluster `--report` must be on storage all nodes share. `--from-evidence DIR` re-runs checks and
report on recorded evidence alone; DIR, `--report` with it, and `--plan` may be object store URIs
(gs://, s3a://, hdfs://: `pubsubguard.core.storage`). The submitter decides the master: the job's
`--master` applies only when none is configured (`pubsubguard.validation.session`).

This module is the entry point only; the stages of a run are the sub-packages `validation/__init__.py` maps.
Exit code: 0 all declared guarantees hold, 1 one is violated, 2 user error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__" and not __package__:  # `spark-submit ... validation/job.py`: the installed module runs
    import runpy

    runpy.run_module("pubsubguard.validation.job", run_name="__main__", alter_sys=True)
    sys.exit(0)  # not reached: the module's own `__main__` exits with the run's code

from pubsubguard.core import storage  # noqa: E402 - below the script's hand-over
from pubsubguard.core.errors import INTERRUPTED_EXIT, UserError, VerifyError, debugging, unexpected
from .config import RunConfig, add_arguments
from .driver import probe_target
from .evidence.store import evidence_location, probe_report, recheck_directory
from .evidence import locks
from .failures import unreadable_evidence
from .session import spark_session
from .target import declared_estate, resolve_target


def main(argv: list[str] | None = None, spark=None) -> int:
    """spark-submit's entry: the options (pubsubguard.validation.config), then the run."""
    parser = argparse.ArgumentParser(prog="validation/job.py", description=__doc__.split("\n")[0])
    add_arguments(parser)
    config = RunConfig.from_options(parser.parse_args(argv))
    try:
        return run(config, spark=spark)
    except UserError as err:
        print(f"verify: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("verify: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT
    except Exception as err:  # noqa: BLE001 - a bug: one line and exit 2 (1 would read as "violated")
        if debugging():
            raise
        print(unexpected("verify:", err), file=sys.stderr)
        return 2


def run(config: RunConfig, spark=None, plan: dict | None = None) -> int:
    """The run `config` asks for; its exit code. `plan`: the plan or state the caller already read for
    `config` (`pubsubguard verify`'s pre-flight), passed down instead of read again (None: read here)."""
    if config.from_evidence:
        return from_evidence(config, spark)
    if config.cleanup:
        return run_cleanup(config, plan)
    if storage.is_remote(config.report or ""):
        return probe_to_store(config, spark, plan)
    if config.conform_apart and not (config.conform and config.target == "emulator"):
        raise VerifyError("--conform-apart: only with --conform on --target emulator (a second emulator for the "
                          "scenarios that disturb the target)")
    if config.partial_evidence:
        raise VerifyError("--partial-evidence: only with --from-evidence (a probe run judges the evidence it sealed)")
    with locks.scope():  # the report directory, held by the probe from before it empties the evidence
        session, evidence_dir, report = probe_target(config, spark, plan=plan)
        return check_and_report(session, evidence_dir, report, keep=not config.no_checks_input)


def probe_to_store(config: RunConfig, spark=None, plan: dict | None = None) -> int:
    """A probe run whose `--report` is an object store URI (gs://, s3a://, hdfs://). The evidence is
    written there as the run goes, by the Spark tasks wherever they run (other hosts than the driver's
    included) and read back by the driver from there: `<URI>/evidence` is all they share (parts,
    run.json, the readiness and stop flags, notes, client logs). The driver's own files (conformance.json,
    spark.log, report.json, report.html) are made in a scratch directory and written to the URI at the
    end. The URI is tried for writing before anything is created on the target."""
    destination = config.report
    storage.require_writable(destination)
    evidence_at = storage.join(destination, "evidence")
    with tempfile.TemporaryDirectory(prefix="pubsubguard-run-") as scratch, locks.scope():
        session, evidence_dir, report = probe_target(config.but(report=Path(scratch) / "report"), spark,
                                                     evidence_at=evidence_at, plan=plan)
        code = check_and_report(session, evidence_dir, report, location=destination, keep=not config.no_checks_input)
        copied = storage.copy_tree(report, destination)
    print(f"report: {len(copied)} files written to {destination} (and the evidence, as the run went)", file=sys.stderr)
    return code


# ------------------------------------------------------------------------------- check + report
def from_evidence(config: RunConfig, spark=None) -> int:
    """A re-check: the evidence's checks and report, written to `--report` or, by default, to the evidence's own
    `recheck/` (`evidence.store.recheck_directory`): inside what it re-checks, never beside it, where another
    run's report may be. It holds its report directory, the evidence (where the checks keep their sorted input)
    and, when the evidence is a probe run's `<report>/evidence`, that run's report directory, which the probe
    holds while it writes the evidence; nothing else is written outside the evidence and `--report`."""
    evidence_dir = evidence_location(config.from_evidence)
    report = config.report or recheck_directory(evidence_dir)
    report = report if storage.is_remote(report) else Path(report).resolve()
    held = [("--report", report), ("--from-evidence", evidence_dir)]
    if probe_report(evidence_dir) is not None:
        held.append(("--from-evidence", probe_report(evidence_dir)))
    with locks.held(*held):
        session = spark or spark_session(config.master, log_dir=None if storage.is_remote(report) else report)
        return check_and_report(session, evidence_dir, report, keep=not config.no_checks_input,
                                partial=config.partial_evidence)


def check_and_report(spark, evidence_dir: Path | str, report: Path | str, terminal: bool = True,
                     shown: Path | str | None = None, location: Path | str | None = None, keep: bool = True,
                     partial: bool = False) -> int:
    """Judge a run's evidence (pubsubguard.validation.judgement) and write its report; the report's exit code.
    Evidence and report may be object store URIs (pubsubguard.core.storage; where evidence is read from: `evidence.store`). The report names
    its evidence as `shown` and itself as `location` (default: where they are read and written). `keep`: the
    checks keep their sorted input beside local evidence, or read one kept there (`--no-checks-input`: not).
    `terminal`: the summary on stdout (progress bars are the probe's: `--no-progress` leaves the summary);
    `partial`: judge what is intact of evidence that does not match its seal (`pubsubguard.validation.evidence.seal`)."""
    with tempfile.TemporaryDirectory(prefix="pubsubguard-staging-") as staging:
        local_report = Path(staging) / "report" if storage.is_remote(report) else report
        code = _check_and_report(spark, evidence_dir, local_report, terminal, shown=shown or evidence_dir,
                                 location=location or report, staging=Path(staging) / "evidence", keep=keep,
                                 partial=partial)
        if storage.is_remote(report):
            copied = storage.copy_tree(local_report, report)
            print(f"report: {len(copied)} files written to {report}", file=sys.stderr)
        return code


def _check_and_report(spark, evidence_dir: Path | str, report: Path, terminal: bool, shown: Path | str,
                      location: Path | str, staging: Path, keep: bool = True, partial: bool = False) -> int:
    from .judgement import judge
    from .report import document, render, terminal

    try:
        judged = judge(spark, evidence_dir, shown, staging, keep_sorted_input=keep, partial=partial)
    except Exception as err:  # noqa: BLE001 - a part Spark could not read: one line naming it
        unreadable = unreadable_evidence(err, evidence_dir)
        if unreadable is None or debugging():
            raise
        raise unreadable from None
    result = document.build(judged)
    render.write(result, report, location)
    if terminal:
        terminal.print_summary(result, location)
    else:
        print(f"report: {storage.join(location, 'report.json')} verdict={result['verdict']}", file=sys.stderr)
    return result["exit_code"]


# ------------------------------------------------------------------------------------ cleanup
def run_cleanup(config: RunConfig, plan: dict | None = None) -> int:
    from google.cloud import pubsub_v1

    from .probe.twins import cleanup

    _, estate = declared_estate(config, plan)
    resolve_target(config, estate)
    subscriber = pubsub_v1.SubscriberClient()
    topic_paths = [t.path for t in estate.topics.values()]
    topic_paths += [t.dead_letter_topic_path for t in estate.subscriptions.values() if t.dead_letter_topic_path]
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
