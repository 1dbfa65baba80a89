"""The one place a Spark session is made."""

from __future__ import annotations

import os
import sys


def spark_session(master: str | None = None, app_name: str = "pubsubguard-verify", shuffle_partitions: int = 8):
    from pyspark.sql import SparkSession

    # Executors must run the same interpreter as the driver (the project's virtualenv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # rich draws the progress bars
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("PUBSUBGUARD_DRIVER_MEMORY", "2g"))
        # Arrow batches to Python are bounded by rows (maxRecordsPerBatch, 10,000: a few hundred KiB
        # of the checks' narrow rows). A byte bound other than INT_MAX makes Spark measure the batch
        # after every row (ArrowWriter.sizeInBytes), ~15% of the checks' pass in a JFR profile.
        .config("spark.sql.execution.arrow.maxBytesPerBatch", str(2**31 - 1))
    )
    if master:
        builder = builder.master(master)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
