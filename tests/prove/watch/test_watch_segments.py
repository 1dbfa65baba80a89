"""The judge's bookkeeping over every key of a call at once (validation/watch/segments.py, issue 65) must give each
key what the same operation on that key's rows alone gives. Each function is held here to a straightforward
per-key reference, on hostile inputs: keys with no rows, keys of one row, null seqs, equal times, many keys; and the
whole step (`judge.judge_bucket`) on a bucket of many keys is held to calls for each key alone, at the windows
Spark would have called it (new rows, or the watermark past its own timeout), equal timeouts included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubguard.validation.checks import chunk
from pubsubguard.validation.watch import judge, segments
from support.watch_judge import COLUMNS, CONFIG, HORIZON_US, FakeState, S

NULL = judge.NULL


def hostile(seed: int, keys: int) -> dict[str, np.ndarray]:
    """Rows of `keys` keys (seg 0..keys-1, contiguous): a third of the keys with no rows, some with one; small seqs
    (many repeats) and null seqs, every row kind, random ok and action bits, few distinct times (ties)."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([0, 0, 1, 2, 5, 12], size=keys)
    n = int(sizes.sum())
    seq = rng.integers(0, 6, n)
    seq[rng.random(n) < 0.1] = NULL
    meta = rng.integers(0, 4, n) | (rng.integers(0, 4, n) << 2) | (rng.integers(0, 2, n) << 4)
    return {"seg": np.repeat(np.arange(keys), sizes), "seq": seq.astype(np.int64), "meta": meta.astype(np.int64),
            "t": rng.integers(0, 4, n).astype(np.int64) * S}


def per_key(rows: dict[str, np.ndarray], keys: int):
    for j in range(keys):
        mine = rows["seg"] == j
        yield j, rows["seq"][mine], rows["meta"][mine], rows["t"][mine]


def ref_publish_times(seq, meta, t):
    starts: dict[int, int] = {}
    for s, m, at in zip(seq.tolist(), meta.tolist(), t.tolist()):
        if m & 3 == chunk.PUBLISH:
            starts[s] = min(starts.get(s, at), at)
    return sorted(starts.items())


def ref_message_times(seq, meta, t):
    starts = dict(ref_publish_times(seq, meta, t))
    for s, at in zip(seq.tolist(), t.tolist()):
        if s != NULL and s not in starts:
            starts[s] = at  # the first row of a message without a publish row
    return sorted(starts.items())


def ref_unsettled(seq, meta):
    published, settled = set(), set()
    for s, m in zip(seq.tolist(), meta.tolist()):
        kind, ok, act = m & 3, (m >> 4) & 1, (m >> 2) & 3
        if kind == chunk.PUBLISH and ok:
            published.add(s)
        if kind == chunk.DEAD_LETTER or (kind == chunk.DELIVERY and ok and act in (chunk.ACT_ACK, chunk.ACT_LATE_ACK)):
            settled.add(s)
    return len(published - settled)


def split(seg, *columns, keys: int):
    return {j: list(zip(*(c[seg == j].tolist() for c in columns))) for j in range(keys)}


@pytest.mark.parametrize("seed,keys", [(1, 1), (2, 3), (3, 40), (4, 700), (5, 0)])
def test_each_keys_message_times_publish_times_and_unsettled_are_its_own(seed, keys):
    rows = hostile(seed, keys)
    mseg, mseq, start = segments.message_times(rows["seg"], rows["seq"], rows["meta"], rows["t"])
    pseg, pseq, ptime = segments.publish_times(rows["seg"], rows["seq"], rows["meta"], rows["t"])
    unsettled = segments.unsettled(rows["seg"], rows["seq"], rows["meta"], keys)
    assert len(unsettled) == keys
    messages, published = split(mseg, mseq, start, keys=keys), split(pseg, pseq, ptime, keys=keys)
    for j, seq, meta, t in per_key(rows, keys):
        assert messages[j] == ref_message_times(seq, meta, t), j
        assert published[j] == ref_publish_times(seq, meta, t), j
        assert unsettled[j] == ref_unsettled(seq, meta), j


def test_a_messages_first_row_is_first_in_the_keys_order_not_by_time():
    # key 0: seq 3 delivered at 9 s then at 2 s, no publish row: it started at 9 s (its first row kept); key 1: two
    # publish rows of seq 3, the later first: the earliest; key 2: only a null-seq publish row, a message of its own
    seg = np.array([0, 0, 1, 1, 2])
    seq = np.array([3, 3, 3, 3, NULL])
    meta = np.array([chunk.DELIVERY, chunk.DELIVERY, chunk.PUBLISH, chunk.PUBLISH, chunk.PUBLISH])
    t = np.array([9, 2, 8, 4, 7]) * S
    assert [r.tolist() for r in segments.message_times(seg, seq, meta, t)] == \
        [[0, 1, 2], [3, 3, NULL], [9 * S, 4 * S, 7 * S]]


def test_pair_ids_are_equal_for_equal_pairs_only_and_keep_the_order():
    rng = np.random.default_rng(9)
    a = (rng.integers(0, 50, 500), rng.choice([NULL, -3, 0, 7, 2**40], 500))
    b = (rng.integers(0, 50, 300), rng.choice([NULL, -3, 0, 7, 2**40, 11], 300))
    (ia, ib), width = segments.pair_ids(a, b)
    pairs = list(zip(*a)) + list(zip(*b))
    ids = np.concatenate([ia, ib]).tolist()
    assert all((ids[i] == ids[j]) == (pairs[i] == pairs[j]) for i in range(0, 800, 7) for j in range(800))
    assert sorted(range(800), key=lambda i: (pairs[i], i)) == sorted(range(800), key=lambda i: (ids[i], i))
    assert all(i // width == p[0] for i, p in zip(ids, pairs))
    assert segments.pair_ids()[0] == []


@pytest.mark.parametrize("choices, segs", [
    ([-3, 0, 7, 11, 12], 50),            # a narrow range: numbered by offset, no sort
    ([0, 1, 2**40], 2**30),              # a narrow range whose segments' numbers would pass 2**62: ranked
    ([NULL, 5, 6], 3),                   # a null among them: ranked
])
def test_pair_ids_number_pairs_in_order_by_offset_or_by_rank(choices, segs):
    rng = np.random.default_rng(11)
    a = (rng.integers(0, segs, 400), rng.choice(choices, 400))
    b = (rng.integers(0, segs, 200), rng.choice(choices, 200))
    (ia, ib), width = segments.pair_ids(a, b)
    pairs = list(zip(*a)) + list(zip(*b))
    ids = np.concatenate([ia, ib]).tolist()
    assert all((ids[i] == ids[j]) == (pairs[i] == pairs[j]) for i in range(0, 600, 5) for j in range(600))
    assert sorted(range(600), key=lambda i: (pairs[i], i)) == sorted(range(600), key=lambda i: (ids[i], i))
    assert all(i // width == p[0] and 0 <= i < 2**62 for i, p in zip(ids, pairs))


def test_segment_max_and_min_leave_keys_without_values_as_they_were():
    seg = np.array([2, 0, 2, 2])
    values = np.array([5, -1, 9, NULL])
    assert segments.seg_max(seg, values, np.array([NULL, 3, 7])).tolist() == [-1, 3, 9]
    low, some = segments.seg_min(seg, values, 4)
    assert low[[0, 2]].tolist() == [-1, NULL] and some.tolist() == [True, False, True, False]
    assert segments.bounds(np.array([0, 0, 2]), 4).tolist() == [0, 2, 2, 3, 3]


# ---------------------------------------------------------------------------- the whole step, a bucket vs alone
def message(rng, name: str, h: int, seq: int, at: int) -> list[dict]:
    """One message of a key: published or not (a delivery without its publish row), delivered 0-3 times (acked
    or not), some deliveries far later than the horizon (late), some rows' times equal across keys."""
    h2 = h % 7 - 3
    base = {"key": name, "sub_id": 0, "h": h, "h2": h2, "seq": seq}
    rows = []
    if rng.random() < 0.85:
        rows.append({**base, "meta": (h2 << 32) | (1 << 4) | chunk.PUBLISH, "t": at, "ack_t": NULL,
                     "att": (seq + 1) << chunk.ID_SHIFT})
    for attempt in range(int(rng.integers(0, 4))):
        act = int(rng.choice([chunk.ACT_ACK, chunk.ACT_NACK, chunk.ACT_OTHER]))
        late = rng.random() < 0.1
        delivered = at + (int(3 * HORIZON_US) if late else int(rng.integers(0, 3)) * S)
        meta = (h2 << 32) | (11 << chunk.DEADLINE_SHIFT) | (1 << 4) | (act << 2) | chunk.DELIVERY
        rows.append({**base, "meta": meta, "t": delivered, "ack_t": delivered + 1000,
                     "att": ((seq + 1) << chunk.ID_SHIFT) | ((attempt + 1) << 2)})
    return rows


def windows(seed: int, keys: int) -> list[tuple[int, list[dict]]]:
    """(watermark ms, new rows) of each window: the keys' messages come over 8 windows, 5 s apart, each row in the
    window after its time; then windows with no rows until far past every horizon."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(keys):
        name, h = f"key-{k}", int(rng.integers(-2**40, 2**40)) * 6
        for seq in range(int(rng.choice([0, 1, 1, 3, 6]))):
            rows += message(rng, name, h, seq, int(rng.integers(0, 8)) * 5 * S)
    out = []
    for w in range(16):
        now = [r for r in rows if w * 5 * S <= r["t"] < (w + 1) * 5 * S] if w < 12 else []
        out.append((w * 5_000, now))
    return out + [(w * 5_000, []) for w in range(16, 20)]


def run(calls: list[tuple[int, list[dict]]]) -> tuple[dict, list[dict]]:
    """Spark's calls of one bucket over the windows: a window calls it when it has rows or its timeout passed."""
    state, said = FakeState(), []
    for watermark_ms, rows in calls:
        if not rows and (state.timeout_ms is None or state.timeout_ms >= watermark_ms):
            continue
        state = FakeState(state.value, watermark_ms)
        columns = ["key", "sub_id", "h", "h2", "meta", "seq", "t", "ack_t", "att"]
        frames = [pd.DataFrame(rows, columns=columns)] if rows else []
        for frame in judge.judge_bucket(CONFIG, (0,), iter(frames), state):
            said += [{**{c: None if isinstance(v, float) and v != v else v for c, v in r.items()},
                      "window": watermark_ms} for r in frame[COLUMNS].to_dict("records")]
    return (judge.decode(state.value) if state.exists else {}), said


@pytest.mark.parametrize("seed,keys", [(11, 1), (12, 9), (13, 60)])
def test_a_bucket_of_many_keys_judges_each_as_calls_for_it_alone(seed, keys):
    calls = windows(seed, keys)
    together, said = run(calls)
    assert {r["kind"] for r in said if r["rtype"] == "finding"} >= ({"lost", "late_delivery"} if keys > 50 else set())
    names = sorted({r["key"] for _, rows in calls for r in rows})
    for name in names:
        alone, alone_said = run([(w, [r for r in rows if r["key"] == name]) for w, rows in calls])
        assert [r for r in said if r["key"] == name] == alone_said, name
        for k, keep in alone.items():
            got = together[k]
            assert all(np.array_equal(got.rows[c], keep.rows[c]) for c in judge._ROWS), name
            assert (got.lost, got.emitted, got.decided_through, got.closed_through, got.timeout_ms) == \
                (keep.lost, keep.emitted, keep.decided_through, keep.closed_through, keep.timeout_ms), name


# ---------------------------------------------------------------------------- the sorts, against np.lexsort
@pytest.mark.parametrize("seed, wide", [(21, False), (22, True)])
def test_a_keys_first_row_by_seq_rank_and_time_is_lexsorts_first(seed, wide):
    """`_first` sorts (seg, seq, rank, tie) as two numbers, or as one when they fit: the same stable order as
    np.lexsort on the four, with null seqs, ties, and (wide) times far apart that leave the one-number sort."""
    rng = np.random.default_rng(seed)
    n = 3000
    seg = np.sort(rng.integers(0, 60, n))
    seq = rng.choice([NULL, 0, 1, 2, 9, 2**33], n)
    tie = rng.integers(0, 5, n) * (2**55 if wide else S) + (2**40 if wide else 1_700_000_000 * S)
    rank = rng.random(n) < 0.5
    for r in (None, rank):
        want = np.lexsort((tie, seq, seg) if r is None else (tie, r, seq, seg))
        assert segments._order(seg, seq, tie, r).tolist() == want.tolist()
    outer, inner = rng.integers(0, 2**40, n), rng.integers(0, 2**30, n)  # too wide for one number: lexsort
    assert segments.sort_order(outer, inner, 2**30).tolist() == np.lexsort((inner, outer)).tolist()
    outer = rng.integers(0, 30, n)
    assert segments.sort_order(outer, inner, 2**30).tolist() == np.lexsort((inner, outer)).tolist()


@pytest.mark.parametrize("seed, spread_us", [(31, 4 * S), (32, 2**59)])
def test_the_kernels_input_order_is_the_batch_checks_order(seed, spread_us):
    """`_kernel_order`: (h, h2, seq, foreign last, t, row kind), as the six-key np.lexsort gives it, for keys whose
    hashes collide in h or in h2, null seqs and equal times; `spread_us` past 2**58 takes the six-key path."""
    rng = np.random.default_rng(seed)
    key_h = np.array([5, 5, -7, 2**62, -(2**63), 0], np.int64)
    key_h2 = np.array([1, -1, 1, 0, 3, -(2**31)], np.int64)
    n = 4000
    seg = rng.integers(0, len(key_h), n)
    meta = (key_h2[seg] << 32) | rng.integers(0, 4, n)
    seq = rng.choice([NULL, 0, 1, 3, 2**35], n)
    t = 1_700_000_000 * S + rng.integers(0, 6, n) * (spread_us // 5)
    want = np.lexsort((meta & 3, t, (meta & 3) == chunk.FOREIGN, seq, meta >> 32, key_h[seg]))
    assert judge._kernel_order(key_h, key_h2, seg, meta, seq, t).tolist() == want.tolist()


@pytest.mark.parametrize("seqs", [[0, 1, 2, 3], [0, 2**40, 7], [NULL, 4, 5]])
def test_unsettled_counts_by_a_mask_or_by_sorting_alike(seqs):
    """Dense pair numbers are counted with a mask, sparse ones (seqs far apart) by sorting: each key's count is
    its own either way."""
    rng = np.random.default_rng(41)
    n, keys = 2000, 30
    rows = {"seg": np.sort(rng.integers(0, keys, n)), "seq": rng.choice(seqs, n).astype(np.int64),
            "meta": (rng.integers(0, 4, n) | (rng.integers(0, 4, n) << 2) | (rng.integers(0, 2, n) << 4)).astype(np.int64)}
    got = segments.unsettled(rows["seg"], rows["seq"], rows["meta"], keys)
    assert got.tolist() == [ref_unsettled(seq, meta) for _, seq, meta, _ in per_key({**rows, "t": rows["seq"]}, keys)]
