"""How late Spark's status tracker shows a job's tasks as running (why the probe's driver waits for the
publisher's `_publishing-<task>` marker instead: validation/driver.py `_wait_for_publisher_slot`).

    .venv/bin/python benchmarks/spark_status_lag.py              # 4 trials in one local[3] session
    .venv/bin/python benchmarks/spark_status_lag.py --trials 8

Each trial submits a job of 2 tasks that sleep 15 s (they start at once: the slots are free) and polls
`sc.statusTracker()` every 0.1 s until a stage of the job has an active or completed task; it prints how long
after the submission that was. The tracker reads a store the listener bus updates live at most every 100 ms per
stage, else at the next flush (an executor heartbeat, 10 s by default), so the figure ranges up to about 10 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

SLEEP_S = 15.0


def seen_after(sc, group: str) -> float | None:
    """Submit the sleeping job under `group`; seconds until the tracker shows one of its tasks (None: not seen)."""
    tracker = sc.statusTracker()

    def job() -> None:
        sc.setJobGroup(group, "spark_status_lag")
        sc.parallelize([1, 2], 2).mapPartitions(lambda rows: (time.sleep(SLEEP_S), [1])[1]).collect()

    worker = threading.Thread(target=job)
    started = time.monotonic()
    worker.start()
    seen = None
    while seen is None and time.monotonic() - started < SLEEP_S - 1:
        for job_id in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job_id)
            for stage_id in info.stageIds if info else ():
                stage = tracker.getStageInfo(stage_id)
                if stage and (stage.numActiveTasks > 0 or stage.numCompletedTasks > 0):
                    seen = time.monotonic() - started
        time.sleep(0.1)
    worker.join()
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[3]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print(f"load average {os.getloadavg()[0]:.2f}")
    for trial in range(args.trials):
        seen = seen_after(spark.sparkContext, f"lag-{trial}")
        print(f"trial {trial}: tasks shown running {'never' if seen is None else f'{seen:.1f} s'} after the job was submitted",
              flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
