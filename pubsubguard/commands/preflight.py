"""What `verify` decides before any Spark session or client exists (and `run` before its first step): a
writable report directory, Java, credentials for `--target gcp`; and the plan or state read to learn the stack,
which the job is handed rather than reading it again; `verify(config)`, that pre-flight then the job, the work of
`verify` and of `run`'s verify step alike. Not a command: the commands that probe share it."""

from __future__ import annotations

from pathlib import Path

from pubsubguard.commands import options
from pubsubguard.core.declared import plan_from
from pubsubguard.core.errors import UserError
from pubsubguard.validation.probe.access import check_credentials
from pubsubguard.validation.config import RunConfig

JAVA_HINT = ("Spark needs Java 17: install it (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) "
             "and put `java` on PATH or set JAVA_HOME")


def preflight(config: RunConfig) -> tuple[RunConfig, dict | None]:
    """What verify needs, checked before any Spark session or client exists; UserError otherwise. The
    configuration with its default report directory, `<project>/out/<stack>/report` (from evidence: the
    evidence's own `recheck/`, decided by the job), and the plan or state read to learn that stack (`--plan FILE` or `--state` without `--stack`),
    which the job is handed rather than reading it again (None: the job reads or makes it)."""
    from pubsubguard.core.emulator import find_java

    if config.target == "gcp" and not config.from_evidence and not loopback_only(config.endpoint):
        check_credentials()  # with loopback stand-ins only, the probe decides once it knows the endpoints
    if config.cleanup:  # deletes probe twins: no Spark, no report
        return config, None
    plan = None
    if not config.from_evidence and config.plan is None and config.state is None \
            and (config.stack is not None or config.nemesis is not None):
        stack_names(config.nemesis, config.root, config.stack or "dev")  # before a plan is made or Java starts
    if config.report is None and not config.from_evidence:
        if config.stack is None and (config.plan is not None or config.state is not None):
            plan = plan_from(config.plan, None, config.root, config.state)  # read once, handed to the job
        stack = config.stack or (plan["stack"] if plan is not None else "dev")
        config = config.but(report=Path(config.root or ".") / "out" / stack / "report")
        options.require_writable(config.report, "--report", directory=True)
    if find_java() is None:
        raise UserError(f"Java was not found (no java on PATH, JAVA_HOME unset or without bin/java); {JAVA_HINT}")
    return config, plan


def verify(config: RunConfig) -> int:
    """`verify` on a run's configuration: the pre-flight, then the job (the command's own work, and `run`'s verify
    step on the configuration it built)."""
    from pubsubguard.validation.job import run as run_job

    config, plan = preflight(config)
    return run_job(config, plan=plan)


def stack_names(schedule, root, stack: str) -> None:
    """Before anything starts: the stack file is read (a stack that is not there: one line, in run's own name, as
    `check -s` answers), and a `--nemesis` schedule's names are checked against the estate the stack's config
    declares (`pubsubguard:estate`, the names this project's program gives, the dead-letter topics and drains it
    derives included), without running the program. A stack of another program has no such config: its names are
    checked once its plan is made (`run`: right after its plan step; `verify`: before the
    Spark session)."""
    from pubsubguard.core.plan import read_inputs

    inputs = read_inputs(root, stack)
    names = _declared_names(inputs.config.values.get("pubsubguard:estate"))
    if schedule is not None and names is not None:
        schedule.check_names(*names)


def _declared_names(estate_config) -> tuple[set[str], set[str]] | None:
    """(subscriptions, topics) an estate config declares, with the dead-letter topics and drains the program
    derives; None without one, or with one the plan step will refuse (it says why, naming the field)."""
    from pubsubguard.infra.estate import EstateError, auto_dead_letter_names, load_spec

    if estate_config is None:
        return None
    try:
        spec = load_spec(estate_config, "the stack's config")
    except EstateError:
        return None
    topics, subscriptions = {t.name for t in spec.topics}, set()
    for _, sub in spec.subscriptions():
        subscriptions.add(sub.name)
        if sub.dead_letter and not sub.dead_letter.topic:
            derived_topic, drain = auto_dead_letter_names(sub.name)
            topics.add(derived_topic)
            subscriptions.add(drain)
    return subscriptions, topics


def loopback_only(mapping: dict[str, str]) -> bool:
    """`--endpoint` maps the global endpoint and every other one it names to loopback stand-ins."""
    from pubsubguard.validation.wire.endpoints import GLOBAL, endpoint_of, is_loopback

    return endpoint_of(GLOBAL) in mapping and all(is_loopback(address) for address in mapping.values())
