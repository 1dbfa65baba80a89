"""The streaming checks of `pubsubguard watch`: one Spark Structured Streaming query over the probe's evidence
as the probe writes it.

    <evidence>/publishes/part-*.parquet   the publisher task's rows (evidence.records.PUBLISH_SCHEMA)
    <evidence>/deliveries/part-*.parquet  the subscriber tasks' rows (DELIVERY_SCHEMA)
    <evidence>/clock/part-*.parquet       the driver's clock: one row a window, so the watermark moves on
                                          when nothing else is written (a clean stop decides what it published);
                                          each bucket gets each row, and judges at the watermark it gives

Both logs become the batch checks' packed rows (`checks.run._unified`), keyed by (subscription, key) hashes,
with an event-time watermark (`withWatermark`) that trails the newest row by the longest a row can take to be
written (`watermark_delay_s`); the keys are grouped in `BUCKETS` buckets, and `applyInPandasWithState` hands
each bucket's new rows and its state (its keys' states) to `judge.judge_bucket` (event-time timeouts: a bucket is
called again when the watermark passes the next horizon of one of its keys);
`foreachBatch` hands each window's output to the sink. Spark's checkpoint holds the sources' offsets, the
state store and the committed batches: a restart resumes where the last committed window ended.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

from pyspark.sql import functions as F, types as T
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.state import GroupStateTimeout

from ..checks import run as batch
from ..evidence import records
from . import judge

CLOCK_SCHEMA = "t long"
SHUFFLE_PARTITIONS = 2  # the state store's partitions: fixed in the checkpoint at the first window
# The keys' buckets (`pmod(h, BUCKETS)`), each one call of the judge per window and one state: fixed in the
# checkpoint too (outdir.FORMAT). A call per (subscription, key) cost each key a Python call and the kernel's fixed
# cost (issue 65: the streaming checks 2.7x slower per row than the batch checks); a bucket's keys share them.
# Spark's hash of a bucket decides its partition: buckets 0..5 fall 3 and 3 in the 2 partitions, where 8 fall 3 and
# 5, 16 fall 7 and 9 (the busier core sets the pace). A bucket's call holds its new rows whole: a sixth of a backlog.
BUCKETS = 6
# What the checkpoint keeps of past windows. A restart resumes from the last committed window only, so the 100
# windows Spark keeps by default (offsets, commits and the state store's delta files: 12.3 MiB of a 2-hour watch's
# 16 MiB at window 225) buy nothing; 10 are kept. The file sources' logs are cleaned a minute after each compaction
# (Spark's default is 10 minutes, for readers of the log other than the query: a watch has none). What stays is each
# source's compacted log, which lists every file the source ever read -- Spark has no retention for a file source --
# and so grows with the windows (about 0.8 KB a window per source, docs/watch.md).
# No window without new rows: every window the driver writes a clock row, which reaches every bucket and moves its
# call's watermark (judge.JudgeConfig.delay_ms), so the no-data window Spark runs after one that moved its watermark
# (to time keys out) would judge nothing a clock row does not, and cost a window (0.3-0.5 s for the 1M-row backlog
# of benchmarks/bench_watch.py, and a checkpoint's offsets, commit and state files each time).
QUERY_CONF = {
    "spark.sql.streaming.minBatchesToRetain": "10",
    "spark.sql.streaming.fileSource.log.cleanupDelay": "60s",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
}


def watermark_delay_s(hold_s: float, flush_s: float, window_s: float) -> float:
    """How late a row may reach the query and still be judged: a delivery row is written once the subscriber
    acted on it (at once, or when a delivery the client faults hold, `hold_s`, was let go), then flushed; the
    next window reads it. A row later than that is dropped by the watermark, and counted (the window's line)."""
    return hold_s + 2 * flush_s + window_s + 5.0


def evidence_streams(spark, evidence_dir: Path):
    """The publish, delivery and clock streams over the evidence directory."""
    def stream(name: str, schema):
        (evidence_dir / name).mkdir(parents=True, exist_ok=True)
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 10_000).parquet(str(evidence_dir / name))

    return (stream("publishes", from_arrow_schema(records.PUBLISH_SCHEMA)),
            stream("deliveries", from_arrow_schema(records.DELIVERY_SCHEMA)),
            stream("clock", CLOCK_SCHEMA))


def judged(spark, evidence_dir: Path, subscriptions: list, config: judge.JudgeConfig, delay_s: float):
    """The query's frame before its sink: the judge's output rows (judge.OUTPUT)."""
    config = replace(config, delay_ms=int(delay_s * 1000))
    rows = bucketed(*evidence_streams(spark, evidence_dir), subscriptions)
    rows = rows.withColumn("evt", F.expr("timestamp_micros(t)")).withWatermark("evt", f"{int(delay_s * 1000)} milliseconds")
    return rows.groupBy("bucket").applyInPandasWithState(
        partial(judge.judge_bucket, config), T._parse_datatype_string(judge.OUTPUT),
        T._parse_datatype_string(judge.STATE), "append", GroupStateTimeout.EventTimeTimeout)


def bucketed(publishes, deliveries, clock, subscriptions: list):
    """The rows the judge is handed (streams, or batch frames for a profile), with their key's `bucket`."""
    rows = batch._unified(publishes, deliveries, subscriptions, extra=("key", "CAST(sub_id AS INT) AS sub_id"))
    # a clock row goes to every bucket: each call knows the driver's time (judge.JudgeConfig.delay_ms)
    ticks = clock.selectExpr("CAST(NULL AS STRING) AS key", f"{judge.CLOCK_SUB} AS sub_id", "0L AS h", "0L AS meta",
                             "CAST(NULL AS BIGINT) AS seq", "t", "CAST(NULL AS BIGINT) AS ack_t",
                             "CAST(NULL AS BIGINT) AS att", f"explode(sequence(0, {BUCKETS - 1})) AS bucket")
    rows = rows.withColumn("bucket", F.expr(f"CAST(pmod(h, {BUCKETS}) AS INT)")).unionByName(ticks)
    # the numbers a row may lack as judge.NULL: a null among a column's values would reach pandas as float64, which
    # keeps 53 bits of `att`'s 63 (a delivery's attempt and action are its low bits)
    rows = rows.withColumns({name: F.coalesce(F.col(name), F.lit(judge.NULL).cast("long")) for name in ("seq", "ack_t", "att")})
    return rows  # a key's second hash is meta's high half: the judge takes it from there


def configure(spark) -> None:
    """The session's settings the query is made with (its state partitions, QUERY_CONF)."""
    spark.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
    for key, value in QUERY_CONF.items():
        spark.conf.set(key, value)


def start(spark, evidence_dir: Path, checkpoint: Path, subscriptions: list, config: judge.JudgeConfig,
          delay_s: float, window_s: float, sink, name: str = "pubsubguard-watch"):
    """The running query: every `window_s` a micro-batch (a window) judged and handed to `sink(frame, id)`."""
    configure(spark)
    frame = judged(spark, evidence_dir, subscriptions, config, delay_s)
    return (frame.writeStream.queryName(name).foreachBatch(sink).outputMode("append")
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime=f"{window_s:g} seconds").start())
