"""The checks' one pass over a partition: findings and statistics from rows sorted by message.

The pass over a chunk of sorted evidence: the chunk's arrays (`Chunk`), one function per guarantee, and the
statistics and plot rows it gathers on the way. Its plumbing (Arrow columns as NumPy arrays, segmented
scans) is `pubsubguard.validation.checks.scans`; the driver's merge of its statistics and plot rows (percentiles,
hottest keys, the timeline) is `pubsubguard.validation.checks.aggregates`.

`validation/checks/run.py` shuffles the unified evidence rows once by (subscription, key), sorts them
within partitions by (key hashes, seq, foreign, time, row kind) and hands each partition to
`check_partition` (Spark's `mapInArrow`). The definitions of the findings are in `checks.py`'s
docstring and `docs/checks.md`; this module is their only implementation.

Shaped as a composed checker (Jepsen's `checker/compose`, Elle's analysis apart from rendering):
`Chunk` computes the per-row, per-message and per-key arrays of a chunk once; then one function per
guarantee (`completeness`, `exactly_once`, `ordering`, `dead_letter`, composed by `GUARANTEE_CHECKS` as
the table of guarantees, `validation/checks/guarantees.py`, names them) returns `Found` records: the rows that
raise a finding kind and the facts each finding states (form, seqs, attempts, times). The pass writes
those facts as columns (`FINDING_FACTS`); sentences are rendered from them by `pubsubguard.validation.report.document.describe`, not here.

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

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .aggregates import CHUNK_TIMELINE_BINS, HOTTEST_KEYS, TIMELINE_SERIES, latency_summary, shift_for
from .findings import FINDING_KINDS
from .guarantees import GUARANTEES, check_table
from .scans import (
    Flagged,
    arrow_column,
    filled_ints,
    flagged_count,
    flagged_max,
    flagged_min,
    floats,
    ints,
    key_starts,
    nullable_ints,
    seg_cummax,
    seg_cummin_after,
    seg_ids,
    settle_prefix,
    whole_segments,
)

PUBLISH, DELIVERY, DEAD_LETTER, FOREIGN = 0, 1, 2, 3
ACT_OTHER, ACT_ACK, ACT_LATE_ACK, ACT_NACK = 0, 1, 2, 3
EXT_NONE, EXT_EXPIRE, EXT_CRASH = 0, 1, 2  # an ACT_OTHER delivery's action (packed in `att`)
INF = float(2**62)  # "never settled"
# rows judged at once (whole keys): 2**16 keeps a chunk's arrays (~0.5 MiB each) in the CPU's caches;
# 2**18 took ~35-45% more CPU in the NumPy pass (a 2.2M-row partition of the 10M-row benchmark log:
# 0.50-0.52 s vs 0.77-0.94 s; 2**15 0.55 s, 2**14 0.60 s)
CHUNK_ROWS = 1 << 16

# Columns `check_partition` reads (made by `checks._unified`). Spark's Arrow writer costs about as
# much per column as the rest of the pass, so the row is packed into six numbers:
#   h       xxhash64(sub_id, key)
#   meta    murmur3(sub_id, key) << 32 | (deadline_s + 1, 0 for none) << DEADLINE_SHIFT | sub_id << 5
#           | ok << 4 | act << 2 | row kind; the two hashes (96 bits) are the key's identity in the
#           pass. ok: publish status ok, or ack/nack returned success with a time; act: ACT_*; row
#           kind: PUBLISH..FOREIGN
#   seq, t  sequence number; publish or receive time
#   ack_t   when the ack/nack was sent
#   att     a publish's (message id hash + 1) << ID_SHIFT (0: failed, no id) | poison flag (1); a delivery's (message id hash + 1) << ID_SHIFT |
#           (delivery_attempt + 1, 0 for none) << 2 | what the subscriber did beyond act (EXT_*: expire,
#           crash; the report's timeline tells them apart) -- the message id hash (ID_BITS of
#           xxhash64(message_id)) tells a publish-side duplicate (the same key and seq under a second
#           message id: a retried publish) from a redelivery (the same message id); a dead-letter row's
#           forwarded delivery count; a foreign row's xxhash64(message_id) (to tell its finding's row
#           from others at the same time). In the kept sorted input (`sorted_input`) an id's rank among
#           its message's ids stands for its hash (`with_id_ranks`)
INPUT_COLUMNS = ("h", "meta", "seq", "t", "ack_t", "att")
SUB_BITS, DEADLINE_SHIFT, DEADLINE_BITS = 12, 17, 15
ID_SHIFT, ID_BITS = 24, 38  # a delivery's message id hash in `att`: bits 24..62 (the attempt below it)
MAX_SUBSCRIPTIONS, MAX_DEADLINE_S = 1 << SUB_BITS, (1 << DEADLINE_BITS) - 2

# What a finding states besides its kind, subscription, seq and form (null where it does not apply):
#   previous_seq          out_of_order: the seq delivered just before, on the key (none: the first)
#   blocking_seq          out_of_order skip/regression: the earliest seq not settled at that time
#   attempts              dead-letter kinds: delivery attempts seen (see checks' docstring)
#   max_attempts          dead-letter kinds: the declared max_delivery_attempts
#   published_us          lost: the first successful publish
#   received_us           the finding's delivery (or dead-letter) row was received
#   acked_us              duplicate_after_ack: the earlier successful ack; stale_ack_accepted: the ack
#   outstanding_until_us  duplicate_while_outstanding: when the earlier delivery stopped being outstanding
#   deadline_us           stale_ack_accepted late_ack: when the delivery's deadline passed
#   superseded_us         stale_ack_accepted superseded: the later delivery that superseded the ack id
#   forwarded_us          dead_letter_after_ack, dead_letter_early: when it was forwarded
FINDING_FACTS = (
    "previous_seq", "blocking_seq", "attempts", "max_attempts", "published_us", "received_us", "acked_us",
    "outstanding_until_us", "deadline_us", "superseded_us", "forwarded_us",
)
# The forms a finding kind takes (`form`; kinds absent here have none).
FORMS = {
    "unexpected": ("foreign", "unpublished"),
    "stale_ack_accepted": ("late_ack", "superseded"),
    "out_of_order": ("skip", "regression", "rewind_without_replay"),
}

# Findings carry the coordinates of their row (h, h2, src = row kind, seq, t; mh for a foreign
# row); `checks` joins them to the evidence rows for the key, the message id and the proof.
# Hottest-key rows carry (h, h2).
OUTPUT_SCHEMA = pa.schema(
    [
        ("subscription", pa.string()),
        ("kind", pa.string()),
        ("row_id", pa.int64()),
        ("severity", pa.string()),
        ("h", pa.int64()),
        ("h2", pa.int32()),
        ("src", pa.int8()),
        ("mh", pa.int64()),
        ("seq", pa.int64()),
        ("form", pa.string()),
        *((name, pa.int64()) for name in FINDING_FACTS),
        ("ev_seqs", pa.list_(pa.int64())),
        ("t", pa.int64()),
        ("published", pa.int64()),
        ("delivered", pa.int64()),
        ("distinct_delivered", pa.int64()),
        ("acked", pa.int64()),
        ("dead_lettered", pa.int64()),
        ("settled", pa.int64()),
        ("publish_duplicates", pa.int64()),  # messages' extra message ids delivered (retried publishes)
        ("latency_ms", pa.list_(pa.float64())),
        ("latency_w", pa.list_(pa.int64())),
        ("key_deliveries", pa.int64()),
        ("key_published", pa.bool_()),  # the key has publish rows: its name is in the publish log
        ("poison_published", pa.int64()),  # poison publishes with status ok
        # the report's timeline (`plot_aggregates`): a series' counts per bin of 2**bin_shift µs
        # (bins numbered from the epoch), the chunk's extent, crash window and expiry deadlines
        ("series", pa.string()),
        ("bin_shift", pa.int64()),
        ("bins", pa.list_(pa.int64())),
        ("bin_counts", pa.list_(pa.int64())),
        ("first_publish_us", pa.int64()),
        ("first_ok_publish_us", pa.int64()),
        ("last_us", pa.int64()),
        ("crash_first_us", pa.int64()),
        ("crash_last_us", pa.int64()),
        ("expiry_deadline_s", pa.int64()),
    ]
)


@dataclass(frozen=True)
class SubscriptionConfig:
    """What the pass needs of each declared subscription, indexed by `sub_id`."""

    names: tuple[str, ...]
    ordered: tuple[bool, ...]
    exactly_once: tuple[bool, ...]
    max_attempts: tuple[int | None, ...]
    # False where no final read proved what was never delivered lost (the drain was cut: `validation/probe/drain_clock.py`);
    # empty: every subscription's
    lost_proven: tuple[bool, ...] = ()


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
            values, weights = latency_summary(np.concatenate(parts))
            _append_row(out, subscription=config.names[sub_id], latency_ms=values, latency_w=weights)
        yield pa.RecordBatch.from_pydict(out, schema=OUTPUT_SCHEMA)


def last_key_start(table: pa.Table) -> int:
    """Index of the first row of the table's last (subscription, key); 0 if it holds one key. Rows
    are sorted by (h, h2): binary searches, where comparing every row took ~18% of the NumPy pass."""
    h = ints(table, "h")
    lo = int(np.searchsorted(h, h[-1], side="left"))
    h2 = ints(table, "meta")[lo:] >> 32
    return lo + int(np.searchsorted(h2, h2[-1], side="left"))


class Chunk:
    """The arrays of one chunk of whole keys, computed once; every guarantee reads them.

    Per row (the chunk's rows, sorted): the unpacked input columns, the row's message and key, and
    its subscription's declaration. Per message (`message_*`, indexed by `message`): counts, first
    and last times, how it settled. Per key (`key_*`, indexed by `key`).
    """

    @classmethod
    def of(cls, table: pa.Table, config: SubscriptionConfig) -> "Chunk":
        """The chunk with each message's deliveries grouped by message id (each id's in time order, the
        message's other rows first) when some message's deliveries change id from one to the next (a
        publish-side duplicate): its rows sorted so, and its arrays computed again. Else the chunk as it is
        (no sort in the common case, and no second pass over the rows to find out: `ids_change`)."""
        chunk = cls(table, config)
        if not chunk.ids_change:
            return chunk
        return cls(table.take(np.lexsort((np.arange(chunk.rows), chunk.id_hash, chunk.message))), config)

    def __init__(self, table: pa.Table, config: SubscriptionConfig):
        self.rows = table.num_rows
        self.h = ints(table, "h")
        meta = ints(table, "meta").astype(np.int64)
        self.h2 = meta >> 32
        self.sub = (meta >> 5) & (MAX_SUBSCRIPTIONS - 1)
        self.ok = ((meta >> 4) & 1).astype(bool)
        self.act = (meta >> 2) & 3
        self.row_kind = meta & 3
        deadline_s = ((meta >> DEADLINE_SHIFT) & ((1 << DEADLINE_BITS) - 1)).astype(np.float64) - 1
        deadline_s[deadline_s < 0] = np.nan
        self.deadline_s = deadline_s
        self.seq = seq = floats(arrow_column(table, "seq"))
        self.t_us = ints(table, "t")
        self.t = t = self.t_us.astype(np.float64)
        self.ack_t = ack_t = floats(arrow_column(table, "ack_t"))
        self.att_raw = arrow_column(table, "att")
        att = floats(self.att_raw, safe=False)  # a foreign row's message hash is not used as a number
        # a delivery's att packs its delivery_attempt and the action beyond act (see INPUT_COLUMNS)
        delivery_att = filled_ints(self.att_raw)
        self.action_ext = np.where(self.row_kind == DELIVERY, delivery_att & 3, EXT_NONE)
        self.poison = (self.row_kind == PUBLISH) & ((delivery_att & 1) == 1)
        # a publish's message id (hashed as a delivery's; 0: not known, e.g. a failed publish)
        self.publish_id_hash = np.where((self.row_kind == PUBLISH) & self.ok, delivery_att >> ID_SHIFT, 0)
        # a delivery's message id (hashed; 0 for other rows): a second id of one (key, seq) is a publish-side duplicate
        self.id_hash = np.where(self.row_kind == DELIVERY, delivery_att >> ID_SHIFT, 0)
        attempt = ((delivery_att >> 2) & ((1 << (ID_SHIFT - 2)) - 1)).astype(np.float64) - 1
        att = np.where(self.row_kind == DELIVERY, np.where(attempt < 0, np.nan, attempt), att)
        # end: when a delivery stopped being outstanding
        self.deadline_end = t + deadline_s * 1e6
        acked_or_nacked = ((self.act == ACT_ACK) | (self.act == ACT_NACK)) & self.ok
        self.end = np.where(acked_or_nacked, np.fmin(ack_t, self.deadline_end), self.deadline_end)

        # the declaration of each row's subscription
        self.ordered = np.array(config.ordered, bool)[self.sub]
        self.exactly_once = np.array(config.exactly_once, bool)[self.sub]
        self.lost_proven = np.array(config.lost_proven or (True,) * len(config.names), bool)[self.sub]
        max_attempts_of = np.array([np.nan if most is None else float(most) for most in config.max_attempts])
        self.max_attempts = max_attempts_of[self.sub]

        # boundaries: keys (subscription, key) and messages (subscription, key, seq)
        self.first_of_key = key_starts(self.h, self.h2)
        self.first_of_message = first_of_message = _message_starts(self.first_of_key, seq)
        self.message = seg_ids(first_of_message)
        self.message_start = message_start = np.flatnonzero(first_of_message)
        self.key_start = key_start = np.flatnonzero(self.first_of_key)
        self.key = seg_ids(self.first_of_key)
        # units: the rows of one message id of a message (`Chunk.of` put each id's deliveries together): a
        # unit starts with the message and wherever a delivery's id differs from the message's delivery
        # before it. Redeliveries are deliveries of one unit; a second unit is a publish-side duplicate.
        is_delivery = self.row_kind == DELIVERY
        rows = np.arange(self.rows)
        previous_delivery = np.full(self.rows, -1)
        previous_delivery[1:] = np.maximum.accumulate(np.where(is_delivery, rows, -1))[:-1]
        in_message = previous_delivery >= message_start[self.message]
        id_changes = is_delivery & in_message & (self.id_hash != self.id_hash[np.maximum(previous_delivery, 0)])
        self.ids_change = bool(id_changes.any())
        self.first_of_unit = first_of_unit = first_of_message | id_changes
        self.unit = seg_ids(first_of_unit)
        self.unit_start = np.flatnonzero(first_of_unit)

        self.is_publish = is_publish = self.row_kind == PUBLISH
        self.is_delivery = is_delivery = self.row_kind == DELIVERY
        self.is_dead_letter = is_dead_letter = self.row_kind == DEAD_LETTER
        self.acked = acked = is_delivery & ((self.act == ACT_ACK) | (self.act == ACT_LATE_ACK)) & self.ok
        self.valid_ack = valid_ack = is_delivery & (self.act == ACT_ACK) & self.ok
        self.delivery_t = np.where(is_delivery, t, np.nan)
        self.delivery_end = np.where(is_delivery, self.end, np.nan)

        messages = len(message_start)

        def per_message_count(flags):
            return flagged_count(flags, self.message, messages)

        def per_message_min(v, flags):
            return flagged_min(v, flags, self.message, messages)

        def per_message_max(v, flags):
            return flagged_max(v, flags, self.message, messages)

        # per message
        self.message_known = per_message_count(is_publish) > 0
        self.published_ok = published_ok = Flagged(is_publish & self.ok, self.message, messages)
        self.message_published_ok = published_ok.count() > 0
        self.message_published_us = published_ok.min(t)
        # each message's delivery rows, found once for the reductions over them (here and in `completeness`)
        self.deliveries_of_message = deliveries = Flagged(is_delivery, self.message, messages)
        self.message_deliveries = deliveries.count()
        self.message_dead_letters = per_message_count(is_dead_letter)
        self.message_first_received = deliveries.min(t)
        self.message_max_attempt = deliveries.max(att)
        self.message_max_forwarded_count = per_message_max(att, is_dead_letter)
        self.message_forwarded_us = per_message_min(t, is_dead_letter)
        self.message_settled_by_ack = per_message_min(ack_t, acked)
        self.message_last_end = deliveries.max(self.end)
        # the latest delivery of a message: its last delivery row by time (rows are sorted by time within
        # each of its message ids; the last row breaks a tie, as the sort by row kind did)
        latest_t = deliveries.max(t)
        latest = deliveries.rows[t[deliveries.rows] == latest_t[self.message[deliveries.rows]]]  # ascending
        of = self.message[latest]
        last_of = np.ones(len(latest), bool)
        last_of[:-1] = of[1:] != of[:-1]
        self.message_last_delivery_acked = np.zeros(messages, bool)
        self.message_last_delivery_acked[of[last_of]] = valid_ack[latest[last_of]]

        # per unit (one message id of a message) and the publish-side duplicates: per message with more than
        # one delivered id, the first delivery of each id but the earliest-received one
        units = len(self.unit_start)
        unit_message = self.message[self.unit_start]
        unit_delivery_rows = Flagged(is_delivery, self.unit, units)
        self.unit_deliveries = unit_deliveries = unit_delivery_rows.count()
        delivered = np.flatnonzero(unit_deliveries > 0)
        self.message_delivered_ids = np.bincount(unit_message[delivered], minlength=messages)
        self.message_most_deliveries_of_one_id = np.zeros(messages, np.int64)
        np.maximum.at(self.message_most_deliveries_of_one_id, unit_message[delivered], unit_deliveries[delivered])
        self.unit_first_valid_ack = unit_first_valid_ack = flagged_min(ack_t, valid_ack, self.unit, units)
        # a message's first valid ack: the first of its units' (a message's units are consecutive)
        self.message_first_valid_ack = Flagged(~np.isnan(unit_first_valid_ack), unit_message, messages).min(
            unit_first_valid_ack)
        twice = delivered[self.message_delivered_ids[unit_message[delivered]] > 1]
        # a unit's first delivery row is its earliest received (sorted by time within each message id)
        unit_first_row = unit_delivery_rows.first_row()
        order = twice[np.lexsort((twice, t[unit_first_row[twice]], unit_message[twice]))]
        later = np.zeros(len(order), bool)
        later[1:] = unit_message[order][1:] == unit_message[order][:-1]
        self.publish_duplicate_rows = unit_first_row[order[later]]
        self.message_exists = self.message_known & (
            self.message_published_ok | (self.message_deliveries > 0) | (self.message_dead_letters > 0)
        )
        self.message_settled = np.fmin(
            self.message_settled_by_ack,
            np.where(self.message_dead_letters > 0, np.fmin(self.message_forwarded_us, self.message_last_end), np.nan),
        )
        self.message_seq = seq[message_start]
        self.message_sub = self.sub[message_start]
        self.message_first_of_key = self.first_of_key[message_start]

        # per key
        keys = len(key_start)
        self.key_deliveries = flagged_count(is_delivery, self.key, keys)
        self.key_has_dead_letter = flagged_count(is_dead_letter, self.key, keys) > 0
        self.key_published = flagged_count(is_publish, self.key, keys) > 0
        # per row: its (key, seq) was published by this run
        self.known = self.message_known[self.message]



@dataclass(frozen=True)
class Found:
    """The findings of one kind in a chunk: the rows that raise them and what each states.

    `facts` holds arrays aligned with `rows` (NaN: does not apply), named from FINDING_FACTS;
    `form` one of FORMS[kind] per finding; `advisory` marks findings downgraded from the kind's
    severity; `evidence_seqs` are seqs (NaN: none) whose rows prove the finding beside its own.
    """

    kind: str
    rows: np.ndarray
    facts: dict[str, np.ndarray] = field(default_factory=dict)
    form: np.ndarray | None = None
    advisory: np.ndarray | None = None
    evidence_seqs: tuple[np.ndarray, ...] = ()


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
    messages = len(chunk.message_start)
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
        if not chunk.ordered[r]:
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
    selected = np.flatnonzero(chunk.ordered & chunk.is_delivery & chunk.known)
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
    ordered_messages = whole_segments(chunk.ordered[chunk.message_start])
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
    advisory = ~np.isnan(chunk.max_attempts[rows]) & chunk.key_has_dead_letter[chunk.key[rows]]
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
    (with a dead-letter policy of max_attempts)."""
    message = chunk.message  # each row's message
    max_attempts = chunk.max_attempts
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


def _message_starts(first_of_key: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Rows that start a message (subscription, key, seq): a key's first row, or a seq (NaN = null)
    other than the previous row's."""
    starts = first_of_key.copy()
    starts[1:] |= ~((seq[1:] == seq[:-1]) | (np.isnan(seq[1:]) & np.isnan(seq[:-1])))
    return starts


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
    message = seg_ids(_message_starts(key_starts(ints(table, "h"), meta >> 32), floats(arrow_column(table, "seq"))))[rows]
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
                _append_findings(out, found, chunk, config.names, row_id_base)
    _append_statistics(out, chunk, config.names, latencies)
    _append_plot(out, chunk, config.names)
    return pa.RecordBatch.from_pydict(out, schema=OUTPUT_SCHEMA)


def _append_findings(out: dict[str, list], found: Found, chunk: Chunk, names: tuple[str, ...], row_id_base: int) -> None:
    """One output row per finding of `found`, with the coordinates of its row and its facts."""
    rows = found.rows
    count = len(rows)
    default_severity = FINDING_KINDS[found.kind][1]
    severity = (
        [default_severity] * count if found.advisory is None
        else np.where(found.advisory, "advisory", default_severity).tolist()
    )
    seqs = chunk.seq[rows]
    evidence = [seqs, *found.evidence_seqs]
    foreign = chunk.row_kind[rows] == FOREIGN
    message_hash = [chunk.att_raw[r].as_py() if is_foreign else None for r, is_foreign in zip(rows.tolist(), foreign.tolist())]
    columns = {
        "subscription": [names[sub_id] for sub_id in chunk.sub[rows].tolist()],
        "kind": [found.kind] * count,
        "row_id": (row_id_base + rows).tolist(),
        "severity": severity,
        "h": chunk.h[rows].tolist(),
        "h2": chunk.h2[rows].tolist(),
        "src": chunk.row_kind[rows].tolist(),
        "mh": message_hash,
        "key_published": chunk.key_published[chunk.key[rows]].tolist(),
        "seq": nullable_ints(seqs),
        "form": [None] * count if found.form is None else list(found.form),
        "ev_seqs": [[int(seq) for seq in per if not np.isnan(seq)] for per in zip(*(e.tolist() for e in evidence))],
        "t": chunk.t[rows].astype(np.int64).tolist(),
    }
    for name in FINDING_FACTS:
        columns[name] = nullable_ints(found.facts[name]) if name in found.facts else [None] * count
    for name, values in out.items():
        values.extend(columns.get(name, [None] * count))


def _append_statistics(out: dict[str, list], chunk: Chunk, names: tuple[str, ...], latencies: dict[int, list[np.ndarray]]) -> None:
    """Per subscription of this chunk one row, plus its top keys (counted with bincount over
    subscription ids: linear in the rows whatever the number of subscriptions); its latencies
    join `latencies`."""
    subscriptions = len(names)
    sub, message_sub, known = chunk.sub, chunk.message_sub, chunk.message_known

    def per_sub(ids):
        return np.bincount(ids, minlength=subscriptions)

    published_rows = chunk.published_ok.rows
    published = per_sub(sub[published_rows])
    poison = per_sub(sub[published_rows[chunk.poison[published_rows]]])
    delivered = per_sub(sub[chunk.deliveries_of_message.rows])
    distinct = per_sub(message_sub[known & (chunk.message_deliveries > 0)])
    acked = per_sub(message_sub[known & ~np.isnan(chunk.message_settled_by_ack)])
    dead_lettered = per_sub(message_sub[known & (chunk.message_dead_letters > 0)])
    settled = per_sub(message_sub[known & (~np.isnan(chunk.message_settled_by_ack) | (chunk.message_dead_letters > 0))])
    duplicates = chunk.publish_duplicate_rows[chunk.known[chunk.publish_duplicate_rows]]
    publish_duplicates = per_sub(sub[duplicates])
    timed = np.flatnonzero(known & ~np.isnan(chunk.message_published_us) & ~np.isnan(chunk.message_first_received))
    # grouped by subscription: a stable argsort of int16 (SUB_BITS fit) is a radix sort
    timed_sub = message_sub[timed].astype(np.int16)
    by_sub = np.argsort(timed_sub, kind="stable")
    timed, timed_sub = timed[by_sub], timed_sub[by_sub]
    latency_begin = np.flatnonzero(np.diff(timed_sub, prepend=np.int16(-1)))
    latency_subs = timed_sub[latency_begin]
    latency_ms = (chunk.message_first_received[timed] - chunk.message_published_us[timed]) / 1000.0
    latency_of = dict(zip(latency_subs.tolist(), np.split(latency_ms, latency_begin[1:])))
    # this chunk's top keys per subscription by (deliveries, h, h2): the order `summarise` merges them in
    key_start, key_deliveries = chunk.key_start, chunk.key_deliveries
    key_sub, key_h, key_h2 = sub[key_start], chunk.h[key_start], chunk.h2[key_start]
    hot = np.flatnonzero(key_deliveries > 0)
    hot = hot[np.lexsort((key_h2[hot], key_h[hot], key_deliveries[hot], key_sub[hot]))]
    hot_end = np.searchsorted(key_sub[hot], np.arange(subscriptions), side="right")
    for s in np.flatnonzero(per_sub(sub)).tolist():
        _append_row(
            out, subscription=names[s], published=int(published[s]), poison_published=int(poison[s]),
            delivered=int(delivered[s]),
            distinct_delivered=int(distinct[s]), acked=int(acked[s]), dead_lettered=int(dead_lettered[s]),
            settled=int(settled[s]), publish_duplicates=int(publish_duplicates[s]),
        )
        latencies.setdefault(s, []).append(latency_of.get(s, np.zeros(0)))
        begin = hot_end[s - 1] if s else 0
        for k in hot[max(begin, hot_end[s] - HOTTEST_KEYS) : hot_end[s]][::-1].tolist():
            _append_row(
                out, subscription=names[s], h=int(key_h[k]), h2=int(key_h2[k]),
                key_published=bool(chunk.key_published[k]), key_deliveries=int(key_deliveries[k]),
            )


def _append_row(out, **values):
    row = dict.fromkeys(out)
    row.update(values)
    for name, value in row.items():
        out[name].append(value)


# a delivery's timeline series by act * 3 + action_ext (TIMELINE_SERIES: 2 ack ... 7 none)
_SERIES_OF_DELIVERY = np.array([
    7, 4, 6,  # ACT_OTHER: none, expire, crash
    2, 2, 2,  # ACT_ACK
    5, 5, 5,  # ACT_LATE_ACK
    3, 3, 3,  # ACT_NACK
])


def _append_plot(out: dict[str, list], chunk: Chunk, names: tuple[str, ...]) -> None:
    """This chunk's timeline counts (one row per series), its extent and crash window (one row), and
    per subscription the longest deadline an expired or late-acked delivery was held to."""
    delivery, t = chunk.is_delivery, chunk.t_us
    published = chunk.is_publish & chunk.ok
    counted = np.flatnonzero(delivery | published)
    row_t = t[counted]
    row_series = np.where(delivery[counted], _SERIES_OF_DELIVERY[chunk.act[counted] * 3 + chunk.action_ext[counted]], 0)
    settle = np.fmin(chunk.message_settled_by_ack, chunk.message_forwarded_us)
    settle = settle[~np.isnan(settle)].astype(np.int64)
    if len(row_t) or len(settle):
        first = min(int(row_t.min()) if len(row_t) else 2**62, int(settle.min()) if len(settle) else 2**62)
        last = max(int(row_t.max()) if len(row_t) else -(2**62), int(settle.max()) if len(settle) else -(2**62))
        k = shift_for(first, last, CHUNK_TIMELINE_BINS)
        base, width = first >> k, (last >> k) - (first >> k) + 1
        size = len(TIMELINE_SERIES) * width
        counts = np.bincount(row_series * width + ((row_t >> k) - base), minlength=size)
        counts += np.bincount(width + ((settle >> k) - base), minlength=size)  # series 1: settled
        for code, per_bin in enumerate(counts.reshape(len(TIMELINE_SERIES), width)):
            used = np.flatnonzero(per_bin)
            if len(used):
                _append_row(out, series=TIMELINE_SERIES[code], bin_shift=k, bins=(used + base).tolist(),
                            bin_counts=per_bin[used].tolist())
    crash = t[delivery & (chunk.action_ext == EXT_CRASH)]
    # a where and a plain reduction: NumPy's masked reductions (`where=`) took 5x as long
    last = np.where(delivery | chunk.is_dead_letter, np.fmax(chunk.t, chunk.ack_t), -np.inf).max(initial=-np.inf)
    never = np.iinfo(np.int64).max
    first_publish, first_ok_publish = (int(np.where(rows, t, never).min(initial=never)) for rows in (chunk.is_publish, published))
    _append_row(
        out, series="extent",
        first_publish_us=first_publish if first_publish != never else None,
        first_ok_publish_us=first_ok_publish if first_ok_publish != never else None,
        last_us=int(last) if last != -np.inf else None,
        crash_first_us=int(crash.min()) if len(crash) else None,
        crash_last_us=int(crash.max()) if len(crash) else None,
    )
    held = delivery & ((chunk.action_ext == EXT_EXPIRE) | (chunk.act == ACT_LATE_ACK)) & ~np.isnan(chunk.deadline_s)
    if held.any():
        longest = np.full(len(names), -1.0)
        np.maximum.at(longest, chunk.sub[held], chunk.deadline_s[held])
        for s in np.flatnonzero(longest >= 0).tolist():
            _append_row(out, series="expiry", subscription=names[s], expiry_deadline_s=int(longest[s]))
