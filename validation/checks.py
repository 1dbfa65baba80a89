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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from validation.evidence import FINDING_COLUMNS, FINDING_KINDS, GUARANTEES, DeclaredSubscription

_INF = 2**62  # "never settled"
_PUBLISH, _DELIVERY, _DEAD_LETTER, _FOREIGN = 0, 1, 2, 3
_HOTTEST_KEYS = 5
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
    rows = [
        (s.name, s.topic, bool(s.ordering), bool(s.exactly_once), s.max_delivery_attempts) for s in subscriptions
    ]
    schema = "subscription string, topic string, ordered boolean, eod boolean, max_attempts long"
    return spark.createDataFrame(rows, schema)


def _unified(publishes: DataFrame, deliveries: DataFrame, config: DataFrame) -> DataFrame:
    """One narrow row per publish (per subscription of its topic), delivery and dead-letter."""
    null_long = F.lit(None).cast("long")
    null_str = F.lit(None).cast("string")
    pubs = publishes.join(F.broadcast(config), "topic").select(
        "subscription",
        "key",
        "seq",
        F.lit(_PUBLISH).cast("byte").alias("rk"),
        "message_id",
        F.col("publish_time_us").alias("t"),
        (F.col("status") == "ok").alias("pub_ok"),
        null_str.alias("action"),
        F.lit(None).cast("boolean").alias("ack_ok"),
        null_long.alias("ack_t"),
        null_long.alias("deadline_us"),
        null_long.alias("attempt"),
        null_long.alias("dl_count"),
        "ordered",
        "eod",
        "max_attempts",
    )
    foreign = F.col("probe_run").isNull() | (F.col("probe_run") != F.col("run_id"))
    foreign = foreign | F.col("key").isNull() | F.col("seq").isNull()
    rk = (
        F.when(foreign, F.lit(_FOREIGN))
        .when(F.col("kind") == "dead_letter", F.lit(_DEAD_LETTER))
        .otherwise(F.lit(_DELIVERY))
        .cast("byte")
    )
    dels = deliveries.join(F.broadcast(config.drop("topic")), "subscription").select(
        "subscription",
        "key",
        "seq",
        rk.alias("rk"),
        "message_id",
        F.col("receive_time_us").alias("t"),
        F.lit(None).cast("boolean").alias("pub_ok"),
        "action",
        (F.col("ack_result") == "success").alias("ack_ok"),
        F.col("ack_time_us").alias("ack_t"),
        (F.col("ack_deadline_s") * 1_000_000).alias("deadline_us"),
        F.col("delivery_attempt").alias("attempt"),
        F.col("dl_source_delivery_count").alias("dl_count"),
        "ordered",
        "eod",
        "max_attempts",
    )
    return pubs.unionByName(dels)


# -- the pass ---------------------------------------------------------------------------------
def _when(cond: Column, value) -> Column:
    return F.when(cond, value)


def _annotate(u: DataFrame, skew_us: int) -> tuple[DataFrame, Column]:
    c = F.col
    is_pub, is_del, is_dl = c("rk") == _PUBLISH, c("rk") == _DELIVERY, c("rk") == _DEAD_LETTER
    succeeded = c("ack_ok") & c("ack_t").isNotNull()
    acked = is_del & c("action").isin("ack", "late_ack") & succeeded
    valid_ack = is_del & (c("action") == "ack") & succeeded
    # end(d): when d stopped being outstanding
    deadline_end = c("t") + c("deadline_us")
    end = F.when(c("action").isin("ack", "nack") & succeeded, F.least(c("ack_t"), deadline_end)).otherwise(deadline_end)

    msg = ["subscription", "key", "seq"]
    # foreign rows sort last so a message's first row is one of its own
    w_msg = Window.partitionBy(*msg).orderBy((c("rk") == _FOREIGN), "t", "rk")
    w_msg_all = w_msg.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    w_msg_before = w_msg.rowsBetween(Window.unboundedPreceding, -1)
    w_msg_after = w_msg.rowsBetween(1, Window.unboundedFollowing)

    a = u.select(
        "*",
        F.max(is_pub).over(w_msg_all).alias("known"),
        F.max(is_pub & c("pub_ok")).over(w_msg_all).alias("pub_ok_m"),
        F.min(_when(is_pub & c("pub_ok"), c("t"))).over(w_msg_all).alias("pub_t"),
        F.sum(is_del.cast("long")).over(w_msg_all).alias("n_del"),
        F.sum(is_dl.cast("long")).over(w_msg_all).alias("n_dl"),
        F.min(_when(is_del, c("t"))).over(w_msg_all).alias("first_recv"),
        F.max(_when(is_del, c("attempt"))).over(w_msg_all).alias("max_attempt"),
        F.max(_when(is_dl, c("dl_count"))).over(w_msg_all).alias("max_dl_count"),
        F.min(_when(is_dl, c("t"))).over(w_msg_all).alias("dl_t"),
        F.min(_when(acked, c("ack_t"))).over(w_msg_all).alias("settle_ack"),
        F.min(_when(valid_ack, c("ack_t"))).over(w_msg_all).alias("first_valid_ack"),
        F.max(_when(is_del, end)).over(w_msg_all).alias("last_end"),
        F.max_by(valid_ack, _when(is_del, c("t"))).over(w_msg_all).alias("last_delivery_acked"),
        F.max(_when(is_del, end)).over(w_msg_before).alias("prev_end"),
        F.min(_when(is_del, c("t"))).over(w_msg_after).alias("next_recv"),
        F.row_number().over(w_msg).alias("rn_msg"),
    )

    exists = c("known") & (c("pub_ok_m") | (c("n_del") > 0) | (c("n_dl") > 0))
    settle = F.least(c("settle_ack"), F.when(c("n_dl") > 0, F.least(c("dl_t"), F.coalesce(c("last_end"), c("dl_t")))))
    key = ["subscription", "key"]
    w_seq = Window.partitionBy(*key).orderBy("seq")
    first_of_seq = exists & (c("rn_msg") == 1)
    a = a.select(
        "*",
        F.sum(first_of_seq.cast("long"))
        .over(w_seq.rangeBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("idx"),
        F.max(_when(first_of_seq, F.coalesce(settle, F.lit(_INF))))
        .over(w_seq.rangeBetween(Window.unboundedPreceding, -1))
        .alias("prefix_settle"),
        F.max_by(
            _when(first_of_seq, c("seq")), _when(first_of_seq, F.struct(F.coalesce(settle, F.lit(_INF)), -c("seq")))
        )
        .over(w_seq.rangeBetween(Window.unboundedPreceding, -1))
        .alias("blocking_seq"),
        F.sum(is_del.cast("long")).over(w_seq.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias(
            "key_deliveries"
        ),
        F.max(is_dl).over(w_seq.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias("key_has_dl"),
        F.row_number().over(w_seq).alias("rn_key"),
        settle.alias("settle"),
    )

    # ordering: the deliveries of this run's messages first, in receive order
    in_order = is_del & c("known")
    w_recv = Window.partitionBy(*key).orderBy(~in_order, "t", "seq")
    a = a.select(
        "*",
        F.lag("idx").over(w_recv).alias("prev_idx"),
        F.lag("seq").over(w_recv).alias("prev_seq"),
        F.max("idx").over(w_recv.rowsBetween(Window.unboundedPreceding, -1)).alias("high_idx"),
        F.monotonically_increasing_id().alias("row_id"),
    )
    return a, in_order


def _findings_of(a: DataFrame, in_order: Column, skew_us: int) -> Column:
    """The array of findings one annotated row raises (each a struct; empty for most rows)."""
    c = F.col
    is_del, is_dl = c("rk") == _DELIVERY, c("rk") == _DEAD_LETTER
    first = c("rn_msg") == 1
    n = c("max_attempts")
    attempts = F.greatest(c("n_del"), F.coalesce(c("max_attempt"), F.lit(0)))

    conditions = []

    def finding(kind: str, cond: Column, detail: Column, ev_seqs: Column | None = None, severity: Column | None = None):
        conditions.append(cond)
        sev = severity if severity is not None else F.lit(FINDING_KINDS[kind][1])
        seqs = ev_seqs if ev_seqs is not None else F.array(c("seq"))
        return F.when(
            cond,
            F.struct(
                F.lit(kind).alias("kind"),
                sev.alias("severity"),
                detail.alias("detail"),
                seqs.alias("ev_seqs"),
            ),
        )

    def fmt(template: str, *cols) -> Column:
        return F.format_string(template, *cols)

    # -- completeness
    lost = finding(
        "lost",
        first & c("pub_ok_m") & (c("n_del") == 0) & (c("n_dl") == 0),
        fmt("published at %d (status ok) and never delivered nor dead-lettered", c("pub_t")),
    )
    unexpected = finding(
        "unexpected",
        (c("rk") == _FOREIGN) | ((is_del | is_dl) & ~c("known")),
        F.when(
            c("rk") == _FOREIGN,
            fmt("received at %d a message without this run's probe attributes (another run, or not a probe message)", c("t")),
        ).otherwise(fmt("received at %d a message (key, seq) this run never published", c("t"))),
    )
    # -- exactly-once
    eod = c("eod") & is_del
    dup_after_ack = finding(
        "duplicate_after_ack",
        eod & c("first_valid_ack").isNotNull() & (c("t") > c("first_valid_ack") + skew_us),
        fmt(
            "delivered again at %d, %.3f s after a successful ack at %d",
            c("t"),
            (c("t") - c("first_valid_ack")) / 1e6,
            c("first_valid_ack"),
        ),
    )
    dup_outstanding = finding(
        "duplicate_while_outstanding",
        eod & c("prev_end").isNotNull() & (c("t") < c("prev_end") - skew_us),
        fmt(
            "delivered again at %d while an earlier delivery was outstanding until %d (no nack, deadline not passed)",
            c("t"),
            c("prev_end"),
        ),
    )
    accepted = eod & c("action").isin("ack", "late_ack") & c("ack_ok") & c("ack_t").isNotNull()
    superseded = c("next_recv").isNotNull() & (c("next_recv") < c("ack_t") - skew_us)
    stale = finding(
        "stale_ack_accepted",
        accepted & ((c("action") == "late_ack") | superseded),
        F.when(
            c("action") == "late_ack",
            fmt("ack sent at %d after the deadline (%d) returned success", c("ack_t"), c("t") + c("deadline_us")),
        ).otherwise(
            fmt("ack sent at %d returned success although a later delivery at %d superseded its ack id", c("ack_t"), c("next_recv"))
        ),
    )
    # -- ordering
    start = c("prev_idx").isNull() | (c("idx") != c("prev_idx") + 1)
    unsettled = c("prefix_settle").isNotNull() & (c("prefix_settle") > c("t") + skew_us)
    forward = c("prev_idx").isNull() | (c("idx") > c("prev_idx"))
    form = (
        F.when(start & unsettled & forward, F.lit("skip"))
        .when(start & unsettled, F.lit("regression"))
        .when(start & (c("idx") > c("prev_idx") + 1) & (c("prev_idx") < c("high_idx")), F.lit("rewind_without_replay"))
    )
    best_effort = c("max_attempts").isNotNull() & c("key_has_dl")
    blocking = F.coalesce(c("blocking_seq").cast("string"), F.lit("?"))
    why = (
        F.when(
            form == "rewind_without_replay",
            fmt(
                "rewind_without_replay: seq %d received at %d right after seq %d, below the highest seq delivered so far: "
                "the rewind stopped replaying",
                c("seq"),
                c("t"),
                c("prev_seq"),
            ),
        )
        .otherwise(
            F.concat(
                form,
                fmt(
                    ": seq %d received at %d started a run after seq %s while seq %s was not settled",
                    c("seq"),
                    c("t"),
                    F.coalesce(c("prev_seq").cast("string"), F.lit("(none)")),
                    blocking,
                ),
            )
        )
    )
    why = F.when(
        best_effort,
        F.concat(why, F.lit("; advisory: the key has a dead-lettered message and order is best effort for those")),
    ).otherwise(why)
    out_of_order = finding(
        "out_of_order",
        c("ordered") & in_order & form.isNotNull(),
        why,
        # evidence: this delivery's seq, the previous one's, and the unsettled seq (or the first not replayed)
        F.filter(
            F.array(
                c("seq"),
                c("prev_seq"),
                F.when(form == "rewind_without_replay", c("prev_seq") + 1).otherwise(c("blocking_seq")),
            ),
            lambda x: x.isNotNull(),
        ),
        F.when(best_effort, F.lit("advisory")).otherwise(F.lit(FINDING_KINDS["out_of_order"][1])),
    )
    # -- dead-lettering
    dl = first & n.isNotNull() & c("known")
    missing = finding(
        "dead_letter_missing",
        dl & (c("n_dl") == 0) & c("settle_ack").isNull() & (attempts >= n),
        fmt("%d delivery attempts, never acked, not forwarded to the dead-letter topic (max %d)", attempts, n),
    )
    after_ack = finding(
        "dead_letter_after_ack",
        dl & (c("n_dl") > 0) & F.coalesce(c("last_delivery_acked"), F.lit(False)),
        fmt("forwarded at %d although its last delivery was acked with success", c("dl_t")),
    )
    early_attempts = F.greatest(attempts, F.coalesce(c("max_dl_count"), F.lit(0)))
    early = finding(
        "dead_letter_early",
        dl & (c("n_dl") > 0) & (early_attempts < n),
        fmt("forwarded at %d after %d delivery attempts, fewer than the declared %d", c("dl_t"), early_attempts, n),
    )
    exceeded = finding(
        "delivery_attempts_exceeded",
        dl & (attempts > n),
        fmt("%d delivery attempts, more than the declared %d (best effort)", attempts, n),
    )
    candidates = [lost, unexpected, dup_after_ack, dup_outstanding, stale, out_of_order, missing, after_ack, early, exceeded]
    flagged = conditions[0]
    for cond in conditions[1:]:
        flagged = flagged | cond
    flagged = F.coalesce(flagged, F.lit(False))
    # The array (a higher-order filter, interpreted) is only built for the few flagged rows.
    return flagged, F.filter(F.array(*candidates), lambda x: x.isNotNull())


def _one_pass(u: DataFrame, skew_us: int) -> DataFrame:
    c = F.col
    a, in_order = _annotate(u.repartition("subscription", "key"), skew_us)
    flagged, found = _findings_of(a, in_order, skew_us)
    # Each row yields one statistics element (kind null), a flagged row its findings too.
    stats_elem = F.array(F.struct(F.lit(None).cast("string").alias("kind"), *[
        F.lit(None).cast(t).alias(n) for n, t in (("severity", "string"), ("detail", "string"), ("ev_seqs", "array<bigint>"))
    ]))
    exploded = a.select("*", F.explode(F.when(flagged, F.concat(found, stats_elem)).otherwise(stats_elem)).alias("f"))
    is_stats = c("f.kind").isNull()
    first = is_stats & (c("rn_msg") == 1) & c("known")
    latency_ms = _when(first & c("pub_t").isNotNull() & c("first_recv").isNotNull(), (c("first_recv") - c("pub_t")) / 1000.0)
    key_first = is_stats & (c("rn_key") == 1) & (c("key_deliveries") > 0)
    return exploded.groupBy(
        "subscription", c("f.kind").alias("kind"), F.when(~is_stats, c("row_id")).alias("row_id")
    ).agg(
        # a finding group is one row: its fields
        F.first("f.severity").alias("severity"),
        F.first("key").alias("key"),
        F.first("seq").alias("seq"),
        F.first("message_id").alias("message_id"),
        F.first("f.detail").alias("detail"),
        F.first("f.ev_seqs").alias("ev_seqs"),
        F.first("t").alias("t"),
        # the statistics group of a subscription
        F.sum(_when(is_stats & (c("rk") == _PUBLISH) & c("pub_ok"), 1)).alias("published"),
        F.sum(_when(is_stats & (c("rk") == _DELIVERY), 1)).alias("delivered"),
        F.sum(_when(first & (c("n_del") > 0), 1)).alias("distinct_delivered"),
        F.sum(_when(first & c("settle_ack").isNotNull(), 1)).alias("acked"),
        F.sum(_when(first & (c("n_dl") > 0), 1)).alias("dead_lettered"),
        F.percentile_approx(latency_ms, [0.5, 0.95, 0.99], _LATENCY_ACCURACY).alias("latency"),
        F.max_by(
            _when(key_first, F.struct(c("key").alias("key"), c("key_deliveries").alias("deliveries"))),
            _when(key_first, F.struct(c("key_deliveries"), c("key"))),  # ties: a deterministic pick
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
    combined = _one_pass(u, skew_us).withColumn("guarantee", guarantee[F.col("kind")]).cache()
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
