"""The client library's own log lines, kept per subscriber task: its warnings (rejected lease modacks, for
instance) go to `<evidence>/client-log-<task>.txt`, not the terminal, and each delivery it drops on receipt without a
callback is one WARNING line there. The report reads the files back (`validation.client_logs`)."""

from __future__ import annotations

import logging
from pathlib import Path

from pubsubguard.core import storage


# The client library's logger for deliveries it drops on receipt (google-cloud-pubsub, streaming_pull_manager
# `_EXPIRY_LOGGER`): on an exactly-once subscription a received message whose receipt modack the target answers
# INVALID_ACK_ID is dropped without a callback, said only at DEBUG ("ack ids %s were dropped as they have already
# expired."), so the probe writes no row for it.
EXPIRY_LOGGER = "expiry"
DROPPED_ON_RECEIPT = ("a received delivery dropped by the client library without a callback: the target answered its "
                      "receipt modack INVALID_ACK_ID (exactly-once), so it has no evidence row")


class _DroppedOnReceipt(logging.Handler):
    """On EXPIRY_LOGGER: one WARNING line per dropped delivery in the task's client log (the report counts them)."""

    def __init__(self, sink: logging.Handler):
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        ack_ids = args[0] if args else None
        count = len(ack_ids) if isinstance(ack_ids, (set, frozenset, list, tuple)) else 1
        for _ in range(count):
            self.sink.handle(logging.LogRecord("google.cloud.pubsub_v1.subscriber", logging.WARNING, record.pathname,
                                               record.lineno, DROPPED_ON_RECEIPT, None, None))


class ClientLog:
    """The client library's warnings (e.g. rejected lease modacks) go to `<evidence>/client-log-<task>.txt`,
    not the terminal; the driver counts them in the report. Logged to a local file (the task's working
    directory on a remote store) and, for a remote store, written there when the task ends or crashes."""

    def __init__(self, location: str):
        import tempfile

        self.location = location
        self.local = Path(location) if not storage.is_remote(location) else Path(
            tempfile.mkstemp(prefix="pubsubguard-client-log-", suffix=".txt")[1])
        self.handler = logging.FileHandler(self.local)
        self.handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.handler.setLevel(logging.WARNING)
        for name in ("google.cloud.pubsub_v1", "google.api_core"):
            logger = logging.getLogger(name)
            logger.addHandler(self.handler)
            logger.propagate = False
        self.dropped = _DroppedOnReceipt(self.handler)
        expiry = logging.getLogger(EXPIRY_LOGGER)
        self.expiry_was = (expiry.level, expiry.propagate)
        expiry.setLevel(logging.DEBUG)  # its DEBUG records reach this handler only, not the root's
        expiry.propagate = False
        expiry.addHandler(self.dropped)

    def close(self) -> None:
        import sys

        for name in ("google.cloud.pubsub_v1", "google.api_core"):
            logging.getLogger(name).removeHandler(self.handler)  # a reused Python worker runs other tasks
        expiry = logging.getLogger(EXPIRY_LOGGER)
        expiry.removeHandler(self.dropped)
        expiry.setLevel(self.expiry_was[0])  # setLevel: the loggers' level caches are cleared
        expiry.propagate = self.expiry_was[1]
        self.handler.close()
        if storage.is_remote(self.location):
            try:
                storage.write_bytes(self.location, self.local.read_bytes())
            except OSError as err:  # the executor's log keeps it; the parts are what the checks need
                print(f"pubsubguard: could not write the client log to {self.location}: {err}", file=sys.stderr)
            self.local.unlink(missing_ok=True)
