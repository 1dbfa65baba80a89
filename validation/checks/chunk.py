"""The pass's input: the packed row (`INPUT_COLUMNS`) and its codes, what the pass needs of each subscription
(`SubscriptionConfig`), one chunk of whole keys as the arrays every guarantee reads (`Chunk`), and what a
guarantee's function returns (`Found`). The guarantees themselves are `kernel`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .scans import (
    Flagged, arrow_column, filled_ints, flagged_count, flagged_max, flagged_min, floats, ints, key_starts, seg_ids,
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


@dataclass(frozen=True)
class SubscriptionConfig:
    """What the pass needs of each declared subscription, indexed by `sub_id`."""

    names: tuple[str, ...]
    ordering: tuple[bool, ...]  # the declared model's names (pubsubguard.core.declared.Subscription)
    exactly_once: tuple[bool, ...]
    max_delivery_attempts: tuple[int | None, ...]  # None: no dead-letter policy
    # False where no final read proved what was never delivered lost (the drain was cut: `validation/probe/drain_clock.py`);
    # empty: every subscription's
    lost_proven: tuple[bool, ...] = ()


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
        att = self._unpack(table)
        self._declaration(config)
        self._boundaries()
        self._row_kinds()
        messages = len(self.message_start)
        self._per_message(att, messages)
        self._per_unit(messages)
        self._per_key()
        # per row: its (key, seq) was published by this run
        self.known = self.message_known[self.message]

    def _unpack(self, table: pa.Table) -> np.ndarray:
        """The input columns (INPUT_COLUMNS) as arrays; returns each row's attempt (a delivery's
        delivery_attempt, a dead-letter row's forwarded count)."""
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
        self.seq = floats(arrow_column(table, "seq"))
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
        return att

    def _declaration(self, config: SubscriptionConfig) -> None:
        """The declaration of each row's subscription."""
        self.ordering = np.array(config.ordering, bool)[self.sub]
        self.exactly_once = np.array(config.exactly_once, bool)[self.sub]
        self.lost_proven = np.array(config.lost_proven or (True,) * len(config.names), bool)[self.sub]
        max_attempts_of = np.array([np.nan if most is None else float(most) for most in config.max_delivery_attempts])
        self.max_delivery_attempts = max_attempts_of[self.sub]

    def _boundaries(self) -> None:
        """Where keys (subscription, key), messages (subscription, key, seq) and units start."""
        seq = self.seq
        self.first_of_key = key_starts(self.h, self.h2)
        self.first_of_message = first_of_message = message_starts(self.first_of_key, seq)
        self.message = seg_ids(first_of_message)
        self.message_start = message_start = np.flatnonzero(first_of_message)
        self.key_start = np.flatnonzero(self.first_of_key)
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

    def _row_kinds(self) -> None:
        """Each row's kind and, for deliveries, whether it was acked and when it stopped being outstanding."""
        t = self.t
        self.is_publish = self.row_kind == PUBLISH
        self.is_delivery = is_delivery = self.row_kind == DELIVERY
        self.is_dead_letter = self.row_kind == DEAD_LETTER
        self.acked = is_delivery & ((self.act == ACT_ACK) | (self.act == ACT_LATE_ACK)) & self.ok
        self.valid_ack = is_delivery & (self.act == ACT_ACK) & self.ok
        self.delivery_t = np.where(is_delivery, t, np.nan)
        self.delivery_end = np.where(is_delivery, self.end, np.nan)

    def _per_message(self, att: np.ndarray, messages: int) -> None:
        """Per message: whether it was published, its deliveries and dead-letter rows, when it settled."""
        t, ack_t = self.t, self.ack_t
        is_publish, is_delivery, is_dead_letter = self.is_publish, self.is_delivery, self.is_dead_letter

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
        self.message_settled_by_ack = per_message_min(ack_t, self.acked)
        self.message_last_end = deliveries.max(self.end)
        # the latest delivery of a message: its last delivery row by time (rows are sorted by time within
        # each of its message ids; the last row breaks a tie, as the sort by row kind did)
        latest_t = deliveries.max(t)
        latest = deliveries.rows[t[deliveries.rows] == latest_t[self.message[deliveries.rows]]]  # ascending
        of = self.message[latest]
        last_of = np.ones(len(latest), bool)
        last_of[:-1] = of[1:] != of[:-1]
        self.message_last_delivery_acked = np.zeros(messages, bool)
        self.message_last_delivery_acked[of[last_of]] = self.valid_ack[latest[last_of]]

    def _per_unit(self, messages: int) -> None:
        """Per unit (one message id of a message) and the publish-side duplicates: per message with more than
        one delivered id, the first delivery of each id but the earliest-received one; then what settles a
        message, from both."""
        t, ack_t, is_delivery, message_start = self.t, self.ack_t, self.is_delivery, self.message_start
        units = len(self.unit_start)
        unit_message = self.message[self.unit_start]
        unit_delivery_rows = Flagged(is_delivery, self.unit, units)
        self.unit_deliveries = unit_deliveries = unit_delivery_rows.count()
        delivered = np.flatnonzero(unit_deliveries > 0)
        self.message_delivered_ids = np.bincount(unit_message[delivered], minlength=messages)
        self.message_most_deliveries_of_one_id = np.zeros(messages, np.int64)
        np.maximum.at(self.message_most_deliveries_of_one_id, unit_message[delivered], unit_deliveries[delivered])
        self.unit_first_valid_ack = unit_first_valid_ack = flagged_min(ack_t, self.valid_ack, self.unit, units)
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
        self.message_seq = self.seq[message_start]
        self.message_sub = self.sub[message_start]
        self.message_first_of_key = self.first_of_key[message_start]

    def _per_key(self) -> None:
        keys = len(self.key_start)
        self.key_deliveries = flagged_count(self.is_delivery, self.key, keys)
        self.key_has_dead_letter = flagged_count(self.is_dead_letter, self.key, keys) > 0
        self.key_published = flagged_count(self.is_publish, self.key, keys) > 0


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


def message_starts(first_of_key: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Rows that start a message (subscription, key, seq): a key's first row, or a seq (NaN = null)
    other than the previous row's."""
    starts = first_of_key.copy()
    starts[1:] |= ~((seq[1:] == seq[:-1]) | (np.isnan(seq[1:]) & np.isnan(seq[:-1])))
    return starts
