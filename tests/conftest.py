"""Shared fixtures: one Spark session and one Pub/Sub emulator per test session (per worker under `pytest -n`)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# tests/policies run in the policy pack's own virtualenv (pulumi-policy pins protobuf 5):
# `policies/venv/bin/python -m pytest tests/policies`. The project's venv does not collect them.
collect_ignore = [] if importlib.util.find_spec("pulumi_policy") else ["policies"]

# The project's tests import pubsubguard as it is installed, under its one name: `python -m pytest` puts
# the checkout's root first on sys.path, where `validation`, `infra` and `policies` would import as
# top-level names no installation has (a `PackageLoader("validation", ...)` passed here and failed on a
# cluster). pytest adds tests/ itself (this file's folder: `support`) and each test module's own folder.
if collect_ignore:  # the project's own virtualenv (the pack's tests run from the pack's)
    _root = Path(__file__).resolve().parent.parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _root]

# Programs under test run as in an activated virtualenv: the tests' own (as `pulumi preview` in a shell
# where `source .venv/bin/activate` ran). Tests of how the interpreter is found set their own.
os.environ.setdefault("VIRTUAL_ENV", sys.prefix)


# --- pytest -n N (pytest-xdist, scripts/test.sh) -----------------------------------------------------
# Each worker is a pytest process of its own, with its own session fixtures below (a Spark session, an
# emulator on a free port, each under the worker's own temporary directory). Caches shared between workers
# are built under a lock (tests/support/nodejs_projects.py: ensure).
#
# `--dist loadgroup` here: a test goes to whichever worker is free, but the tests of a group run in one
# worker, one after another, in file order. A group: the tests of a module that share a module-scoped
# fixture of that module, as in one process: it is set up once (a Spark cluster and the bundle it runs, the
# conformance run, three rehearsals), and a test may rely on what an earlier one left in it
# (cli/test_wheel.py: the pack's virtualenv made by one check, reused by the next); but those in SPREAD. And
# the tests marked `xdist_group(NAME)` (tests that must not run beside each other). The workers collect the
# tests and write their groups to a file the controller's scheduler reads (GroupScheduling):
# pytest-xdist's own loadgroup tags node ids with the group, which pytest 9.2's structured node ids no
# longer take (pytest-xdist issue 1386): it would run marked tests anywhere.
GROUPS_INPUT = "pubsubguard_test_groups"  # the file, in each worker's workerinput
# Module-scoped fixtures whose tests may go to any worker (each worker sets them up for itself): cheap,
# and no test relies on another having run first; a group would be a long chain of slow tests.
SPREAD = {
    ("tests/judge/check/test_corpus.py", "user_cache"): "a path; each wheel test drops the line saying the pack's virtualenv is made",
    ("tests/judge/program/test_hostile_programs.py", "installed_user_cache"): "a path; each wheel test makes the pack's "
                                                                              "virtualenv (`pack path`) before it times the check",
    ("tests/judge/program/test_hostile_typescript.py", "installed_user_cache"): "the same, for the TypeScript programs",
    ("tests/judge/program/test_team_environments.py", "library"): "two files; the environments are cached by their contents",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): under pytest -n N --dist loadgroup, run in one worker "
                                       "with the other tests of that group")


def _group(item) -> str | None:
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
    if names:
        return "_".join(names)  # as pytest-xdist joins several
    module = item.getparent(pytest.Module)
    info = getattr(item, "_fixtureinfo", None)
    if module is not None and info is not None and any(
            d.scope == "module" and d.baseid == module.nodeid and (module.nodeid, name) not in SPREAD
            for name in info.names_closure for d in info.name2fixturedefs.get(name, ())):
        return module.nodeid
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist tells the controller the collection is complete
def pytest_collection_finish(session):
    target = getattr(session.config, "workerinput", {}).get(GROUPS_INPUT)
    if target:  # a worker under --dist loadgroup; each collects the same tests, so each writes the same file
        groups = {item.nodeid: group for item in session.items if (group := _group(item)) is not None}
        staged = Path(f"{target}.{session.config.workerinput['workerid']}")
        staged.write_text(json.dumps(groups))
        staged.replace(target)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's, in the controller
def pytest_configure_node(node):
    if node.config.getoption("dist") == "loadgroup":
        node.workerinput[GROUPS_INPUT] = str(_groups_file(node.config))


def _groups_file(config) -> Path:
    if "file" not in _SCHEDULING:
        folder = Path(tempfile.mkdtemp(prefix="pubsubguard-test-groups-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        _SCHEDULING["file"] = folder / "groups.json"
    return _SCHEDULING["file"]


_SCHEDULING: dict = {}  # the controller's: the groups' file, then the groups read from it


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's, in the controller
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):
        """Work units: a group's tests, or one test. Larger units go first (pytest-xdist's default)."""

        def _split_scope(self, nodeid: str) -> str:
            if "groups" not in _SCHEDULING:  # first called once every worker has collected
                path = _groups_file(config)  # (none: no worker collected, the run stops anyway)
                _SCHEDULING["groups"] = json.loads(path.read_text()) if path.exists() else {}
            group = _SCHEDULING["groups"].get(nodeid)
            return f"group {group}" if group is not None else super()._split_scope(nodeid)

    return GroupScheduling(config, log)


def _histories_counts() -> dict | None:
    """What tests/prove/checks/test_histories.py counted in this process (None: not run here)."""
    histories = sys.modules.get("test_histories")
    return histories.COUNTS if histories is not None else None


def pytest_sessionfinish(session):
    """A worker (pytest-xdist) hands its counts to the controller, which reports them (pytest_testnodedown)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and _histories_counts() is not None:
        workeroutput["histories_counts"] = _histories_counts()


_WORKERS = {"counts": [], "lost": []}  # the controller's: each worker's counts, and workers that died


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_testnodedown(node, error):
    counts = getattr(node, "workeroutput", {}).get("histories_counts")
    if counts is not None:
        _WORKERS["counts"].append(counts)
    if error:
        _WORKERS["lost"].append(node.gateway.id)


def _added(total: dict, counts: dict) -> dict:
    for key, value in counts.items():
        if isinstance(value, dict):
            _added(total.setdefault(key, {}), value)
        else:
            total[key] = total.get(key, 0) + value
    return total


def pytest_terminal_summary(terminalreporter):
    """How many generated histories and mutations the property tests checked (a report, not a test): this
    process's, or under pytest-xdist the sum of the workers'."""
    counts = _histories_counts()
    if _WORKERS["counts"]:
        counts = {}
        for each in _WORKERS["counts"]:
            _added(counts, each)
    if counts and counts["histories"]:
        terminalreporter.write_sep("-", "property tests")
        terminalreporter.write_line(f"checked {counts}")
    if _WORKERS["lost"]:  # their counts are not in the sum
        terminalreporter.write_line(f"property tests: no counts from {', '.join(_WORKERS['lost'])} (the worker died)")


def pytest_sessionstart(session):
    """Spark's JVM is launched first, in each process that runs tests, before any test opens a gRPC channel.
    PySpark forks spark-submit with a `preexec_fn`, and a fork after gRPC has started its threads can lose
    the child before it execs. Under `pytest -n 2` that was a whole worker's `spark` fixture failing
    ("Java gateway process exited before sending its port number", after gRPC's "epoll_wait error: Bad
    file descriptor"). The `spark` fixture then finds the JVM running, as the CLI's session does
    (`validation/session.py` launch)."""
    config = session.config
    in_tests = hasattr(config, "workerinput") or config.getoption("dist", default="no") == "no"  # not xdist's controller
    if collect_ignore and in_tests and importlib.util.find_spec("pyspark") is not None:
        from pubsubguard.validation.session import launch

        launch(*SPARK)


SPARK = ("local[2]", "pubsubguard-tests", 4)  # master, app name, shuffle partitions: the tests' session


@pytest.fixture(scope="session")
def spark():
    from pubsubguard.validation.session import spark_session

    session = spark_session(*SPARK)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def emulator(tmp_path_factory):
    """A real Pub/Sub emulator on a free loopback port; PUBSUB_EMULATOR_HOST points at it."""
    from pubsubguard.core.emulator import Emulator

    emu = Emulator.start(project="pubsubguard-dev", state_dir=tmp_path_factory.mktemp("emulator"))
    saved = os.environ.get("PUBSUB_EMULATOR_HOST")
    os.environ["PUBSUB_EMULATOR_HOST"] = emu.host
    try:
        yield emu
    finally:
        emu.stop()
        if saved is None:
            os.environ.pop("PUBSUB_EMULATOR_HOST", None)
        else:
            os.environ["PUBSUB_EMULATOR_HOST"] = saved


@pytest.fixture(scope="module")
def gcs():
    """A GCS API server on a free loopback port (`gcp-storage-emulator`), in memory, with one bucket,
    `pubsubguard-test`; STORAGE_EMULATOR_HOST points at it. Yields its URL."""
    import socket

    from gcp_storage_emulator.server import create_server

    from pubsubguard.core import storage

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="pubsubguard-test")
    server.start()
    saved = os.environ.get(storage.EMULATOR_ENV)
    os.environ[storage.EMULATOR_ENV] = f"http://127.0.0.1:{port}"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        if saved is None:
            os.environ.pop(storage.EMULATOR_ENV, None)
        else:
            os.environ[storage.EMULATOR_ENV] = saved
