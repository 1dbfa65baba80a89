"""The checks' warm-up during the drain: the checks and the report run once on the evidence flushed so far,
and thrown away, so that the real check after the drain finds the JVM's queries compiled and the plots'
code loaded (`WarmUp`). Not `pubsubguard.core.rehearsal`, the rehearsal of a plan's autonames on the
emulator."""

from __future__ import annotations

import threading
from pathlib import Path

from pubsubguard.core import storage

JOB_GROUP = "pubsubguard-warm-up"  # + the run id: the Spark job group of a run's warm-up


class WarmUp:
    """The checks and the report, run once on the evidence flushed so far while the drain waits out
    deadlines, and thrown away: the JVM compiles the checks' queries and the plots' code is loaded then,
    so the real run after the drain takes a third of the time (measured: 18 s cold, 7 s warm on the main
    job's evidence). Its Spark jobs run in a job group of their own, on a task slot the subscriber tasks
    leave free (none free: no warm-up), and are cancelled when the drain ends; its result is never
    shown or kept."""

    def __init__(self, spark, evidence_dir: Path | str, run_id: str):
        self.spark, self.evidence_dir = spark, evidence_dir
        self.group = f"{JOB_GROUP}-{run_id}"
        self.thread: threading.Thread | None = None
        self._possible: bool | None = None

    def possible(self) -> bool:
        """Spark reads the evidence where it is (a URI its Hadoop has no connector for is copied, or read
        through the driver, for the real checks: warming up would move it twice)."""
        if self._possible is None:
            self._possible = storage.hadoop_can_read(self.spark, self.evidence_dir)
        return self._possible

    def start(self) -> None:
        def warm_up() -> None:
            from .judgement import judge
            from .report import document
            from .report import render

            self.spark.sparkContext.setJobGroup(self.group, "pubsubguard: checks warmed up during the drain")
            try:
                render.render_html(document.build(judge(self.spark, self.evidence_dir, keep_sorted_input=False)))
            except Exception:  # noqa: BLE001 - a warm-up: cancelled, or it fails again (and is reported) for real
                pass

        self.thread = threading.Thread(target=warm_up, name="warm-up", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.thread is None:
            return
        self.spark.sparkContext.cancelJobGroup(self.group)
        self.thread.join(timeout=60)  # matplotlib's pyplot is not thread-safe: the real report waits for it
