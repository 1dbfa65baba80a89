"""The Pub/Sub client library's own logs, as the probe's tasks keep them (`<evidence>/client-log-<task>.txt`,
written by `probe.client_log`): what the report observes of them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pubsubguard.core import storage

from .checks.wording import counted
from .probe.clients import CLIENT_LOG_PREFIX


def client_log_summary(evidence_dir: Path | str) -> list[str]:
    """One observation per task whose client library logged warnings: the count and the commonest."""
    out = []
    for name in storage.names(evidence_dir, CLIENT_LOG_PREFIX):
        path = storage.join(evidence_dir, name)
        records = Counter(line.split(" for message ordering key:")[0][:160] for line in storage.read_text(path).splitlines()
                          if line.startswith(("WARNING ", "ERROR ", "CRITICAL ")))
        if records:
            common = "; ".join(f"{text!r} x{n}" for text, n in records.most_common(3))
            task = name[len(CLIENT_LOG_PREFIX):].removesuffix(".txt")
            out.append(f"the Pub/Sub client library in {task} logged "
                       f"{counted(sum(records.values()), 'warning/error', 'warnings/errors')} (commonest: {common}); "
                       f"full text: {path}")
    return out
