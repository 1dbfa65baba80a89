"""Shared fixtures: one Spark session and one Pub/Sub emulator per test session."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

# tests/policies run in the policy pack's own virtualenv (pulumi-policy pins protobuf 5):
# `policies/venv/bin/python -m pytest tests/policies`. The project's venv does not collect them.
collect_ignore = [] if importlib.util.find_spec("pulumi_policy") else ["policies"]

# The project's tests import pubsubguard as it is installed, under its one name: `python -m pytest` puts
# the checkout's root first on sys.path, where `validation`, `infra` and `policies` would import as
# top-level names no installation has (a `PackageLoader("validation", ...)` passed here and failed on a
# cluster). Test modules and `histories` come from tests/, which pytest adds itself.
if collect_ignore:  # the project's own virtualenv (the pack's tests run from the pack's)
    _root = Path(__file__).resolve().parent.parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _root]

# Programs under test run as in an activated virtualenv: the tests' own (as `pulumi preview` in a shell
# where `source .venv/bin/activate` ran). Tests of how the interpreter is found set their own.
os.environ.setdefault("VIRTUAL_ENV", sys.prefix)


def pytest_terminal_summary(terminalreporter):
    """How many generated histories and mutations the property tests checked (a report, not a test)."""
    import sys

    histories = sys.modules.get("test_histories")
    if histories is not None and histories.COUNTS["histories"]:
        terminalreporter.write_sep("-", "property tests")
        terminalreporter.write_line(f"checked {histories.COUNTS}")


@pytest.fixture(scope="session")
def spark():
    from pubsubguard.validation.session import spark_session

    session = spark_session("local[2]", app_name="pubsubguard-tests", shuffle_partitions=4)
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
