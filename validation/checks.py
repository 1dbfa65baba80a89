"""Judge the evidence: Spark checks of a delivery log against what each subscription declares.

`run_checks(publishes, deliveries, subscriptions)` returns `CheckResults(findings, stats)`; the
verification job and the report call exactly that, and `guarantee_status` turns findings into
holds / violated / not_tested per guarantee. Definitions, with examples, are in `docs/checks.md`;
the short form:

Identity. A message is (subscription, key, seq) among the rows of this run. A delivery whose
`probe_run` is not the run's id, or which carries no key/seq, is *foreign*. Publish rows count for
every declared subscription of their topic.

Settled. A message is settled at the earliest of: the `ack_time_us` of a delivery whose ack (or
late ack) returned `success`; if it was dead-lettered, the end of its last delivery attempt (the
earliest moment the service could have forwarded it; never later than the dead-letter row).

Completeness (every subscription):
  lost        published with status ok, never delivered and never dead-lettered.
  unexpected  one finding per delivery (or dead-letter) row that is foreign or whose (key, seq)
              this run never published.

Exactly-once (only when declared). A delivery d is *outstanding* from its receive time until
`end(d)`: its ack time if acked (action "ack") with success, its nack time if nacked with success,
else receive + ack deadline (expire, crash, late ack, failed acks); capped at receive + deadline.
  duplicate_after_ack          d2 received more than skew after a successful in-deadline ack
                               ("ack", success) of the same message.
  duplicate_while_outstanding  d2 received more than skew before end(d1) of an earlier d1.
  stale_ack_accepted           an ack that returned success although its ack id had expired
                               (action "late_ack") or was superseded (a later delivery of the
                               message was received more than skew before the ack was sent).
  A late ack that was accepted is reported once, as stale_ack_accepted; a superseded ack is
  reported with the duplicate_while_outstanding of the delivery that superseded it.

Ordering (only when declared). Per (subscription, key), the deliveries of messages this run
published, in receive order (ties by seq), form *runs*: a delivery continues the run when its seq
is the next published seq after the previous delivery's seq (failed publishes leave no gap);
otherwise it *starts* a run. A run start s at receive time t is legal iff every published seq < s
was settled by t + skew (s <= the lowest unsettled seq) -- this admits the documented rewind: a
redelivery of n followed by n+1, n+2, ... again. `out_of_order` names its form in `detail`:
  skip                   a forward start past a seq that was not settled;
  regression             a backward (or same-seq) start above a seq that was not settled;
  rewind_without_replay  a forward start s right after a delivery p that was below the highest
                         seq delivered so far (p < high water): a rewind that stopped replaying
                         before it caught up, although the skipped seqs were settled.
  Example (seqs in receive order, all acked unless said): 0 1 2 | 1 2 3 legal (rewind to 1 after
  1's ack was lost); 0 1 3 with 2 unacked: skip at 3; 0 1 2 then 2 again while 1 is unsettled:
  regression; 0 1 2 3 | 1 3: rewind_without_replay at 3.
  With a dead-letter policy, order is best effort for dead-lettered messages: out_of_order on a
  key with a dead-lettered message of such a subscription is `advisory` and says so.

Dead-lettering (only with a dead-letter policy of N attempts). Attempts seen = the larger of the
number of deliveries and the highest `delivery_attempt` (and, for `dead_letter_early`, the
forwarded `CloudPubSubDeadLetterSourceDeliveryCount`).
  dead_letter_missing         never acked with success, >= N attempts, no dead-letter row.
  dead_letter_after_ack       dead-lettered although its last delivery was acked with success.
  dead_letter_early           (advisory) dead-lettered after fewer than N attempts.
  delivery_attempts_exceeded  (advisory) more than N attempts (the count is best effort).

Clock skew. Times from different subscriber tasks are compared with a tolerance of `skew_us`;
receive order between tasks is trusted (the service does not deliver a key's next batch before
the previous batch is settled, which takes longer than the skew).

Shape. One shuffle: publish, delivery and dead-letter rows are unioned into one narrow frame and
repartitioned by (subscription, key); every window and aggregate below is keyed by a superset of
that, so Spark only sorts within partitions (by seq for message and settle windows, by receive time
for the ordering window). Findings and per-subscription statistics leave that pass as one small
aggregate (one group per finding, one per subscription), which is cached; the evidence rows are
then fetched from the original inputs by a broadcast join on the few findings. No Python UDFs.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from validation import judge
from validation.evidence import FINDING_COLUMNS, FINDING_KINDS, GUARANTEES, DeclaredSubscription

_HOTTEST_KEYS = judge.HOTTEST_KEYS
_LATENCY_ACCURACY = 10_000


@dataclass
class CheckResults:
    findings: DataFrame  # columns evidence.FINDING_COLUMNS; evidence = JSON array of proving rows
    stats: DataFrame  # one row per subscription, see STATS_SCHEMA


STATS_SCHEMA = T.StructType(
    [
        T.StructField("subscription", T.StringType(), False),
        T.StructField("published", T.LongType(), False),
        T.StructField("delivered", T.LongType(), False),
        T.StructField("distinct_delivered", T.LongType(), False),
        T.StructField("acked", T.LongType(), False),
        T.StructField("dead_lettered", T.LongType(), False),
        T.StructField("redeliveries", T.LongType(), False),
        T.StructField("redelivery_rate", T.DoubleType(), True),
        T.StructField("latency_p50_ms", T.DoubleType(), True),
        T.StructField("latency_p95_ms", T.DoubleType(), True),
        T.StructField("latency_p99_ms", T.DoubleType(), True),
        T.StructField(
            "hottest_keys",
            T.ArrayType(
                T.StructType([T.StructField("key", T.StringType()), T.StructField("deliveries", T.LongType())])
            ),
            True,
        ),
    ]
)


# -- inputs -----------------------------------------------------------------------------------
def _config(spark, subscriptions: list[DeclaredSubscription]) -> DataFrame:
    rows = [(i, s.name, s.topic) for i, s in enumerate(subscriptions)]
    return spark.createDataFrame(rows, "sub_id int, subscription string, topic string")


def _unified(publishes: DataFrame, deliveries: DataFrame, config: DataFrame) -> DataFrame:
    """One narrow row per publish (per subscription of its topic), delivery and dead-letter.

    Columns `judge.INPUT_COLUMNS`: `ok` is a publish's status ok, or a delivery's ack/nack that
    returned success (with its time); `act` codes the action the pass distinguishes.
    """
    null_long = F.lit(None).cast("long")
    pubs = publishes.join(F.broadcast(config), "topic").select(
        "sub_id",
        "key",
        "seq",
        F.lit(judge.PUBLISH).cast("byte").alias("rk"),
        F.col("publish_time_us").alias("t"),
        F.coalesce(F.col("status") == "ok", F.lit(False)).alias("ok"),
        F.lit(judge.ACT_OTHER).cast("byte").alias("act"),
        null_long.alias("ack_t"),
        null_long.alias("deadline_us"),
        null_long.alias("attempt"),
        null_long.alias("dl_count"),
        "message_id",
    )
    foreign = F.col("probe_run").isNull() | (F.col("probe_run") != F.col("run_id"))
    foreign = foreign | F.col("key").isNull() | F.col("seq").isNull()
    rk = (
        F.when(foreign, F.lit(judge.FOREIGN))
        .when(F.col("kind") == "dead_letter", F.lit(judge.DEAD_LETTER))
        .otherwise(F.lit(judge.DELIVERY))
        .cast("byte")
    )
    act = (
        F.when(F.col("action") == "ack", F.lit(judge.ACT_ACK))
        .when(F.col("action") == "late_ack", F.lit(judge.ACT_LATE_ACK))
        .when(F.col("action") == "nack", F.lit(judge.ACT_NACK))
        .otherwise(F.lit(judge.ACT_OTHER))
        .cast("byte")
    )
    dels = deliveries.join(F.broadcast(config.drop("topic")), "subscription").select(
        "sub_id",
        "key",
        "seq",
        rk.alias("rk"),
        F.col("receive_time_us").alias("t"),
        F.coalesce((F.col("ack_result") == "success") & F.col("ack_time_us").isNotNull(), F.lit(False)).alias("ok"),
        act.alias("act"),
        F.col("ack_time_us").alias("ack_t"),
        (F.col("ack_deadline_s") * 1_000_000).alias("deadline_us"),
        F.col("delivery_attempt").alias("attempt"),
        F.col("dl_source_delivery_count").alias("dl_count"),
        "message_id",
    )
    return pubs.unionByName(dels)


def _when(cond: Column, value) -> Column:
    return F.when(cond, value)


# -- the pass ---------------------------------------------------------------------------------
def _one_pass(u: DataFrame, subscriptions: list[DeclaredSubscription], skew_us: int) -> DataFrame:
    """Findings (one row each, with a row id) and one statistics row per subscription."""
    c = F.col
    config = judge.SubscriptionConfig(
        names=tuple(s.name for s in subscriptions),
        ordered=tuple(bool(s.ordering) for s in subscriptions),
        eod=tuple(bool(s.exactly_once) for s in subscriptions),
        max_attempts=tuple(s.max_delivery_attempts for s in subscriptions),
    )

    def judge_each(batches):
        from pyspark import TaskContext

        from validation import judge as j  # the executor's import

        yield from j.judge_partition(batches, config, skew_us, TaskContext.get().partitionId())

    sorted_rows = (
        u.repartition("sub_id", "key")
        .sortWithinPartitions("sub_id", "key", "seq", c("rk") == judge.FOREIGN, "t", "rk")
        .select(*judge.INPUT_COLUMNS)
    )
    judged = sorted_rows.mapInArrow(judge_each, judge.OUTPUT_SCHEMA)
    # statistics rows carry a chunk's latencies as an array: one element per row, counts on the first
    exploded = judged.select("*", F.posexplode_outer("latency_ms").alias("pos", "lat"))
    once = c("pos").isNull() | (c("pos") == 0)
    hot = c("key_deliveries").isNotNull()
    return exploded.groupBy("subscription", "kind", "row_id").agg(
        # a finding group is one row: its fields
        F.first("severity").alias("severity"),
        F.first("key").alias("key"),
        F.first("seq").alias("seq"),
        F.first("message_id").alias("message_id"),
        F.first("detail").alias("detail"),
        F.first("ev_seqs").alias("ev_seqs"),
        F.first("t").alias("t"),
        # the statistics group of a subscription
        *[F.sum(_when(once, c(n))).alias(n) for n in ("published", "delivered", "distinct_delivered", "acked", "dead_lettered")],
        F.percentile_approx("lat", [0.5, 0.95, 0.99], _LATENCY_ACCURACY).alias("latency"),
        F.max_by(
            _when(hot, F.struct(c("key").alias("key"), c("key_deliveries").alias("deliveries"))),
            _when(hot, F.struct(c("key_deliveries"), c("key"))),  # ties: a deterministic pick
            _HOTTEST_KEYS,
        ).alias("hottest_keys"),
    )


# -- evidence ---------------------------------------------------------------------------------
def _evidence_rows(publishes: DataFrame, deliveries: DataFrame, config: DataFrame) -> DataFrame:
    """Every publish (per subscription of its topic) and delivery row, its columns kept in a struct."""
    dels = deliveries.select(
        "subscription",
        "key",
        "seq",
        "message_id",
        F.col("receive_time_us").alias("t"),
        F.struct(F.lit("delivery").alias("source"), *deliveries.columns).alias("row"),
    )
    pubs = publishes.join(F.broadcast(config.select("topic", "subscription")), "topic").select(
        "subscription",
        "key",
        "seq",
        "message_id",
        F.col("publish_time_us").alias("t"),
        F.struct(F.lit("publish").alias("source"), *publishes.columns).alias("row"),
    )
    return pubs, dels


def _with_evidence(core: DataFrame, rows: tuple[DataFrame, DataFrame]) -> DataFrame:
    """Join the (few) findings to the rows that prove them; JSON is made for matched rows only."""
    f = F.broadcast(core.alias("f"))
    finding_cols = ["subscription", "kind", "guarantee", "severity", "key", "seq", "message_id", "detail"]
    matched = []
    for side in rows:
        r = side.alias("r")
        cond = (
            (F.col("f.subscription") == F.col("r.subscription"))
            & F.col("f.key").eqNullSafe(F.col("r.key"))
            & (
                F.when(F.col("f.kind") == "unexpected", F.col("r.message_id") == F.col("f.message_id")).otherwise(
                    F.array_contains(F.col("f.ev_seqs"), F.col("r.seq"))
                )
            )
        )
        matched.append(
            f.join(r, cond, "inner").select(
                F.col("f.row_id").alias("row_id"), F.col("r.t").alias("t"), F.to_json(F.col("r.row")).alias("row")
            )
        )
    ev = (
        matched[0]
        .unionByName(matched[1])
        .groupBy("row_id")
        .agg(F.sort_array(F.collect_list(F.struct("t", "row"))).alias("ev"))
    )
    return core.join(ev, "row_id", "left").select(
        *finding_cols,
        F.concat(F.lit("["), F.coalesce(F.array_join(F.transform("ev", lambda x: x["row"]), ","), F.lit("")), F.lit("]")).alias(
            "evidence"
        ),
    )


def run_checks(
    publishes: DataFrame,
    deliveries: DataFrame,
    subscriptions: list[DeclaredSubscription],
    *,
    skew_us: int = 250_000,
) -> CheckResults:
    """Check the evidence of one run against the declared subscriptions it probed.

    Pass only the subscriptions the probe exercised: every published message of a subscription's
    topic is expected on it. Runs one Spark job for the findings and statistics (cached, small)
    and one broadcast join for the evidence rows of the findings.
    """
    spark = publishes.sparkSession
    config = _config(spark, subscriptions)
    guarantee = F.create_map(*[x for k, (g, _) in FINDING_KINDS.items() for x in (F.lit(k), F.lit(g))])
    u = _unified(publishes, deliveries, config)
    combined = _one_pass(u, subscriptions, skew_us).withColumn("guarantee", guarantee[F.col("kind")]).cache()
    combined.count()

    core = combined.where(F.col("kind").isNotNull())
    findings = _with_evidence(core, _evidence_rows(publishes, deliveries, config)).select(*FINDING_COLUMNS)

    s = combined.where(F.col("kind").isNull())
    zero = F.lit(0).cast("long")
    stats = config.select("subscription").join(s, "subscription", "left").select(
        "subscription",
        F.coalesce(F.col("published").cast("long"), zero).alias("published"),
        F.coalesce(F.col("delivered").cast("long"), zero).alias("delivered"),
        F.coalesce(F.col("distinct_delivered").cast("long"), zero).alias("distinct_delivered"),
        F.coalesce(F.col("acked").cast("long"), zero).alias("acked"),
        F.coalesce(F.col("dead_lettered").cast("long"), zero).alias("dead_lettered"),
        (F.coalesce(F.col("delivered"), zero) - F.coalesce(F.col("distinct_delivered"), zero)).cast("long").alias("redeliveries"),
        F.when(F.col("delivered") > 0, (F.col("delivered") - F.col("distinct_delivered")) / F.col("delivered")).alias(
            "redelivery_rate"
        ),
        F.col("latency")[0].alias("latency_p50_ms"),
        F.col("latency")[1].alias("latency_p95_ms"),
        F.col("latency")[2].alias("latency_p99_ms"),
        F.coalesce(
            F.array_sort(
                "hottest_keys",
                lambda x, y: F.when(x["deliveries"] != y["deliveries"], y["deliveries"] - x["deliveries"]).otherwise(
                    F.when(x["key"] < y["key"], -1).when(x["key"] > y["key"], 1).otherwise(0)
                ).cast("int"),
            ),
            F.array().cast(STATS_SCHEMA["hottest_keys"].dataType),
        ).alias("hottest_keys"),
    )
    return CheckResults(findings=findings, stats=stats)


def guarantee_status(
    findings: list[dict], sub: DeclaredSubscription, *, tested: bool, poison_published: bool
) -> dict[str, str]:
    """guarantee -> holds | violated | not_tested, for one declared subscription.

    Only `error` findings make a guarantee `violated`; `advisory` ones are reported beside it.
    """
    declared = {
        "ordering": sub.ordering,
        "exactly_once": sub.exactly_once,
        "dead_letter": sub.dead_lettering and poison_published,
        "completeness": True,
    }
    violated = {
        f["guarantee"] for f in findings if f["subscription"] == sub.name and f["severity"] == "error"
    }
    status = {}
    for g in GUARANTEES:
        if not tested or not declared[g]:
            status[g] = "not_tested"
        else:
            status[g] = "violated" if g in violated else "holds"
    return status
