"""The checks' one pass over a partition: findings and statistics from rows sorted by message.

`validation/checks.py` shuffles the unified evidence rows once by (subscription, key), sorts them
within partitions by (subscription, key, seq, foreign, time, row kind) and hands each partition to
`judge_partition` (Spark's `mapInArrow`). The definitions of the findings are in `checks.py`'s
docstring and `docs/checks.md`; this module is their only implementation.

Everything is vectorised with NumPy over a chunk of whole keys (a key never straddles two chunks,
so memory is bounded by the chunk size, not the partition). Conventions:
- nullable numbers are float64 with NaN for null (microsecond timestamps stay exact below 2**53);
  `np.fmin`/`np.fmax` ignore NaN as SQL's min/max/least/greatest ignore null, and a comparison
  with NaN is false as a SQL comparison with null is not true;
- "message" arrays (one element per (subscription, key, seq)) are indexed by `mid`, the message
  of each row; "key" flags mark the first row or message of each (subscription, key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from validation.evidence import FINDING_KINDS

PUBLISH, DELIVERY, DEAD_LETTER, FOREIGN = 0, 1, 2, 3
ACT_OTHER, ACT_ACK, ACT_LATE_ACK, ACT_NACK = 0, 1, 2, 3
INF = float(2**62)  # "never settled"
HOTTEST_KEYS = 5
CHUNK_ROWS = 1 << 18

# Columns `judge_partition` reads, in `checks._unified`'s order.
INPUT_COLUMNS = ("sub_id", "key", "seq", "rk", "t", "ok", "act", "ack_t", "deadline_us", "attempt", "dl_count", "message_id")

OUTPUT_SCHEMA = (
    "subscription string, kind string, row_id long, severity string, key string, seq long, message_id string, "
    "detail string, ev_seqs array<long>, t long, published long, delivered long, distinct_delivered long, "
    "acked long, dead_lettered long, latency_ms array<double>, key_deliveries long"
)
_ARROW_SCHEMA = pa.schema(
    [
        ("subscription", pa.string()),
        ("kind", pa.string()),
        ("row_id", pa.int64()),
        ("severity", pa.string()),
        ("key", pa.string()),
        ("seq", pa.int64()),
        ("message_id", pa.string()),
        ("detail", pa.string()),
        ("ev_seqs", pa.list_(pa.int64())),
        ("t", pa.int64()),
        ("published", pa.int64()),
        ("delivered", pa.int64()),
        ("distinct_delivered", pa.int64()),
        ("acked", pa.int64()),
        ("dead_lettered", pa.int64()),
        ("latency_ms", pa.list_(pa.float64())),
        ("key_deliveries", pa.int64()),
    ]
)


@dataclass(frozen=True)
class SubscriptionConfig:
    """What the pass needs of each declared subscription, indexed by `sub_id`."""

    names: tuple[str, ...]
    ordered: tuple[bool, ...]
    eod: tuple[bool, ...]
    max_attempts: tuple[int | None, ...]


# -- segmented scans ----------------------------------------------------------------------------
def _seg_ids(starts: np.ndarray) -> np.ndarray:
    return np.cumsum(starts) - 1


def _seg_cummax(v: np.ndarray, starts: np.ndarray, exclusive: bool = False) -> np.ndarray:
    """Running max of v (NaN = null) restarting at each start; exclusive: of the rows before."""
    n = len(v)
    out = np.full(n, np.nan)
    if n == 0:
        return out
    finite = ~np.isnan(v)
    uniq, inv = np.unique(v[finite], return_inverse=True)
    rank = np.zeros(n, np.int64)
    rank[finite] = inv + 1  # 0: null
    base = _seg_ids(starts).astype(np.int64) * (len(uniq) + 1)
    # a segment's codes all exceed every earlier segment's, so the running max restarts at each start
    r = np.maximum.accumulate(base + rank) - base
    have = r > 0
    out[have] = uniq[r[have] - 1]
    if exclusive:
        shifted = np.full(n, np.nan)
        shifted[1:] = out[:-1]
        shifted[starts] = np.nan
        return shifted
    return out


def _seg_cummin_after(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Min of v over the rows after each row in its segment (NaN when none)."""
    n = len(v)
    ends = np.zeros(n, bool)
    if n:
        ends[:-1] = starts[1:]
        ends[-1] = True
    return -_seg_cummax(-v[::-1], ends[::-1], exclusive=True)[::-1]


def _arr(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


def _ints(table: pa.Table, name: str) -> np.ndarray:
    """A column without nulls."""
    return _arr(table, name).to_numpy(zero_copy_only=False)


def _floats(arr) -> np.ndarray:
    return np.asarray(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _bools(arr) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _same_as_previous(arr) -> np.ndarray:
    """Element i (i >= 1): row i equals row i-1, nulls equal to nulls."""
    n = len(arr)
    if n < 2:
        return np.zeros(max(n - 1, 0), bool)
    a, b = arr.slice(1), arr.slice(0, n - 1)
    eq = _bools(pc.equal(a, b))
    both_null = _bools(pc.and_(pc.is_null(a), pc.is_null(b)))
    return eq | both_null


# -- the pass ---------------------------------------------------------------------------------------
def judge_partition(batches: Iterator[pa.RecordBatch], config: SubscriptionConfig, skew_us: int, partition: int):
    """Findings and statistics rows (OUTPUT_SCHEMA) of one sorted partition, chunk by chunk."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    offset = 0  # rows of this partition already judged: row ids are partition << 40 | row
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows < CHUNK_ROWS:
            continue
        table = pa.Table.from_batches(pending).combine_chunks()
        cut = _last_key_start(table)
        if cut == 0:  # one key so far: keep reading
            continue
        yield from _judge_chunk(table.slice(0, cut), config, skew_us, (partition << 40) + offset)
        offset += cut
        rest = table.slice(cut)
        pending, pending_rows = rest.to_batches(), rest.num_rows
    if pending_rows:
        table = pa.Table.from_batches(pending).combine_chunks()
        yield from _judge_chunk(table, config, skew_us, (partition << 40) + offset)


def _last_key_start(table: pa.Table) -> int:
    """Index of the first row of the table's last (subscription, key); 0 if it holds one key."""
    sub = _arr(table, "sub_id").to_numpy(zero_copy_only=False)
    same = _same_as_previous(_arr(table, "key")) & (sub[1:] == sub[:-1])
    starts = np.flatnonzero(~same)  # element i is row i + 1
    return int(starts[-1]) + 1 if len(starts) else 0


def _judge_chunk(table: pa.Table, config: SubscriptionConfig, skew_us: int, row_id_base: int) -> Iterator[pa.RecordBatch]:
    n = table.num_rows
    sub = _ints(table, "sub_id").astype(np.int64)
    key = _arr(table, "key")
    seq = _floats(_arr(table, "seq"))
    rk = _ints(table, "rk")
    t = _ints(table, "t").astype(np.float64)
    ok = _bools(_arr(table, "ok"))
    act = _ints(table, "act")
    ack_t = _floats(_arr(table, "ack_t"))
    deadline = _floats(_arr(table, "deadline_us"))
    attempt = _floats(_arr(table, "attempt"))
    dl_count = _floats(_arr(table, "dl_count"))

    ordered_of = np.array(config.ordered, bool)
    eod_of = np.array(config.eod, bool)
    max_att_of = np.array([np.nan if m is None else float(m) for m in config.max_attempts])

    # -- boundaries: keys (subscription, key) and messages (subscription, key, seq)
    ks = np.ones(n, bool)
    ks[1:] = ~(_same_as_previous(key) & (sub[1:] == sub[:-1]))
    ms = ks.copy()
    ms[1:] |= ~((seq[1:] == seq[:-1]) | (np.isnan(seq[1:]) & np.isnan(seq[:-1])))
    mid = _seg_ids(ms)
    mstart = np.flatnonzero(ms)
    kstart = np.flatnonzero(ks)
    kid = _seg_ids(ks)

    is_pub, is_del, is_dl = rk == PUBLISH, rk == DELIVERY, rk == DEAD_LETTER
    acked = is_del & ((act == ACT_ACK) | (act == ACT_LATE_ACK)) & ok
    valid_ack = is_del & (act == ACT_ACK) & ok
    deadline_end = t + deadline
    end = np.where(((act == ACT_ACK) | (act == ACT_NACK)) & ok, np.fmin(ack_t, deadline_end), deadline_end)
    del_t = np.where(is_del, t, np.nan)
    del_end = np.where(is_del, end, np.nan)

    def by_msg(ufunc, values):
        return ufunc.reduceat(values, mstart) if n else values[:0]

    # -- per message
    known_m = by_msg(np.logical_or, is_pub)
    pub_ok_m = by_msg(np.logical_or, is_pub & ok)
    pub_t_m = by_msg(np.fmin, np.where(is_pub & ok, t, np.nan))
    n_del_m = by_msg(np.add, is_del.astype(np.int64))
    n_dl_m = by_msg(np.add, is_dl.astype(np.int64))
    first_recv_m = by_msg(np.fmin, del_t)
    max_attempt_m = by_msg(np.fmax, np.where(is_del, attempt, np.nan))
    max_dl_count_m = by_msg(np.fmax, np.where(is_dl, dl_count, np.nan))
    dl_t_m = by_msg(np.fmin, np.where(is_dl, t, np.nan))
    settle_ack_m = by_msg(np.fmin, np.where(acked, ack_t, np.nan))
    first_valid_ack_m = by_msg(np.fmin, np.where(valid_ack, ack_t, np.nan))
    last_end_m = by_msg(np.fmax, del_end)
    # the latest delivery of a message is its last delivery row (rows are sorted by time within it)
    last_del = by_msg(np.maximum, np.where(is_del, np.arange(n), -1))
    last_delivery_acked_m = np.where(last_del >= 0, valid_ack[np.maximum(last_del, 0)], False)

    exists_m = known_m & (pub_ok_m | (n_del_m > 0) | (n_dl_m > 0))
    settle_m = np.fmin(settle_ack_m, np.where(n_dl_m > 0, np.fmin(dl_t_m, last_end_m), np.nan))

    # -- per key, over its messages in seq order
    mks = ks[mstart]  # first message of a key
    counted = np.cumsum(exists_m)
    key_first_msg = np.flatnonzero(mks)
    before_key = (counted - exists_m)[key_first_msg][_seg_ids(mks)]
    idx_m = (counted - before_key).astype(np.float64)  # published-and-existing seqs <= this one
    settle_val = np.where(exists_m, np.where(np.isnan(settle_m), INF, settle_m), np.nan)
    prefix_settle_m = _seg_cummax(settle_val, mks, exclusive=True)
    # the seq that blocks: the earliest of the latest-settled earlier messages
    record = exists_m & (np.isnan(prefix_settle_m) | (settle_val > prefix_settle_m))
    last_record = np.maximum.accumulate(np.where(record, np.arange(len(mstart)), -1)) if len(mstart) else record
    blocking_at = np.full(len(mstart), -1)
    blocking_at[1:] = last_record[:-1]
    blocking_at[blocking_at < key_first_msg[_seg_ids(mks)]] = -1  # a record of an earlier key
    seq_m = seq[mstart]
    blocking_seq_m = np.where(blocking_at >= 0, seq_m[np.maximum(blocking_at, 0)], np.nan)
    key_deliveries_k = np.add.reduceat(is_del.astype(np.int64), kstart) if n else np.zeros(0, np.int64)
    key_has_dl_k = np.logical_or.reduceat(is_dl, kstart) if n else np.zeros(0, bool)

    # -- per row
    known = known_m[mid]
    first = ms
    prev_end = _seg_cummax(del_end, ms, exclusive=True)
    next_recv = _seg_cummin_after(del_t, ms)
    ordered = ordered_of[sub]
    eod = eod_of[sub]
    max_att = max_att_of[sub]

    found: list[tuple[str, np.ndarray]] = []  # (kind, row indices)

    def mark(kind, cond):
        rows = np.flatnonzero(cond)
        if len(rows):
            found.append((kind, rows))

    # completeness
    mark("lost", first & pub_ok_m[mid] & (n_del_m[mid] == 0) & (n_dl_m[mid] == 0))
    mark("unexpected", (rk == FOREIGN) | ((is_del | is_dl) & ~known))
    # exactly-once
    eod_del = eod & is_del
    fva = first_valid_ack_m[mid]
    mark("duplicate_after_ack", eod_del & (t > fva + skew_us))
    mark("duplicate_while_outstanding", eod_del & (t < prev_end - skew_us))
    accepted = eod_del & ((act == ACT_ACK) | (act == ACT_LATE_ACK)) & ok
    superseded = next_recv < ack_t - skew_us
    mark("stale_ack_accepted", accepted & ((act == ACT_LATE_ACK) | superseded))
    # ordering: this run's deliveries on ordered subscriptions, per key in receive order
    sel = np.flatnonzero(ordered & is_del & known)
    ooo_rows, ooo_form, ooo_prev_seq = np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0)
    if len(sel):
        o = sel[np.lexsort((seq[sel], t[sel], kid[sel]))]
        ko = kid[o]
        rstart = np.ones(len(o), bool)
        rstart[1:] = ko[1:] != ko[:-1]
        idx = idx_m[mid[o]]
        prev_idx = np.full(len(o), np.nan)
        prev_idx[1:] = idx[:-1]
        prev_idx[rstart] = np.nan
        prev_seq = np.full(len(o), np.nan)
        prev_seq[1:] = seq[o][:-1]
        prev_seq[rstart] = np.nan
        high_idx = _seg_cummax(idx, rstart, exclusive=True)
        no_prev = np.isnan(prev_idx)
        start = no_prev | (idx != prev_idx + 1)
        ps = prefix_settle_m[mid[o]]
        unsettled = ps > t[o] + skew_us
        forward = no_prev | (idx > prev_idx)
        skip = start & unsettled & forward
        regression = start & unsettled & ~forward
        rewind = start & ~unsettled & (idx > prev_idx + 1) & (prev_idx < high_idx)
        form = np.where(skip, 1, np.where(regression, 2, np.where(rewind, 3, 0))).astype(np.int8)
        hit = form > 0
        ooo_rows, ooo_form, ooo_prev_seq = o[hit], form[hit], prev_seq[hit]
        if len(ooo_rows):
            found.append(("out_of_order", ooo_rows))
    # dead-lettering
    dl = first & ~np.isnan(max_att) & known
    attempts = np.maximum(n_del_m, np.nan_to_num(max_attempt_m, nan=0.0))[mid]
    n_dl = n_dl_m[mid]
    mark("dead_letter_missing", dl & (n_dl == 0) & np.isnan(settle_ack_m[mid]) & (attempts >= max_att))
    mark("dead_letter_after_ack", dl & (n_dl > 0) & last_delivery_acked_m[mid])
    early_attempts = np.maximum(attempts, np.nan_to_num(max_dl_count_m, nan=0.0)[mid])
    mark("dead_letter_early", dl & (n_dl > 0) & (early_attempts < max_att))
    mark("delivery_attempts_exceeded", dl & (attempts > max_att))

    # -- finding rows
    names = config.names
    out: dict[str, list] = {f.name: [] for f in _ARROW_SCHEMA}
    if found:
        message_ids = _arr(table, "message_id")
        ooo_info = {int(r): (int(f), p) for r, f, p in zip(ooo_rows, ooo_form, ooo_prev_seq)}
        for kind, rows in found:
            for r in rows.tolist():
                m = mid[r]
                detail, ev, severity = _describe(
                    kind, r, m, t, seq, ack_t, deadline_end, next_recv, prev_end, act, rk,
                    pub_t_m, first_valid_ack_m, dl_t_m, attempts, early_attempts, max_att,
                    ooo_info.get(r), blocking_seq_m, key_has_dl_k[kid[r]],
                )
                _append_finding(
                    out, names[sub[r]], kind, row_id_base + r, severity, key[r].as_py(), seq[r],
                    message_ids[r].as_py(), detail, ev, t[r],
                )

    # -- statistics: per subscription of this chunk one row, plus its hottest-key candidates
    known_first = ms & known
    latency_row = known_first & ~np.isnan(pub_t_m[mid]) & ~np.isnan(first_recv_m[mid])
    latency = (first_recv_m[mid] - pub_t_m[mid]) / 1000.0
    key_sub = sub[kstart]
    for s in np.unique(sub).tolist():
        in_sub = sub == s
        _append_stats(
            out,
            names[s],
            published=int(np.count_nonzero(in_sub & is_pub & ok)),
            delivered=int(np.count_nonzero(in_sub & is_del)),
            distinct=int(np.count_nonzero(in_sub & known_first & (n_del_m[mid] > 0))),
            acked=int(np.count_nonzero(in_sub & known_first & ~np.isnan(settle_ack_m[mid]))),
            dead_lettered=int(np.count_nonzero(in_sub & known_first & (n_dl_m[mid] > 0))),
            latency=latency[in_sub & latency_row],
        )
        # hottest keys: every key that can be among the top 5 (ties on the count included)
        counts = np.where((key_sub == s) & (key_deliveries_k > 0), key_deliveries_k, 0)
        if counts.any():
            floor = max(np.sort(counts)[-min(HOTTEST_KEYS, len(counts))], 1)
            # top by (deliveries, key), as Spark's max_by over struct(deliveries, key) merges them
            hot = sorted(
                ((int(counts[k]), key[int(kstart[k])].as_py()) for k in np.flatnonzero(counts >= floor).tolist()),
                reverse=True,
            )[:HOTTEST_KEYS]
            for deliveries, name in hot:
                _append_hot_key(out, names[s], name, deliveries)
    yield pa.RecordBatch.from_pydict(out, schema=_ARROW_SCHEMA)


def _describe(kind, r, m, t, seq, ack_t, deadline_end, next_recv, prev_end, act, rk, pub_t_m, fva_m, dl_t_m,
              attempts, early_attempts, max_att, ooo, blocking_seq_m, key_has_dl):
    """detail, evidence seqs and severity of one finding at row r (message m)."""
    severity = FINDING_KINDS[kind][1]
    ev = [int(seq[r])] if not np.isnan(seq[r]) else []
    i = int
    if kind == "lost":
        detail = f"published at {i(pub_t_m[m])} (status ok) and never delivered nor dead-lettered"
    elif kind == "unexpected":
        if rk[r] == FOREIGN:
            detail = f"received at {i(t[r])} a message without this run's probe attributes (another run, or not a probe message)"
        else:
            detail = f"received at {i(t[r])} a message (key, seq) this run never published"
    elif kind == "duplicate_after_ack":
        detail = (
            f"delivered again at {i(t[r])}, {(t[r] - fva_m[m]) / 1e6:.3f} s after a successful ack at {i(fva_m[m])}"
        )
    elif kind == "duplicate_while_outstanding":
        detail = (
            f"delivered again at {i(t[r])} while an earlier delivery was outstanding until {i(prev_end[r])} "
            "(no nack, deadline not passed)"
        )
    elif kind == "stale_ack_accepted":
        if act[r] == ACT_LATE_ACK:
            detail = f"ack sent at {i(ack_t[r])} after the deadline ({i(deadline_end[r])}) returned success"
        else:
            detail = (
                f"ack sent at {i(ack_t[r])} returned success although a later delivery at {i(next_recv[r])} "
                "superseded its ack id"
            )
    elif kind == "out_of_order":
        form, prev_seq = ooo
        name = {1: "skip", 2: "regression", 3: "rewind_without_replay"}[form]
        blocking = blocking_seq_m[m]
        if form == 3:
            detail = (
                f"rewind_without_replay: seq {i(seq[r])} received at {i(t[r])} right after seq {i(prev_seq)}, "
                "below the highest seq delivered so far: the rewind stopped replaying"
            )
            third = prev_seq + 1
        else:
            after = "(none)" if np.isnan(prev_seq) else str(i(prev_seq))
            blocked = "?" if np.isnan(blocking) else str(i(blocking))
            detail = f"{name}: seq {i(seq[r])} received at {i(t[r])} started a run after seq {after} while seq {blocked} was not settled"
            third = blocking
        ev += [i(x) for x in (prev_seq, third) if not np.isnan(x)]
        if not np.isnan(max_att[r]) and key_has_dl:
            detail += "; advisory: the key has a dead-lettered message and order is best effort for those"
            severity = "advisory"
    elif kind == "dead_letter_missing":
        detail = (
            f"{i(attempts[r])} delivery attempts, never acked, not forwarded to the dead-letter topic (max {i(max_att[r])})"
        )
    elif kind == "dead_letter_after_ack":
        detail = f"forwarded at {i(dl_t_m[m])} although its last delivery was acked with success"
    elif kind == "dead_letter_early":
        detail = (
            f"forwarded at {i(dl_t_m[m])} after {i(early_attempts[r])} delivery attempts, fewer than the declared "
            f"{i(max_att[r])}"
        )
    elif kind == "delivery_attempts_exceeded":
        detail = f"{i(attempts[r])} delivery attempts, more than the declared {i(max_att[r])} (best effort)"
    else:  # pragma: no cover - every kind above is marked by the pass
        raise AssertionError(kind)
    return detail, ev, severity


def _append_finding(out, subscription, kind, row_id, severity, key, seq, message_id, detail, ev, t):
    row = dict.fromkeys(out)
    row.update(
        subscription=subscription, kind=kind, row_id=row_id, severity=severity, key=key,
        seq=None if np.isnan(seq) else int(seq), message_id=message_id, detail=detail, ev_seqs=ev, t=int(t),
    )
    for name, value in row.items():
        out[name].append(value)


def _append_stats(out, subscription, *, published, delivered, distinct, acked, dead_lettered, latency):
    row = dict.fromkeys(out)
    row.update(
        subscription=subscription, published=published, delivered=delivered, distinct_delivered=distinct,
        acked=acked, dead_lettered=dead_lettered, latency_ms=latency,
    )
    for name, value in row.items():
        out[name].append(value)


def _append_hot_key(out, subscription, key, deliveries):
    row = dict.fromkeys(out)
    row.update(subscription=subscription, key=key, key_deliveries=deliveries)
    for name, value in row.items():
        out[name].append(value)
