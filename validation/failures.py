"""Spark's failures: why a Spark job of the probe or the checks failed, in one line (`spark_cause`; a part of the
evidence Spark could not read is named as damaged evidence: `unreadable_evidence`); and keeping Spark's own death
notices of an injected crash off the terminal (the full text goes to `<evidence>/failure-<task>.txt`). The client
library's own logs are `client_logs`."""

from __future__ import annotations

import re
from pathlib import Path

from pubsubguard.core import storage
from pubsubguard.core.errors import UserError

from .evidence.records import EvidenceError

# Spark's own log lines for a subscriber task's death (an ERROR and a Java stack trace per crash); the
# failure's full text goes to <evidence>/failure-<task>.txt and the report instead.
CRASH_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager",
                 "org.apache.spark.api.python.PythonRunner", "org.apache.spark.api.python.PythonGatewayServer")


def spark_cause(text: str) -> str:
    """The line of a Spark job failure that says why (not py4j's "An error occurred while calling ...")."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "Python worker exited unexpectedly" in line:
            return "Python worker exited unexpectedly (crashed)"
    python_errors = [line for line in lines if re.match(r"^([a-z_][\w]*\.)+[A-Z]\w*: ", line)
                     and not line.startswith(("org.", "java.", "py4j.", "scala."))]
    if python_errors:
        return python_errors[-1][:300]
    for line in lines:
        if "Exception" in line and "An error occurred while calling" not in line:
            return line[:300]
    return (lines[0] if lines else "no message")[:300]


_PARQUET_PATH = re.compile(r"(?:file:)?(?://)?(/[^\s,;'\"\]\[{}]+?\.parquet)")


def unreadable_evidence(err: BaseException, evidence_dir) -> EvidenceError | None:
    """A Spark job that failed reading a Parquet part of the evidence (a damaged part that opened, e.g.
    pages overwritten behind an intact footer) as one line naming the file; None for any other failure."""
    if isinstance(err, UserError):  # already one line
        return None
    text = str(err)
    found = _PARQUET_PATH.search(text)
    if found is None or "parquet" not in type(err).__name__.lower() + text.lower():
        return None
    path = found.group(1)
    root = str(Path(str(evidence_dir)).resolve()) if not storage.is_remote(evidence_dir) else str(evidence_dir)
    where = path if not path.startswith(root) else storage.join(evidence_dir, path[len(root):].lstrip("/"))
    causes = [line.strip()[len("Caused by: "):] for line in text.splitlines() if line.strip().startswith("Caused by: ")]
    cause = (causes[-1] if causes else spark_cause(text))[:300]
    return EvidenceError(f"{where}: damaged: Spark could not read it as Parquet ({cause})")


_saved_levels: dict[str, object] = {}


def quiet_crash_logs(sc, quiet: bool) -> None:
    """Silence (or restore) Spark's ERROR lines for a task's death while crashes are injected."""
    try:
        jvm = sc._jvm
        log_manager = jvm.org.apache.logging.log4j.LogManager
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in CRASH_LOGGERS:
            if quiet:
                _saved_levels[name] = log_manager.getLogger(name).getLevel()
                configurator.setLevel(name, off)
            elif name in _saved_levels:
                configurator.setLevel(name, _saved_levels.pop(name))
    except Exception:  # noqa: BLE001 - a cluster without log4j 2 keeps its logs; nothing else depends on it
        pass
