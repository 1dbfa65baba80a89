"""Judge the evidence: Spark checks of a delivery log against what each subscription declares.

`run_checks(publishes, deliveries, subscriptions)` returns `CheckResults(findings, stats)`, values on the
driver; the
verification job and the report call exactly that, and `pubsubguard.validation.checks.verdict.guarantee_status`
turns findings into holds / violated / inconclusive / not_tested per guarantee (the guarantees, their
finding kinds and when each is judged: `validation/checks/guarantees.py`). Definitions, with examples, are in `docs/checks.md`;
the short form:

Identity. A message is (subscription, key, seq) among the rows of this run. A delivery whose
`probe_run` is not the run's id, or which carries no key/seq, is *foreign*. Publish rows count for
every declared subscription of their topic.

Settled. A message is settled at the earliest of: the `ack_time_us` of a delivery whose ack (or
late ack) returned `success`; if it was dead-lettered, the end of its last delivery attempt (the
earliest moment the service could have forwarded it; never later than the dead-letter row).

Completeness (every subscription):
  lost        per message id: an id published with status ok (the probe's, or the fault layer's: a
              dropped Publish reply) never delivered and never dead-lettered.
  unexpected  one finding per delivery (or dead-letter) row that is foreign or whose (key, seq)
              this run never published.
  publish_duplicate  (advisory) a (key, seq) delivered under a second message id: a retried
              publish (its reply lost), a new message; one per extra id, counted
              (`publish_duplicates`), never a redelivery. Exactly-once and dead-letter attempts
              are judged per message id; on an ordered key the second id right after the first
              continues the run.

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

Shape. One shuffle, one pass: publish, delivery and dead-letter rows become one narrow row of six
numbers each (`chunk.INPUT_COLUMNS`; a key is identified by two hashes, 96 bits), repartitioned by
key and sorted within partitions by (key, seq, foreign last, time); `kernel.check_partition` judges
each partition in chunks of whole keys with NumPy (`mapInArrow`) and emits the findings with the
coordinates of their row, statistics and latency summaries, and what the report plots (timeline
counts per bin, extent, crash window, expiry deadlines), which come to the driver as Arrow
(small: findings and a few rows per chunk) and are merged there (`aggregates.summarise`,
`aggregates.plot_aggregates`: `CheckResults.plot`). Then, for the
findings and the hottest keys only, their keys are named (from the names kept with the sorted input, the
part files' key dictionaries, or a read of the key columns), a scan of the log filtered by those names
fetches every column of their rows as Arrow, and the driver makes the findings' records with the rows
that prove them (`proof`): no join planned in Spark for a handful of rows.

The probe's layout. Evidence in a local directory whose part files are all in the probe's bucketed
layout (`pubsubguard.validation.evidence.layout`: each file's rows of a bucket of keys in a row group of
its own) needs no shuffle: each bucket's row group of every file is read, packed and sorted with NumPy into
the same rows in the same order, and the same kernel judges them (`buckets`, `_bucket_pass`), in as many Spark
tasks as run at once, which hand their output back as Arrow bytes (`_in_tasks`).
A file not where its layout says is said, and the log judged with the shuffle pass. Other evidence
(written before the layout, or by another writer) is judged with the shuffle pass.

Re-checks. With `evidence_dir` (local evidence), the pass's tasks (the bucket pass's or the shuffle
pass's) also keep their sorted partitions beside the evidence, and a later check of the same part
files, subscriptions and code reads them instead of reading, packing and sorting the log again
(`sorted_input`; same verdict).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from urllib.parse import urlparse
from urllib.request import url2pathname

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from . import aggregates, buckets, chunk, findings, kernel, proof, scans, sorted_input
from ..evidence import layout, spark_hash
from ..evidence.records import DeclaredSubscription
from .findings import DEFAULT_SKEW_US

_NAMED_BY_LIST = 10_000  # up to this many key hashes, the key-name read filters by a literal set
_PUSHDOWN_KEYS = 1_000  # up to this many keys with findings, their names filter the evidence read
_BY_CASE_UP_TO = 8  # up to this many subscriptions, rows find theirs by a CASE over the names, not a join


@dataclass
class CheckResults:
    findings: list[dict]  # records of findings.FINDING_COLUMNS; evidence: the proving rows (`proof`)
    stats: list[dict]  # one per subscription, in the subscriptions' order: STATS_FIELDS
    # what the report plots, from the same pass (driver-side, small): `aggregates.plot_aggregates`' timeline
    # and extent, and `latency` subscription -> `aggregates.latency_cdf`
    plot: dict | None = None
    # subscription -> poison messages published with status ok on its topic (from the same pass)
    poison_published: dict | None = None
    # what became of the pass's sorted input (`sorted_input`): kept, read, or not kept; None without
    # an evidence directory
    sorted_input: str | None = None


# a subscription's figures (CheckResults.stats), each a number (None where nothing was measured) but for
# `subscription` and `hottest_keys`
STATS_FIELDS = (
    "subscription", "published", "delivered", "distinct_delivered", "acked", "dead_lettered",
    "settled",  # published messages acked with success or dead-lettered
    # extra message ids this run's messages were delivered under (retried publishes: `publish_duplicate`)
    "publish_duplicates",
    # deliveries of a message id delivered before (not the first of a publish-side duplicate's second id)
    "redeliveries",
    "redelivery_rate", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms",
    "hottest_keys",  # [{key, deliveries}], the most delivered keys first
)


_CORE_COLUMNS = (
    "row_id", "subscription", "kind", "severity", "h", "h2", "src", "mh", "seq", "form", *findings.FINDING_FACTS,
    "ev_seqs", "t", "key_published",
)


# -- inputs ---------------------------------------------------------------------------------
# Expressions are SQL text: one call to the JVM each, where building them from Column objects took
# one per literal and operator (about 3,900 calls per run_checks; ~0.3-0.5 s measured on a small log).
def _sql_string(value: str) -> str:
    """A SQL string literal (Spark's escapes: backslash and quote)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _declared(
    publishes: DataFrame, deliveries: DataFrame, subscriptions: list[DeclaredSubscription]
) -> tuple[DataFrame, DataFrame]:
    """Publish rows once per declared subscription of their topic, and the delivery rows of declared
    subscriptions, each with `sub_id` (the subscription's index in `subscriptions`) and, for
    publishes, `subscription`.

    Up to `_BY_CASE_UP_TO` subscriptions, a CASE over their names (no broadcast to plan and ship:
    ~0.4 s less per run_checks); above, broadcast hash joins (one lookup per row, where a CASE
    compares each row with every subscription)."""
    if len(subscriptions) <= _BY_CASE_UP_TO:
        by_topic: dict[str, list[str]] = {}
        for i, sub in enumerate(subscriptions):
            by_topic.setdefault(sub.topic, []).append(f"named_struct('sub_id', {i}, 'subscription', {_sql_string(sub.name)})")
        of_topic = " ".join(f"WHEN {_sql_string(t)} THEN array({', '.join(v)})" for t, v in by_topic.items())
        sub_id = " ".join(f"WHEN {_sql_string(sub.name)} THEN {i}" for i, sub in enumerate(subscriptions))
        # inline of a NULL array (an undeclared topic) yields no row, as the join would
        pubs = publishes.select("*", F.expr(f"inline(CASE topic {of_topic} END)"))
        dels = deliveries.withColumn("sub_id", F.expr(f"CASE subscription {sub_id} END")).where("sub_id IS NOT NULL")
        return pubs, dels
    spark = publishes.sparkSession
    config = spark.createDataFrame(
        [(i, sub.name, sub.topic) for i, sub in enumerate(subscriptions)], "sub_id int, subscription string, topic string"
    )
    pubs = publishes.join(F.broadcast(config), "topic")
    dels = deliveries.join(F.broadcast(config.drop("topic")), "subscription")
    return pubs, dels


# the identity of a (subscription, key) in the pass: two independent hashes (96 bits); the pass, the
# key-name read and the evidence read all use these
_H, _H2 = "xxhash64(sub_id, key)", "hash(sub_id, key)"
_KEY_HASHES = (f"{_H} AS h", f"{_H2} AS h2")

# a delivery log row's kind: chunk.FOREIGN, DEAD_LETTER or DELIVERY
_ROW_KIND = (
    "CAST(CASE WHEN probe_run IS NULL OR probe_run != run_id OR key IS NULL OR seq IS NULL "
    f"THEN {chunk.FOREIGN} WHEN kind = 'dead_letter' THEN {chunk.DEAD_LETTER} ELSE {chunk.DELIVERY} END AS TINYINT)"
)


def _meta(rk: str, ok: str, act: str, deadline_s: str | None) -> str:
    """the kernel's packed `meta` column (see chunk.INPUT_COLUMNS), as SQL over the given expressions."""
    low = f"CAST(sub_id AS BIGINT) * 32 + CAST(COALESCE({ok}, false) AS BIGINT) * 16 + ({act}) * 4 + {rk}"
    if deadline_s is not None:
        top = chunk.MAX_DEADLINE_S
        checked = (
            f"CASE WHEN {deadline_s} < 0 OR {deadline_s} > {top} THEN raise_error(concat("
            f"'deliveries: ack_deadline_s must be within 0..{top}, got ', CAST({deadline_s} AS STRING))) "
            f"ELSE {deadline_s} END"
        )
        low += f" + COALESCE(CAST({checked} AS BIGINT) + 1, 0) * {1 << chunk.DEADLINE_SHIFT}"
    return f"CAST({_H2} AS BIGINT) * {1 << 32} + {low}"


def _unified(publishes: DataFrame, deliveries: DataFrame, subscriptions: list[DeclaredSubscription],
             extra: tuple[str, ...] = ()) -> DataFrame:
    """One narrow row per publish (per subscription of its topic), delivery and dead-letter: the
    numbers `chunk.INPUT_COLUMNS` describes, and the `extra` columns both have (`pubsubguard watch`: the
    key and its subscription's index)."""
    publishes, deliveries = _declared(publishes, deliveries, subscriptions)
    pubs = publishes.selectExpr(
        *extra,
        _KEY_HASHES[0],
        _meta(str(chunk.PUBLISH), "status = 'ok'", str(chunk.ACT_OTHER), None) + " AS meta",
        "seq",
        "publish_time_us AS t",
        "CAST(NULL AS BIGINT) AS ack_t",
        # its message id hashed as a delivery's (completeness per id) and the poison flag in bit 0
        f"CAST(CASE WHEN status = 'ok' AND message_id IS NOT NULL THEN ((xxhash64(message_id) & {(1 << chunk.ID_BITS) - 1}) "
        f"+ 1) * {1 << chunk.ID_SHIFT} ELSE 0 END + CASE WHEN poison THEN 1 ELSE 0 END AS BIGINT) AS att",
    )
    act = (
        f"CASE action WHEN 'ack' THEN {kernel.ACT_ACK} WHEN 'late_ack' THEN {kernel.ACT_LATE_ACK} "
        f"WHEN 'nack' THEN {chunk.ACT_NACK} ELSE {chunk.ACT_OTHER} END"
    )
    ok = "ack_result = 'success' AND ack_time_us IS NOT NULL"
    dels = deliveries.withColumn("rk", F.expr(_ROW_KIND)).selectExpr(
        *extra,
        _KEY_HASHES[0],
        f"{_meta('rk', ok, act, 'ack_deadline_s')} AS meta",
        "seq",
        "receive_time_us AS t",
        "ack_time_us AS ack_t",
        f"CASE WHEN rk = {chunk.FOREIGN} THEN xxhash64(message_id) WHEN kind = 'dead_letter' "
        f"THEN dl_source_delivery_count ELSE ((xxhash64(message_id) & {(1 << chunk.ID_BITS) - 1}) + 1) * "
        f"{1 << chunk.ID_SHIFT} + (COALESCE(delivery_attempt + 1, 0) * 4 + CASE action "
        f"WHEN 'expire' THEN {chunk.EXT_EXPIRE} WHEN 'crash' THEN {chunk.EXT_CRASH} ELSE {chunk.EXT_NONE} END) END AS att",
    )
    return pubs.unionByName(dels)


# -- the pass ---------------------------------------------------------------------------------
# the order within a partition: a message's own rows first, by time; the hash leads so most
# comparisons end on its prefix (`meta & 3` is the row kind: `%` keeps the sign of a negative meta)
_ORDER = ("h", "shiftright(meta, 32)", "seq", f"(meta & 3) = {chunk.FOREIGN}", "t", "meta & 3")


def _config(subscriptions: list[DeclaredSubscription], unproven: frozenset = frozenset()) -> kernel.SubscriptionConfig:
    if len(subscriptions) > chunk.MAX_SUBSCRIPTIONS:
        raise ValueError(f"{len(subscriptions)} subscriptions: the checks judge at most {chunk.MAX_SUBSCRIPTIONS} per run")
    return kernel.SubscriptionConfig(
        names=tuple(s.name for s in subscriptions),
        ordering=tuple(bool(s.ordering) for s in subscriptions),
        exactly_once=tuple(bool(s.exactly_once) for s in subscriptions),
        max_delivery_attempts=tuple(s.max_delivery_attempts for s in subscriptions),
        lost_proven=tuple(s.name not in unproven for s in subscriptions),
    )


def _one_pass(
    u: DataFrame, subscriptions: list[DeclaredSubscription], skew_us: int, chunk_rows: int = chunk.CHUNK_ROWS,
    writing: sorted_input.Writing | None = None, unproven: frozenset = frozenset(),
) -> DataFrame:
    """Findings (one group each, by row id) and one statistics group per subscription. With `writing`,
    each task also keeps its sorted partition there (`sorted_input.tee`)."""
    config = _config(subscriptions, unproven)
    # what the tasks need of `writing` (not the manifest's sources, which can list thousands of files)
    directory, seen, written = (writing.path, writing.seen, writing.written) if writing is not None else (None,) * 3

    def check_each(batches):
        from pyspark import TaskContext

        from . import kernel as k  # the executor's import
        from . import sorted_input as s

        partition = TaskContext.get().partitionId()
        if directory is not None:
            batches = s.tee(batches, directory, partition, seen, written)
        yield from k.check_partition(batches, config, skew_us, partition, chunk_rows)

    sorted_rows = u.repartition("h").sortWithinPartitions(*map(F.expr, _ORDER))
    return sorted_rows.mapInArrow(check_each, from_arrow_schema(kernel.OUTPUT_SCHEMA))


def _kept_pass(
    spark, parts: list[tuple[int, str]], subscriptions: list[DeclaredSubscription], skew_us: int,
    chunk_rows: int = chunk.CHUNK_ROWS, unproven: frozenset = frozenset(),
) -> pa.Table:
    """What `_one_pass` gives, from the sorted partitions a check kept (`sorted_input`): each partition read
    whole in a task (`_in_tasks`), the same rows in the same order for the same kernel."""
    config = _config(subscriptions, unproven)

    def judge(i: int):
        from . import kernel as k  # the executor's import
        from . import sorted_input as s

        partition, path = parts[i]
        return k.check_partition(s.read(path), config, skew_us, partition, chunk_rows)

    return _in_tasks(spark, len(parts), judge)


def _in_tasks(spark, count: int, judge) -> pa.Table:
    """The batches of `judge(i)` (OUTPUT_SCHEMA) for i in 0..count-1, in that order, judged in as many tasks as the
    cluster runs at once (at most `count`), each a run of them: a task of Python costs Spark tens of milliseconds
    however little it does (8 empty tasks took 0.40 s against 0.15 s for 2 on local[2]), and the parts are of a size
    (hash buckets), so more tasks than cores balance nothing.

    Spark's RDD tasks, returning each number's batches as one Arrow IPC stream of bytes (a task holds one bucket's
    output at a time), which the JVM hands over as they are: a DataFrame's `mapInArrow(...).toArrow()` turns them
    into rows and back, which with the job's fixed cost took 0.56-0.71 s of a 1M-row re-check against 0.43-0.62 s
    so (`docs/performance.md`; `benchmarks/bench_spark_tasks.py` measures the jobs' fixed costs)."""
    schema = kernel.OUTPUT_SCHEMA

    def each(numbers):
        import pyarrow as pa  # the executor's import

        for i in numbers:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, schema) as stream:
                for batch in judge(i):
                    stream.write_batch(batch)
            yield sink.getvalue().to_pybytes()

    tasks = max(1, min(count, spark.sparkContext.defaultParallelism))
    streams = spark.sparkContext.parallelize(range(count), tasks).mapPartitions(each).collect() if count else []
    return pa.concat_tables([schema.empty_table(), *(pa.ipc.open_stream(b).read_all() for b in streams)])


def _bucket_pass(
    spark, pub_paths: list[str], del_paths: list[str], count: int, subscriptions: list[DeclaredSubscription],
    skew_us: int, chunk_rows: int = chunk.CHUNK_ROWS, unproven: frozenset = frozenset(),
    writing: sorted_input.Writing | None = None,
) -> pa.Table:
    """What `_one_pass` gives, from evidence in the probe's bucketed layout (`buckets`): each bucket is read in a
    task (`_in_tasks`) from its row group of every part file, packed and sorted, and the same kernel judges it. With
    `writing`, each bucket's sorted rows are also kept there (`sorted_input.tee`), as the shuffle pass's are."""
    config = _config(subscriptions, unproven)
    declared = buckets.Declared.of(subscriptions)
    directory, seen, written = (writing.path, writing.seen, writing.written) if writing is not None else (None,) * 3

    def judge(bucket: int):
        from . import buckets as b  # the executor's import
        from . import kernel as k
        from . import sorted_input as s

        rows = b.bucket_input(pub_paths, del_paths, declared, bucket, count)
        if directory is not None:
            rows = s.tee(rows, directory, bucket, seen, written)
        return k.check_partition(rows, config, skew_us, bucket, chunk_rows)

    return _in_tasks(spark, count, judge)


def _local_path(uri: str) -> str:
    return os.path.realpath(url2pathname(urlparse(uri).path))


def _first_line(err: BaseException) -> str:
    """An error's type and the last line that names it (a task's error comes wrapped in Spark's)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    named = [line for line in lines if "NotInLayout" in line or "Error" in line]
    return (named[-1] if named else (lines[0] if lines else type(err).__name__))[:300]


# the code that shapes the kept sorted input, digested into its manifest: the packing (`_unified`, this
# module), the packed layout (`chunk`: INPUT_COLUMNS and the bits of `meta` and `att`), the ranks and the
# row groups' cut (`kernel.with_id_ranks`, `kernel.last_key_start`) and the scans they use
_SHAPING_MODULES = (sys.modules[__name__], chunk, kernel, scans, buckets, layout, spark_hash)


@dataclass
class _Passed:
    """The pass's output as Arrow; the key names kept with the sorted input it read (or None); and
    `finish(names)`, which keeps its sorted input with the key names the check read (when it keeps it)
    and says what became of it (a sentence, or None when there is no local evidence directory)."""

    table: pa.Table
    names: "sorted_input.KeyNames | None"
    finish: object
    abandon: object = lambda: None  # when the check fails before `finish`: nothing half-kept stays
    bucketed: tuple | None = None  # ((publish part files, delivery part files), buckets): the log in the probe's layout


def _judged(
    publishes: DataFrame, deliveries: DataFrame, subscriptions: list[DeclaredSubscription], skew_us: int,
    chunk_rows: int, evidence_dir, unproven: frozenset = frozenset(), keep: bool = True,
) -> _Passed:
    spark = publishes.sparkSession

    def sources():  # what the frames read now (Spark lists their files when they are made)
        read = {_local_path(u) for u in publishes.inputFiles() + deliveries.inputFiles()}
        return sorted_input.Kept.of(evidence_dir, subscriptions, _SHAPING_MODULES, read)

    unreadable = ""
    bucketed = None  # ((publish part files, delivery part files), buckets) of evidence in the probe's layout
    if evidence_dir:
        paths = [_local_path(u) for u in publishes.inputFiles()], [_local_path(u) for u in deliveries.inputFiles()]
        count = buckets.layout_of(paths[0] + paths[1])
        bucketed = (paths, count) if count is not None else None
    kept = sources() if evidence_dir and keep else None
    found = kept.find() if kept is not None else None
    if found is not None:
        try:
            passed = _kept_pass(spark, found.parts, subscriptions, skew_us, chunk_rows, unproven)
            sentence = f"checks: read the sorted input an earlier check kept in {kept.directory} (no shuffle)"
            return _Passed(passed, found.names, lambda names: sentence, bucketed=bucketed)
        except Exception as err:  # noqa: BLE001 - damaged, or removed by a concurrent check: judge from the log
            unreadable = f"checks: the sorted input kept in {kept.directory} could not be read ({type(err).__name__}); "
    writing = kept.start(spark) if kept is not None else None
    how, names = "", None
    try:
        if bucketed is not None:  # judged bucket by bucket in place: no shuffle
            (pub_paths, del_paths), count = bucketed
            try:
                passed = _bucket_pass(spark, pub_paths, del_paths, count, subscriptions, skew_us, chunk_rows,
                                      unproven, writing)
                how = f"read the evidence's {count} buckets in place (no shuffle); "
                names = buckets.KeyNames(pub_paths, del_paths, buckets.Declared.of(subscriptions))
            except Exception as err:  # noqa: BLE001 - a file not where its layout says: judge with the shuffle pass
                unreadable += (f"{'' if unreadable else 'checks: '}the evidence's bucketed layout could not be read "
                               f"({_first_line(err)}); judged with the shuffle pass; ")
                bucketed = None
                if writing is not None:
                    writing.discard()
                    writing = kept.start(spark)
        if bucketed is None:
            passed = _one_pass(_unified(publishes, deliveries, subscriptions), subscriptions, skew_us, chunk_rows,
                               writing, unproven).toArrow()
    except BaseException:
        if writing is not None:
            writing.discard()
        raise
    said = unreadable or "checks: "
    if kept is None:
        if not evidence_dir:
            sentence = None
        elif not keep:  # nothing kept, as asked (and the warm-up's check): only a layout that could not be read
            sentence = unreadable.rstrip("; ") or None
        else:
            sentence = (f"{said}{how}nothing kept in {evidence_dir}: its part files could not be listed, or are not "
                        "the files checked")
        return _Passed(passed, names, lambda key_names: sentence, bucketed=bucketed)
    if writing is not None and sources() != kept:  # a part file came, went or changed while the pass read
        writing.discard()
        writing = None

    def finish(key_names: sorted_input.KeyNames) -> str:
        kept_bytes = writing.commit(key_names) if writing is not None else None
        if kept_bytes is None:
            return f"{said}{how}could not keep the sorted input in {kept.directory}: re-checks will judge the log again"
        size = f"{kept_bytes / 2**20:,.1f} MiB" if kept_bytes >= 2**20 else f"{kept_bytes / 2**10:,.0f} KiB"
        return f"{said}{how}kept the sorted input in {kept.directory} ({size}) for re-checks of this evidence"

    return _Passed(passed, names, finish, writing.discard if writing is not None else (lambda: None), bucketed)


# -- evidence ---------------------------------------------------------------------------------
def _key_names(
    publishes: DataFrame,
    deliveries: DataFrame,
    subscriptions: list[DeclaredSubscription],
    published_h: list[int],
    delivered_h: list[int],
) -> DataFrame:
    """(subscription, h, h2, key) of every key whose first hash is wanted: a read of the key columns
    of the publish log for keys that have publish rows (`published_h`), and of the delivery log for
    the others (`delivered_h`; usually none), hashing each row once (the second hash only for the
    rows that pass)."""
    spark = publishes.sparkSession
    pubs, dels = _declared(publishes.select("topic", "key"), deliveries.select("subscription", "key"), subscriptions)
    named = []
    for frame, wanted in ((pubs, published_h), (dels, delivered_h)):
        if not wanted:
            continue
        rows = frame.select("subscription", "sub_id", "key")
        if len(wanted) <= _NAMED_BY_LIST:
            literals = ", ".join(f"{x}L" for x in wanted)
            rows = rows.where(f"{_H} IN ({literals})")
        else:  # too many for a literal set in the plan
            wanted_frame = F.broadcast(spark.createDataFrame([(x,) for x in wanted], "h long"))
            rows = rows.withColumn("h", F.expr(_H)).join(wanted_frame, "h", "left_semi")
        named.append(rows.selectExpr("subscription", *_KEY_HASHES, "key"))
    return functools.reduce(DataFrame.unionByName, named).distinct()


def _rows_of_keys(publishes: DataFrame, deliveries: DataFrame, key_values: list) -> tuple[pa.Table, pa.Table]:
    """Every column of the rows of both logs whose key is among `key_values` (None: a null key), as Arrow: one
    job (a Spark job costs a fixed tenth of a second or so) of filtered scans, the names pushed to Parquet when they
    are few (it skips the row groups that hold none of them, by their statistics and dictionaries), else a
    semi-join with them."""
    named = [k for k in key_values if k is not None]
    names = None if len(named) <= _PUSHDOWN_KEYS else \
        F.broadcast(publishes.sparkSession.createDataFrame([(k,) for k in named], "key string"))

    def rows(frame: DataFrame, log: int) -> DataFrame:
        if names is None:
            keep = F.col("key").isin(named) if named else F.lit(False)
            found = frame.where((keep | F.col("key").isNull()) if None in key_values else keep)
        else:
            found = frame.join(names, "key", "left_semi").select(*frame.columns)
            if None in key_values:
                found = found.unionByName(frame.where(F.col("key").isNull()))
        return found.withColumn(_LOG, F.lit(log))

    both = rows(publishes, 0).unionByName(rows(deliveries, 1), allowMissingColumns=True).toArrow()
    return tuple(both.filter(pc.equal(both[_LOG], log)).select(frame.columns)
                 for log, frame in enumerate((publishes, deliveries)))


_LOG = "_pubsubguard_log"  # which log a row of `_rows_of_keys`' one read came from


def _named(
    publishes: DataFrame, deliveries: DataFrame, subscriptions: list[DeclaredSubscription], wanted: set,
    kept: "sorted_input.KeyNames | None",
) -> dict:
    """(subscription, h, h2) -> key name of the wanted key hashes ((h, whether the key has publish rows)):
    from the names kept with the sorted input the pass read when they cover them, else a read of the log."""
    if not wanted:
        return {}
    if kept is not None and kept.covers(wanted):
        return kept.of(wanted)
    published_h = sorted({h for h, published in wanted if published})
    delivered_h = sorted({h for h, published in wanted if not published})
    key_names = _key_names(publishes, deliveries, subscriptions, published_h, delivered_h)
    return {(r.subscription, r.h, r.h2): r.key for r in key_names.collect()}


def run_checks(
    publishes: DataFrame,
    deliveries: DataFrame,
    subscriptions: list[DeclaredSubscription],
    *,
    skew_us: int = DEFAULT_SKEW_US,
    chunk_rows: int = chunk.CHUNK_ROWS,
    evidence_dir=None,
    unproven: frozenset = frozenset(),
    keep: bool = True,
) -> CheckResults:
    """Check the evidence of one run against the declared subscriptions it probed.

    Pass only the subscriptions the probe exercised: every published message of a subscription's
    topic is expected on it. `chunk_rows` bounds the rows the pass judges at once (whole keys; the
    verdict does not depend on it). Runs the pass (one job; its findings and statistics come to the
    driver), a read of the key columns when there are findings or hot keys to name; `findings`, when
    collected, reads the evidence rows of the keys with findings. The findings are held on the
    driver (as the report holds them).

    `evidence_dir`: the local directory `publishes` and `deliveries` are read from, unfiltered. Evidence
    in the probe's bucketed layout is then judged bucket by bucket in place (`buckets`); other evidence
    has its sorted input kept there, or read from what an earlier check of the same files, subscriptions
    and code kept (`sorted_input`), unless not `keep`.

    `unproven`: subscriptions whose never-delivered messages no final read of the drain proved lost
    (`validation/probe/drain_clock.py`): no `lost` there; they stay unsettled.
    """
    names = tuple(sub.name for sub in subscriptions)
    # the pass: one job; it returns the findings, a few statistics rows per chunk and latency summaries
    judged = _judged(publishes, deliveries, subscriptions, skew_us, chunk_rows, evidence_dir, frozenset(unproven), keep)
    try:  # until the sorted input is kept or not (`finish`): a failure leaves nothing half-kept
        passed = judged.table
        is_finding = pc.is_valid(passed["kind"])
        is_plot = pc.is_valid(passed["series"])
        stats = aggregates.summarise(passed.select(aggregates.STATISTICS_COLUMNS).filter(
            pc.invert(pc.or_(is_finding, is_plot))), names)
        plot = aggregates.plot_aggregates(passed.select(aggregates.PLOT_COLUMNS).filter(is_plot))
        plot["latency"] = {name: cdf for name in names if (cdf := stats[name].pop("latency_cdf")) is not None}
        poison_published = {name: stats[name].pop("poison_published") for name in names}
        found = passed.filter(is_finding).select(list(_CORE_COLUMNS))
        # the names of the keys with findings and of the hottest keys: a read of the key columns (of
        # the publish log only, unless some of those keys were never published), or the names kept with
        # the sorted input the pass read
        coordinates = list(zip(*(found[n].to_pylist() for n in ("subscription", "h", "h2"))))
        wanted = set(zip(found["h"].to_pylist(), found["key_published"].to_pylist()))
        wanted |= {(h, published) for name in names for h, _, _, published in stats[name]["hottest"]}
        named = _named(publishes, deliveries, subscriptions, wanted, judged.names)
    except BaseException:
        judged.abandon()
        raise
    kept = judged.finish(sorted_input.KeyNames(wanted, named))
    found = found.append_column("key", pa.array([named.get(c) for c in coordinates], pa.string()))
    # the evidence: every column of the rows of the keys with findings, read by their names (no read without them)
    records = []
    if found.num_rows:
        key_values = pc.unique(found["key"]).to_pylist()
        rows = buckets.rows_of_keys(*judged.bucketed, key_values) if judged.bucketed is not None else None
        records = proof.records(found, *(rows or _rows_of_keys(publishes, deliveries, key_values)), subscriptions)
    for name in names:
        top = [(named.get((name, h, h2)), d) for h, h2, d, _ in stats[name].pop("hottest")]
        stats[name]["hottest_keys"] = [{"key": k, "deliveries": d} for k, d in sorted(top, key=lambda x: (-x[1], x[0] or ""))]
    return CheckResults(findings=records, stats=[{field: stats[n].get(field) for field in STATS_FIELDS} for n in names],
                        plot=plot, poison_published=poison_published, sorted_input=kept)
