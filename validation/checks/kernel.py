"""The checks' one pass over a partition: findings and statistics from rows sorted by message.

The pass over a chunk of sorted evidence: the chunk's arrays (`Chunk`), one function per guarantee, and the
statistics and plot rows it gathers on the way. Its plumbing (Arrow columns as NumPy arrays, segmented
scans) is `pubsubguard.validation.checks.scans`; the driver's merge of its statistics and plot rows (percentiles,
hottest keys, the timeline) is `pubsubguard.validation.checks.aggregates`.

`validation/checks/run.py` shuffles the unified evidence rows once by (subscription, key), sorts them
within partitions by (key hashes, seq, foreign, time, row kind) and hands each partition to
`check_partition` (Spark's `mapInArrow`). The definitions of the findings are in `checks/run.py`'s
docstring and `docs/checks.md`; this module is their only implementation.

Shaped as a composed checker (Jepsen's `checker/compose`, Elle's analysis apart from rendering):
`Chunk` computes the per-row, per-message and per-key arrays of a chunk once; then one function per
guarantee (`completeness`, `exactly_once`, `ordering`, `dead_letter`, composed by `GUARANTEE_CHECKS` as
the table of guarantees, `validation/checks/guarantees.py`, names them) returns `Found` records: the rows that
raise a finding kind and the facts each finding states (form, seqs, attempts, times). The pass writes
those facts as columns (`FINDING_FACTS`); sentences are rendered from them by `pubsubguard.validation.checks.wording.describe`, not here.

Everything is vectorised with NumPy over a chunk of whole keys (a key never straddles two chunks,
so memory is bounded by the chunk size, not the partition, plus the partition's latencies: 8 bytes
per message). Conventions:
- nullable numbers are float64 with NaN for null (microsecond timestamps stay exact below 2**53);
  `np.fmin`/`np.fmax` ignore NaN as SQL's min/max/least/greatest ignore null, and a comparison
  with NaN is false as a SQL comparison with null is not true;
- "message" arrays (one element per (subscription, key, seq)) are indexed by `Chunk.message`, the
  message of each row; "first" flags mark the first row or message of each key or message.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .aggregates import latency_summary, summary_wire
from .chunk import (
    ACT_ACK, ACT_LATE_ACK, CHUNK_ROWS, Chunk, DELIVERY, FOREIGN, Found, ID_BITS, ID_SHIFT, INF, PUBLISH,
    SubscriptionConfig, message_starts,
)
from .findings import FORMS
from .guarantees import GUARANTEES, check_table
from .pass_rows import OUTPUT_SCHEMA, append_findings, append_plot, append_row, append_statistics
from .scans import (
    arrow_column, filled_ints, flagged_count, floats, ints, key_starts, seg_cummax, seg_cummin_after, seg_ids,
    settle_prefix, whole_segments,
)


# -- the pass ---------------------------------------------------------------------------------------
def check_partition(
    batches: Iterator[pa.RecordBatch], config: SubscriptionConfig, skew_us: int, partition: int, chunk_rows: int = CHUNK_ROWS
):
    """Findings and statistics rows (OUTPUT_SCHEMA) of one sorted partition, chunk by chunk."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    offset = 0  # rows of this partition already judged: row ids are partition << 40 | row
    latencies: dict[int, list[np.ndarray]] = {}  # sub_id -> the chunks' latencies, summarised at the end
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows < chunk_rows:
            continue
        table = pa.Table.from_batches(pending).combine_chunks()
        cut = last_key_start(table)
        if cut == 0:  # one key so far: keep reading
            continue
        yield _check_chunk(table.slice(0, cut), config, skew_us, (partition << 40) + offset, latencies)
        offset += cut
        rest = table.slice(cut)
        pending, pending_rows = rest.to_batches(), rest.num_rows
    if pending_rows:
        table = pa.Table.from_batches(pending).combine_chunks()
        yield _check_chunk(table, config, skew_us, (partition << 40) + offset, latencies)
    if latencies:
        out: dict[str, list] = {f.name: [] for f in OUTPUT_SCHEMA}
        for sub_id, parts in sorted(latencies.items()):
            sample, n, step = summary_wire(*latency_summary(np.concatenate(parts)))
            append_row(out, subscription=config.names[sub_id], latency_ms=sample, latency_n=n, latency_step=step)
        yield pa.RecordBatch.from_pydict(out, schema=OUTPUT_SCHEMA)


def last_key_start(table: pa.Table) -> int:
    """Index of the first row of the table's last (subscription, key); 0 if it holds one key. Rows
    are sorted by (h, h2): binary searches, where comparing every row took ~18% of the NumPy pass."""
    h = ints(table, "h")
    lo = int(np.searchsorted(h, h[-1], side="left"))
    h2 = ints(table, "meta")[lo:] >> 32
    return lo + int(np.searchsorted(h2, h2[-1], side="left"))


def completeness(chunk: Chunk, skew_us: int) -> list[Found]:
    """lost and unexpected (every subscription). Lost only where the drain's final read proved it
    (`SubscriptionConfig.lost_proven`), judged per message id: every id the target accepted
    (a successful publish row with its id: the probe's, or one only the fault layer saw, the id of a Publish
    whose reply it dropped) is delivered on the subscription (or its message dead-lettered: the dead-letter
    topic's copy has an id of its own), else `lost` on the row of that id; a message whose publish rows carry
    no id is lost when none of it was delivered."""
    message = chunk.message  # each row's message
    not_dead_lettered = chunk.message_dead_letters[message] == 0
    ided = chunk.publish_id_hash > 0
    # an id is delivered when a delivery of its message carries it: most messages are delivered under
    # one id (their deliveries' least and greatest ids are equal), compared with it; the others' ids are
    # looked up among (message, id hash) of their deliveries (ids are ID_BITS wide, so a message index
    # below 2**24 fits beside them)
    ids = chunk.id_hash.astype(np.float64)  # exact: below 2**53
    least = chunk.deliveries_of_message.min(ids)[message]
    one_id = least == chunk.deliveries_of_message.max(ids)[message]  # False: no delivery
    delivered_id = one_id & (chunk.publish_id_hash == least)
    several = ided & ~one_id & (chunk.message_deliveries[message] > 0)
    if several.any():
        of_several = chunk.is_delivery & np.isin(message, message[several])
        delivered = np.unique((message[of_several] << (ID_BITS + 1)) | chunk.id_hash[of_several])
        delivered_id[several] = np.isin((message[several] << (ID_BITS + 1)) | chunk.publish_id_hash[several], delivered)
    undelivered_id = ided & not_dead_lettered & ~delivered_id
    without_ids = flagged_count(ided, message, len(chunk.message_start)) == 0
    # only where a final read proved it (else: unsettled, which leaves completeness inconclusive)
    lost = np.flatnonzero(chunk.lost_proven & (undelivered_id | (
        chunk.first_of_message & without_ids[message] & chunk.message_published_ok[message]
        & (chunk.message_deliveries[message] == 0) & not_dead_lettered
    )))
    received = chunk.is_delivery | chunk.is_dead_letter
    unexpected = np.flatnonzero((chunk.row_kind == FOREIGN) | (received & ~chunk.known))
    # a (key, seq) this run published, delivered under a second message id: a retried publish (advisory)
    duplicate = chunk.publish_duplicate_rows[chunk.known[chunk.publish_duplicate_rows]]
    return [
        Found("lost", lost, {"published_us": np.where(ided[lost], chunk.t[lost], chunk.message_published_us[message[lost]])}),
        Found(
            "unexpected", unexpected, {"received_us": chunk.t[unexpected]},
            form=np.where(chunk.row_kind[unexpected] == FOREIGN, "foreign", "unpublished"),
        ),
        Found("publish_duplicate", duplicate, {"received_us": chunk.t[duplicate],
                                               "published_us": chunk.message_published_us[message[duplicate]]}),
    ]


def exactly_once(chunk: Chunk, skew_us: int) -> list[Found]:
    """duplicate_after_ack, duplicate_while_outstanding, stale_ack_accepted (where declared). Per message
    id ("exactly-once ... based on a Pub/Sub-defined unique message ID", docs/pubsub-facts.md): a delivery
    of a second message id of the same (key, seq) is a publish-side duplicate (`completeness`), not a
    redelivery."""
    n, t, ack_t = chunk.rows, chunk.t, chunk.ack_t
    # when the earlier deliveries of the message id ended, when the next was received: for exactly-once rows only
    previous_end, next_received = np.full(n, np.nan), np.full(n, np.nan)
    previous_received = np.full(n, np.nan)
    rows = whole_segments(chunk.exactly_once)
    if rows is not None:
        previous_end[rows] = seg_cummax(chunk.delivery_end[rows], chunk.first_of_unit[rows], exclusive=True)
        next_received[rows] = seg_cummin_after(chunk.delivery_t[rows], chunk.first_of_unit[rows])
        previous_received[rows] = seg_cummax(chunk.delivery_t[rows], chunk.first_of_unit[rows], exclusive=True)
    deliveries = chunk.exactly_once & chunk.is_delivery
    first_valid_ack = chunk.unit_first_valid_ack[chunk.unit]
    after_ack = np.flatnonzero(deliveries & (t > first_valid_ack + skew_us))
    while_outstanding = np.flatnonzero(deliveries & (t < previous_end - skew_us))
    if len(while_outstanding):
        while_outstanding = while_outstanding[~_rewound(chunk, while_outstanding, previous_received, skew_us)]
    late = chunk.act == ACT_LATE_ACK
    accepted = deliveries & ((chunk.act == ACT_ACK) | late) & chunk.ok
    superseded = next_received < ack_t - skew_us
    stale = np.flatnonzero(accepted & (late | superseded))
    stale_late = late[stale]
    return [
        Found("duplicate_after_ack", after_ack, {"received_us": t[after_ack], "acked_us": first_valid_ack[after_ack]}),
        Found(
            "duplicate_while_outstanding", while_outstanding,
            {"received_us": t[while_outstanding], "outstanding_until_us": previous_end[while_outstanding]},
        ),
        Found(
            "stale_ack_accepted", stale,
            {
                "received_us": t[stale],
                "acked_us": ack_t[stale],
                "deadline_us": np.where(stale_late, chunk.end[stale], np.nan),
                "superseded_us": np.where(stale_late, np.nan, next_received[stale]),
            },
            form=np.where(stale_late, "late_ack", "superseded"),
        ),
    ]


def _rewound(chunk: Chunk, rows: np.ndarray, previous_received: np.ndarray, skew_us: int) -> np.ndarray:
    """Per given exactly-once delivery row (delivered again while an earlier delivery seemed outstanding):
    was every earlier delivery of it superseded by a rewind of its ordered key, or over, by then?

    "A redelivery of message n triggers redelivery of every later message of that key" (docs/pubsub-
    facts.md, Ordering): on an ordered subscription, a redelivery of an earlier seq of the key ends the
    outstanding deliveries of the later ones (e.g. those whose acks the target held back because acks must
    come in order). An earlier delivery therefore counts as outstanding only until its deadline, its
    settlement, or the first redelivery of an earlier seq of its key after it. Were that redelivery itself
    premature, it is the finding (on its own seq)."""
    t, seq, end = chunk.t, chunk.seq, chunk.delivery_end
    redelivery = chunk.is_delivery & ~np.isnan(previous_received)
    key_ends = np.append(chunk.key_start[1:], chunk.rows)
    out = np.zeros(len(rows), bool)
    for i, r in enumerate(rows):
        if not chunk.ordering[r]:
            continue
        k = chunk.key[r]
        lo, hi = chunk.key_start[k], key_ends[k]
        rewinds = t[lo:hi][redelivery[lo:hi] & (seq[lo:hi] < seq[r]) & (t[lo:hi] <= t[r] + skew_us)]
        first = chunk.unit_start[chunk.unit[r]]  # the earlier deliveries of its message id
        outstanding_until = -np.inf
        for e in range(first, r):
            if not chunk.is_delivery[e]:
                continue
            after = rewinds[rewinds > t[e]]
            outstanding_until = max(outstanding_until, min(end[e], after.min()) if len(after) else end[e])
        out[i] = t[r] >= outstanding_until - skew_us
    return out


_SKIP, _REGRESSION, _REWIND = 1, 2, 3  # out_of_order forms, in FORMS["out_of_order"] order


def ordering(chunk: Chunk, skew_us: int) -> list[Found]:
    """out_of_order (where declared): this run's deliveries on ordered subscriptions, per key in
    receive order, form runs; a run start must not pass a seq that was not settled."""
    selected = np.flatnonzero(chunk.ordering & chunk.is_delivery & chunk.known)
    if len(selected) == 0:
        return []
    seq, t, message = chunk.seq, chunk.t, chunk.message
    # the settle prefix and blocking seq of each message: on ordered keys only
    settle_time = np.where(
        chunk.message_exists, np.where(np.isnan(chunk.message_settled), INF, chunk.message_settled), np.nan
    )
    # the message's position among the key's published-and-existing messages (failed publishes leave no gap)
    counted = np.cumsum(chunk.message_exists)
    key_first_message = np.flatnonzero(chunk.message_first_of_key)
    before_key = (counted - chunk.message_exists)[key_first_message][seg_ids(chunk.message_first_of_key)]
    position_of_message = (counted - before_key).astype(np.float64)
    prefix_settled, blocking_seq = np.full(len(settle_time), np.nan), np.full(len(settle_time), np.nan)
    ordered_messages = whole_segments(chunk.ordering[chunk.message_start])
    if ordered_messages is not None:
        prefix_settled[ordered_messages], blocking_seq[ordered_messages] = settle_prefix(
            settle_time[ordered_messages], chunk.message_exists[ordered_messages],
            chunk.message_first_of_key[ordered_messages], chunk.message_seq[ordered_messages],
        )

    received = selected[_receive_order(chunk.key[selected], chunk.t_us[selected], seq[selected])]
    key_of = chunk.key[received]
    run_of_key = np.ones(len(received), bool)
    run_of_key[1:] = key_of[1:] != key_of[:-1]
    position = position_of_message[message[received]]
    previous_position = np.full(len(received), np.nan)
    previous_position[1:] = position[:-1]
    previous_position[run_of_key] = np.nan
    previous_seq = np.full(len(received), np.nan)
    previous_seq[1:] = seq[received][:-1]
    previous_seq[run_of_key] = np.nan
    high_water = seg_cummax(position, run_of_key, exclusive=True)
    first = np.isnan(previous_position)
    # a publish-side duplicate (another message id of the same message) right after it continues the run
    unit_of = chunk.unit[received]
    other_id = np.zeros(len(received), bool)
    other_id[1:] = (message[received][1:] == message[received][:-1]) & (unit_of[1:] != unit_of[:-1])
    other_id[run_of_key] = False
    starts_run = first | ((position != previous_position + 1) & ~other_id)
    unsettled = prefix_settled[message[received]] > t[received] + skew_us
    forward = first | (position > previous_position)
    skip = starts_run & unsettled & forward
    regression = starts_run & unsettled & ~forward
    rewind = starts_run & ~unsettled & (position > previous_position + 1) & (previous_position < high_water)
    form = np.where(skip, _SKIP, np.where(regression, _REGRESSION, np.where(rewind, _REWIND, 0)))
    hit = form > 0
    rows, form, previous = received[hit], form[hit], previous_seq[hit]
    blocking = np.where(form == _REWIND, np.nan, blocking_seq[message[rows]])
    # with a dead-letter policy, order is best effort for dead-lettered messages
    advisory = ~np.isnan(chunk.max_delivery_attempts[rows]) & chunk.key_has_dead_letter[chunk.key[rows]]
    return [
        Found(
            "out_of_order", rows, {"received_us": t[rows], "previous_seq": previous, "blocking_seq": blocking},
            form=np.array(FORMS["out_of_order"], object)[form - 1], advisory=advisory,
            evidence_seqs=(previous, np.where(form == _REWIND, previous + 1, blocking)),
        )
    ]


def _receive_order(key: np.ndarray, t_us: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The order of rows (given sorted by key, then seq) per key by receive time, then seq: one stable sort
    of the key and the time packed in an int64 (ties keep the given order: by seq), or, when they do not fit,
    the lexsort it stands for."""
    if len(key) == 0:
        return np.zeros(0, np.int64)
    low = int(t_us.min())
    time_bits = (int(t_us.max()) - low).bit_length()
    if int(key[-1]).bit_length() + time_bits <= 62:
        return np.argsort((key.astype(np.int64) << time_bits) | (t_us - low), kind="stable")
    return np.lexsort((seq, t_us, key))


def dead_letter(chunk: Chunk, skew_us: int) -> list[Found]:
    """dead_letter_missing, dead_letter_after_ack, dead_letter_early, delivery_attempts_exceeded
    (with a dead-letter policy of max_delivery_attempts; the findings state it as `max_attempts`)."""
    message = chunk.message  # each row's message
    max_attempts = chunk.max_delivery_attempts
    judged = chunk.first_of_message & ~np.isnan(max_attempts) & chunk.known
    # deliveries of one message id (a publish-side duplicate's are its own attempts)
    attempts = np.maximum(chunk.message_most_deliveries_of_one_id, np.nan_to_num(chunk.message_max_attempt, nan=0.0))[message]
    forwarded = chunk.message_dead_letters[message] > 0
    # dead_letter_early also counts the attempts the service forwarded with the message
    early_attempts = np.maximum(attempts, np.nan_to_num(chunk.message_max_forwarded_count, nan=0.0)[message])
    missing = np.flatnonzero(
        judged & ~forwarded & np.isnan(chunk.message_settled_by_ack[message]) & (attempts >= max_attempts)
    )
    after_ack = np.flatnonzero(judged & forwarded & chunk.message_last_delivery_acked[message])
    early = np.flatnonzero(judged & forwarded & (early_attempts < max_attempts))
    exceeded = np.flatnonzero(judged & (attempts > max_attempts))
    forwarded_us = chunk.message_forwarded_us[message]
    return [
        Found("dead_letter_missing", missing, {"attempts": attempts[missing], "max_attempts": max_attempts[missing]}),
        Found("dead_letter_after_ack", after_ack, {"forwarded_us": forwarded_us[after_ack]}),
        Found(
            "dead_letter_early", early,
            {"forwarded_us": forwarded_us[early], "attempts": early_attempts[early], "max_attempts": max_attempts[early]},
        ),
        Found(
            "delivery_attempts_exceeded", exceeded,
            {"attempts": attempts[exceeded], "max_attempts": max_attempts[exceeded]},
        ),
    ]


# the checker: one function per guarantee judged from the message rows, composed (every one runs on every
# chunk), as the table of guarantees names them (checked at import: an entry without its function fails here)
GUARANTEE_CHECKS: dict[str, Callable[[Chunk, int], list[Found]]] = check_table(GUARANTEES, globals())


def with_id_ranks(table: pa.Table) -> pa.Table:
    """The rows (whole keys, sorted as the pass sorts them) with each message id hash in `att` (of a
    delivery, or of a publish with status ok) replaced by the id's rank among the ids of its message:
    1, 2, ... in hash order. The pass compares ids only within a message (equal or not, and their
    order: `Chunk.of`, `Chunk`'s units, `completeness`), so it judges these rows as it
    judges the hashes: the kept sorted input (`sorted_input.tee`) holds them, a few bits a row where
    a hash takes ID_BITS that no compression shrinks."""
    meta = ints(table, "meta").astype(np.int64)
    kind = meta & 3
    raw = arrow_column(table, "att")
    att = filled_ints(raw)
    ided = ((kind == DELIVERY) | ((kind == PUBLISH) & (((meta >> 4) & 1) == 1))) & ((att >> ID_SHIFT) != 0)
    rows = np.flatnonzero(ided)
    if not len(rows):
        return table
    ids = att[rows] >> ID_SHIFT
    message = seg_ids(message_starts(key_starts(ints(table, "h"), meta >> 32), floats(arrow_column(table, "seq"))))[rows]
    first = np.ones(len(rows), bool)
    first[1:] = message[1:] != message[:-1]
    starts = np.flatnonzero(first)
    # most messages carry one id: rank 1; the others (publish-side duplicates) are ranked by a sort
    mixed = np.repeat(np.minimum.reduceat(ids, starts) != np.maximum.reduceat(ids, starts), np.diff(np.append(starts, len(rows))))
    rank = np.ones(len(rows), np.int64)
    if mixed.any():
        some = np.flatnonzero(mixed)
        order = some[np.lexsort((ids[some], message[some]))]
        new_message = np.ones(len(order), bool)
        new_message[1:] = message[order][1:] != message[order][:-1]
        new_id = new_message.copy()
        new_id[1:] |= ids[order][1:] != ids[order][:-1]
        distinct = np.cumsum(new_id)
        rank[order] = distinct - distinct[np.flatnonzero(new_message)][seg_ids(new_message)] + 1
    att[rows] = (rank << ID_SHIFT) | (att[rows] & ((1 << ID_SHIFT) - 1))
    i = table.schema.get_field_index("att")
    return table.set_column(i, table.schema.field(i), pc.if_else(pa.array(ided), pa.array(att, pa.int64()), raw))


def _check_chunk(
    table: pa.Table, config: SubscriptionConfig, skew_us: int, row_id_base: int, latencies: dict[int, list[np.ndarray]]
) -> pa.RecordBatch:
    chunk = Chunk.of(table, config)
    out: dict[str, list] = {f.name: [] for f in OUTPUT_SCHEMA}
    for check in GUARANTEE_CHECKS.values():
        for found in check(chunk, skew_us):
            if len(found.rows):
                append_findings(out, found, chunk, config.names, row_id_base)
    append_statistics(out, chunk, config.names, latencies)
    append_plot(out, chunk, config.names)
    return pa.RecordBatch.from_pydict(out, schema=OUTPUT_SCHEMA)
