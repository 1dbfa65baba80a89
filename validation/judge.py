"""The checks' one pass over a partition: findings and statistics from rows sorted by message.

`validation/checks.py` shuffles the unified evidence rows once by (subscription, key), sorts them
within partitions by (key hashes, seq, foreign, time, row kind) and hands each partition to
`judge_partition` (Spark's `mapInArrow`). The definitions of the findings are in `checks.py`'s
docstring and `docs/checks.md`; this module is their only implementation.

Everything is vectorised with NumPy over a chunk of whole keys (a key never straddles two chunks,
so memory is bounded by the chunk size, not the partition, plus the partition's latencies: 8 bytes
per message). Conventions:
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
LATENCY_SAMPLES = 10_000  # per partition and subscription: percentiles within 1/10,000 of the rank
CHUNK_ROWS = 1 << 18

# Columns `judge_partition` reads (made by `checks._unified`). Spark's Arrow writer costs about as
# much per column as the rest of the pass, so the row is packed into six numbers:
#   h       xxhash64(sub_id, key)
#   meta    murmur3(sub_id, key) << 32 | (deadline_s + 1, 0 for none) << DEADLINE_SHIFT | sub_id << 5
#           | ok << 4 | act << 2 | rk; the two hashes (96 bits) are the key's identity in the pass.
#           ok: publish status ok, or ack/nack returned success with a time; act: ACT_*; rk: PUBLISH..
#   seq, t  sequence number; publish or receive time
#   ack_t   when the ack/nack was sent
#   att     a delivery's delivery_attempt; a dead-letter row's forwarded delivery count; a foreign
#           row's xxhash64(message_id) (to tell its finding's row from others at the same time)
INPUT_COLUMNS = ("h", "meta", "seq", "t", "ack_t", "att")
SUB_BITS, DEADLINE_SHIFT, DEADLINE_BITS = 12, 17, 15
MAX_SUBSCRIPTIONS, MAX_DEADLINE_S = 1 << SUB_BITS, (1 << DEADLINE_BITS) - 2

# Findings carry the coordinates of their row (h, h2, src = rk, seq, t; mh for a foreign row);
# `checks` joins them to the evidence rows for the key, the message id and the proof. Hottest-key
# rows carry (h, h2).
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
        ("detail", pa.string()),
        ("ev_seqs", pa.list_(pa.int64())),
        ("t", pa.int64()),
        ("published", pa.int64()),
        ("delivered", pa.int64()),
        ("distinct_delivered", pa.int64()),
        ("acked", pa.int64()),
        ("dead_lettered", pa.int64()),
        ("latency_ms", pa.list_(pa.float64())),
        ("latency_w", pa.list_(pa.int64())),
        ("key_deliveries", pa.int64()),
        ("key_published", pa.bool_()),  # the key has publish rows: its name is in the publish log
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


_DOUBLING_UP_TO = 16  # segments at most this long: a doubling scan; longer: rank encoding


def _seg_cummax(v: np.ndarray, starts: np.ndarray, exclusive: bool = False) -> np.ndarray:
    """Running max of v (NaN = null) restarting at each start; exclusive: of the rows before."""
    n = len(v)
    if n == 0:
        return np.full(0, np.nan)
    idx = np.arange(n)
    pos = idx - np.maximum.accumulate(np.where(starts, idx, 0))  # position within the segment
    longest = int(pos.max()) + 1
    if longest <= _DOUBLING_UP_TO:
        # short segments (a message's rows): log2(longest) steps, each row taking the max of the
        # row d before it when that row is in its segment
        out = np.array(v, np.float64, copy=True)
        d = 1
        while d < longest:
            out[d:] = np.where(pos[d:] >= d, np.fmax(out[d:], out[:-d]), out[d:])
            d *= 2
    else:
        out = np.full(n, np.nan)
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


def _seg_count(flags: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """True flags per segment; `starts` are the sorted first indices of the segments (0 first)."""
    if len(starts) == 0:
        return np.zeros(0, np.int64)
    c = np.cumsum(flags, dtype=np.int64)
    ends = np.append(starts[1:], len(flags)) - 1
    before = np.zeros(len(starts), np.int64)
    before[1:] = c[starts[1:] - 1]
    return c[ends] - before


def _seg_min(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Min of v per segment ignoring NaN (NaN when all are); as `_seg_count`'s starts."""
    if len(starts) == 0:
        return np.zeros(0)
    r = np.minimum.reduceat(np.where(np.isnan(v), np.inf, v), starts)  # faster than fmin.reduceat
    r[np.isinf(r)] = np.nan
    return r


def _seg_max(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return -_seg_min(-v, starts)


def _whole_segments(selected: np.ndarray):
    """An index (or slice, for all) of the selected elements, None for none. The selection is of
    whole segments (by subscription), so a scan over the selected elements sees whole segments."""
    if selected.all():
        return slice(None)
    rows = np.flatnonzero(selected)
    return rows if len(rows) else None


def _settle_prefix(settle_val, exists_m, mks, seq_m):
    """Per message of whole keys: the latest settle time of the key's earlier messages (settle
    prefix), and the seq that blocks -- the earliest of the latest-settled earlier messages."""
    prefix_settle = _seg_cummax(settle_val, mks, exclusive=True)
    key_first_msg = np.flatnonzero(mks)[_seg_ids(mks)]
    record = exists_m & (np.isnan(prefix_settle) | (settle_val > prefix_settle))
    last_record = np.maximum.accumulate(np.where(record, np.arange(len(mks)), -1))
    blocking_at = np.full(len(mks), -1)
    blocking_at[1:] = last_record[:-1]
    blocking_at[blocking_at < key_first_msg] = -1  # a record of an earlier key
    return prefix_settle, np.where(blocking_at >= 0, seq_m[np.maximum(blocking_at, 0)], np.nan)


def _arr(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


def _ints(table: pa.Table, name: str) -> np.ndarray:
    """A column without nulls."""
    return _arr(table, name).to_numpy(zero_copy_only=False)


def _floats(arr, safe: bool = True) -> np.ndarray:
    return np.asarray(pc.cast(arr, pa.float64(), safe=safe).to_numpy(zero_copy_only=False), dtype=np.float64)


def _key_starts(h: np.ndarray, h2: np.ndarray) -> np.ndarray:
    """Rows whose (subscription, key) differs from the previous row's (rows are sorted by it)."""
    starts = np.ones(len(h), bool)
    starts[1:] = (h[1:] != h[:-1]) | (h2[1:] != h2[:-1])
    return starts


# -- the pass ---------------------------------------------------------------------------------------
def judge_partition(
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
        cut = _last_key_start(table)
        if cut == 0:  # one key so far: keep reading
            continue
        yield from _judge_chunk(table.slice(0, cut), config, skew_us, (partition << 40) + offset, latencies)
        offset += cut
        rest = table.slice(cut)
        pending, pending_rows = rest.to_batches(), rest.num_rows
    if pending_rows:
        table = pa.Table.from_batches(pending).combine_chunks()
        yield from _judge_chunk(table, config, skew_us, (partition << 40) + offset, latencies)
    if latencies:
        out: dict[str, list] = {f.name: [] for f in OUTPUT_SCHEMA}
        for s, parts in sorted(latencies.items()):
            values, weights = latency_summary(np.concatenate(parts))
            _append_row(out, subscription=config.names[s], latency_ms=values, latency_w=weights)
        yield pa.RecordBatch.from_pydict(out, schema=OUTPUT_SCHEMA)


def _last_key_start(table: pa.Table) -> int:
    """Index of the first row of the table's last (subscription, key); 0 if it holds one key."""
    return int(np.flatnonzero(_key_starts(_ints(table, "h"), _ints(table, "meta") >> 32))[-1])


def _judge_chunk(
    table: pa.Table, config: SubscriptionConfig, skew_us: int, row_id_base: int, latencies: dict[int, list[np.ndarray]]
) -> Iterator[pa.RecordBatch]:
    n = table.num_rows
    h, meta = _ints(table, "h"), _ints(table, "meta").astype(np.int64)
    h2 = meta >> 32
    sub = (meta >> 5) & (MAX_SUBSCRIPTIONS - 1)
    ok, act, rk = ((meta >> 4) & 1).astype(bool), (meta >> 2) & 3, meta & 3
    deadline_s = ((meta >> DEADLINE_SHIFT) & ((1 << DEADLINE_BITS) - 1)).astype(np.float64) - 1
    deadline_s[deadline_s < 0] = np.nan
    seq = _floats(_arr(table, "seq"))
    t = _ints(table, "t").astype(np.float64)
    ack_t = _floats(_arr(table, "ack_t"))
    att_raw = _arr(table, "att")
    att = _floats(att_raw, safe=False)  # a foreign row's message hash is not used as a number
    # end(d): when a delivery stopped being outstanding
    deadline_end = t + deadline_s * 1e6
    end = np.where(((act == ACT_ACK) | (act == ACT_NACK)) & ok, np.fmin(ack_t, deadline_end), deadline_end)

    ordered_of = np.array(config.ordered, bool)
    eod_of = np.array(config.eod, bool)
    max_att_of = np.array([np.nan if m is None else float(m) for m in config.max_attempts])

    # -- boundaries: keys (subscription, key) and messages (subscription, key, seq)
    ks = _key_starts(h, h2)
    ms = ks.copy()
    ms[1:] |= ~((seq[1:] == seq[:-1]) | (np.isnan(seq[1:]) & np.isnan(seq[:-1])))
    mid = _seg_ids(ms)
    mstart = np.flatnonzero(ms)
    kstart = np.flatnonzero(ks)
    kid = _seg_ids(ks)

    is_pub, is_del, is_dl = rk == PUBLISH, rk == DELIVERY, rk == DEAD_LETTER
    acked = is_del & ((act == ACT_ACK) | (act == ACT_LATE_ACK)) & ok
    valid_ack = is_del & (act == ACT_ACK) & ok
    del_t = np.where(is_del, t, np.nan)
    del_end = np.where(is_del, end, np.nan)

    def count_m(flags):
        return _seg_count(flags, mstart)

    # -- per message
    known_m = count_m(is_pub) > 0
    pub_ok_m = count_m(is_pub & ok) > 0
    pub_t_m = _seg_min(np.where(is_pub & ok, t, np.nan), mstart)
    n_del_m = count_m(is_del)
    n_dl_m = count_m(is_dl)
    first_recv_m = _seg_min(del_t, mstart)
    max_attempt_m = _seg_max(np.where(is_del, att, np.nan), mstart)
    max_dl_count_m = _seg_max(np.where(is_dl, att, np.nan), mstart)
    dl_t_m = _seg_min(np.where(is_dl, t, np.nan), mstart)
    settle_ack_m = _seg_min(np.where(acked, ack_t, np.nan), mstart)
    first_valid_ack_m = _seg_min(np.where(valid_ack, ack_t, np.nan), mstart)
    last_end_m = _seg_max(del_end, mstart)
    # the latest delivery of a message is its last delivery row (rows are sorted by time within it)
    last_del = np.maximum.reduceat(np.where(is_del, np.arange(n), -1), mstart) if n else np.zeros(0, np.int64)
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
    seq_m = seq[mstart]
    # the settle prefix and blocking seq only matter for ordering: computed on ordered keys only
    prefix_settle_m, blocking_seq_m = np.full(len(mstart), np.nan), np.full(len(mstart), np.nan)
    om = _whole_segments(ordered_of[sub[mstart]])
    if om is not None:
        prefix_settle_m[om], blocking_seq_m[om] = _settle_prefix(settle_val[om], exists_m[om], mks[om], seq_m[om])
    key_deliveries_k = _seg_count(is_del, kstart)
    key_has_dl_k = _seg_count(is_dl, kstart) > 0
    key_published_k = _seg_count(is_pub, kstart) > 0

    # -- per row
    known = known_m[mid]
    first = ms
    # when the earlier deliveries ended, when the next was received: for exactly-once rows only
    prev_end, next_recv = np.full(n, np.nan), np.full(n, np.nan)
    er = _whole_segments(eod_of[sub])
    if er is not None:
        prev_end[er] = _seg_cummax(del_end[er], ms[er], exclusive=True)
        next_recv[er] = _seg_cummin_after(del_t[er], ms[er])
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
    out: dict[str, list] = {f.name: [] for f in OUTPUT_SCHEMA}
    if found:
        ooo_info = {int(r): (int(f), p) for r, f, p in zip(ooo_rows, ooo_form, ooo_prev_seq)}
        for kind, rows in found:
            for r in rows.tolist():
                m = mid[r]
                detail, ev, severity = _describe(
                    kind, r, m, t, seq, ack_t, end, next_recv, prev_end, act, rk,
                    pub_t_m, first_valid_ack_m, dl_t_m, attempts, early_attempts, max_att,
                    ooo_info.get(r), blocking_seq_m, key_has_dl_k[kid[r]],
                )
                _append_finding(
                    out, names[sub[r]], kind, row_id_base + r, severity, (int(h[r]), int(h2[r]), int(rk[r]), bool(key_published_k[kid[r]])),
                    att_raw[r].as_py() if rk[r] == FOREIGN else None, seq[r], detail, ev, t[r],
                )

    # -- statistics: per subscription of this chunk one row, plus its top keys (counted with
    # bincount over subscription ids: linear in the rows whatever the number of subscriptions)
    n_subs = len(names)
    sub_m = sub[mstart]

    def per_sub(ids):
        return np.bincount(ids, minlength=n_subs)

    published = per_sub(sub[is_pub & ok])
    delivered = per_sub(sub[is_del])
    distinct = per_sub(sub_m[known_m & (n_del_m > 0)])
    acked_n = per_sub(sub_m[known_m & ~np.isnan(settle_ack_m)])
    dead_lettered = per_sub(sub_m[known_m & (n_dl_m > 0)])
    timed = np.flatnonzero(known_m & ~np.isnan(pub_t_m) & ~np.isnan(first_recv_m))
    timed = timed[np.argsort(sub_m[timed], kind="stable")]
    lat_subs, lat_begin = np.unique(sub_m[timed], return_index=True)
    latency_of = dict(zip(lat_subs.tolist(), np.split((first_recv_m[timed] - pub_t_m[timed]) / 1000.0, lat_begin[1:])))
    # this chunk's top keys per subscription by (deliveries, h, h2): the order `summarise` merges them in
    key_sub, kh, kh2 = sub[kstart], h[kstart], h2[kstart]
    hot = np.flatnonzero(key_deliveries_k > 0)
    hot = hot[np.lexsort((kh2[hot], kh[hot], key_deliveries_k[hot], key_sub[hot]))]
    hot_end = np.searchsorted(key_sub[hot], np.arange(n_subs), side="right")
    for s in np.flatnonzero(per_sub(sub)).tolist():
        _append_stats(
            out, names[s], published=int(published[s]), delivered=int(delivered[s]), distinct=int(distinct[s]),
            acked=int(acked_n[s]), dead_lettered=int(dead_lettered[s]),
        )
        latencies.setdefault(s, []).append(latency_of.get(s, np.zeros(0)))
        begin = hot_end[s - 1] if s else 0
        for k in hot[max(begin, hot_end[s] - HOTTEST_KEYS) : hot_end[s]][::-1].tolist():
            _append_hot_key(out, names[s], (int(kh[k]), int(kh2[k]), bool(key_published_k[k])), int(key_deliveries_k[k]))
    yield pa.RecordBatch.from_pydict(out, schema=OUTPUT_SCHEMA)


def _describe(kind, r, m, t, seq, ack_t, end, next_recv, prev_end, act, rk, pub_t_m, fva_m, dl_t_m,
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
            detail = f"ack sent at {i(ack_t[r])} after the deadline ({i(end[r])}) returned success"
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


def _append_finding(out, subscription, kind, row_id, severity, coordinates, mh, seq, detail, ev, t):
    h, h2, src, published = coordinates
    _append_row(
        out, subscription=subscription, kind=kind, row_id=row_id, severity=severity, h=h, h2=h2, src=src, mh=mh,
        key_published=published,
        seq=None if np.isnan(seq) else int(seq), detail=detail, ev_seqs=ev, t=int(t),
    )


def _append_stats(out, subscription, *, published, delivered, distinct, acked, dead_lettered):
    _append_row(
        out, subscription=subscription, published=published, delivered=delivered, distinct_delivered=distinct,
        acked=acked, dead_lettered=dead_lettered,
    )


def _append_row(out, **values):
    row = dict.fromkeys(out)
    row.update(values)
    for name, value in row.items():
        out[name].append(value)


def latency_summary(values: np.ndarray, samples: int = LATENCY_SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """A mergeable summary of a partition's latencies: sorted values, each standing for `weight` values.

    Up to `samples` values are kept as they are; above, every step-th value of the sorted array
    stands for the step values up to it (the last for the remainder). Merged by weight, a
    nearest-rank percentile of all partitions is off by at most one step per partition:
    N / samples + partitions ranks of N.
    """
    v = np.sort(values)
    n = len(v)
    if n <= samples:
        return v, np.ones(n, np.int64)
    step = -(-n // samples)
    idx = np.arange(step - 1, n, step)
    weights = np.full(len(idx), step, np.int64)
    if idx[-1] != n - 1:
        idx = np.append(idx, n - 1)
        weights = np.append(weights, n - step * (len(idx) - 1))
    return v[idx], weights


def _append_hot_key(out, subscription, key, deliveries):
    h, h2, published = key
    _append_row(out, subscription=subscription, h=h, h2=h2, key_published=published, key_deliveries=deliveries)


def merged_percentiles(summaries: list[tuple[np.ndarray, np.ndarray]], ps) -> list[float | None]:
    """Nearest-rank percentiles of the values the partitions' `latency_summary`s stand for."""
    if not summaries:
        return [None for _ in ps]
    v = np.concatenate([s[0] for s in summaries])
    w = np.concatenate([s[1] for s in summaries])
    if len(v) == 0:
        return [None for _ in ps]
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(w[order])
    return [float(v[np.argmax(cum >= p * cum[-1])]) for p in ps]


def summarise(rows: pa.Table, names: tuple[str, ...], percentiles=(0.5, 0.95, 0.99)) -> dict[str, dict]:
    """The statistics rows of the pass (all partitions; no findings), merged per subscription:
    counts summed, latency percentiles from the partitions' summaries, and `hottest`, the top keys
    as (h, h2, deliveries, key_published) by (deliveries, h, h2) -- a deterministic pick among
    ties -- unnamed."""
    counts = ("published", "delivered", "distinct_delivered", "acked", "dead_lettered")
    merged = {name: {**dict.fromkeys(counts, 0), "hot": [], "latency": []} for name in names}
    for row in rows.select(["subscription", *counts, "h", "h2", "key_deliveries", "key_published"]).to_pylist():
        s = merged[row["subscription"]]
        if row["key_deliveries"] is not None:
            s["hot"].append((row["key_deliveries"], row["h"], row["h2"], row["key_published"]))
        elif row["published"] is not None:
            for n in counts:
                s[n] += row[n]
    lat = rows.filter(pc.is_valid(rows["latency_ms"]))
    for sub, values, weights in zip(*(lat[n].to_pylist() for n in ("subscription", "latency_ms", "latency_w"))):
        merged[sub]["latency"].append((np.asarray(values, np.float64), np.asarray(weights, np.int64)))
    stats = {}
    for name, s in merged.items():
        delivered, distinct = s["delivered"], s["distinct_delivered"]
        stats[name] = {
            "subscription": name,
            **{n: s[n] for n in counts},
            "redeliveries": delivered - distinct,
            "redelivery_rate": (delivered - distinct) / delivered if delivered else None,
            **{f"latency_p{round(q * 100)}_ms": v for q, v in zip(percentiles, merged_percentiles(s["latency"], percentiles))},
            "hottest": [(h, h2, d, p) for d, h, h2, p in sorted(s["hot"], reverse=True)[:HOTTEST_KEYS]],
        }
    return stats
