"""The judge's bookkeeping over every key of a call at once (issue 65): NumPy operations on the rows of many keys,
each row tagged with its key's segment (`seg`, 0..n-1), instead of a loop over the keys. Each function gives, per
segment, what the same operation on that key's rows alone gives (tests/prove/watch/test_watch_segments.py holds
them to a per-key reference). A key's rows keep their order (the order its rows came), so "first" means first in
that order.
"""

from __future__ import annotations

import numpy as np

from ..checks import chunk

NULL = -(2**62)  # a null number in the judge's arrays (a row's missing seq, ack time or attempt)
_SPAN = 2**62  # pair_ids numbers a (seg, value) as seg * width + offset when that stays below this


def pair_ids(*pairs: tuple[np.ndarray, np.ndarray]) -> tuple[list[np.ndarray], int]:
    """Each (seg, value) of the arrays given as one number, the same for equal pairs across all of them and ordered
    as (seg, value); and the width w of a segment's numbers (a pair's segment is its number // w)."""
    values = np.concatenate([np.asarray(v, np.int64) for _, v in pairs]) if pairs else np.zeros(0, np.int64)
    segs = max((int(np.max(seg)) + 1 for seg, _ in pairs if len(seg)), default=1)
    low, high = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    if high - low < _SPAN and segs * (high - low + 1) < _SPAN:
        # values within a narrow range (seqs, no null among them): a value's offset from the smallest is its number
        # in the segment, without the sort that ranking them costs (~40 ms for a bucket's 300,000 rows)
        width = high - low + 1
        rank = values - low
    else:
        distinct, rank = np.unique(values, return_inverse=True)
        width = max(1, len(distinct))
    out, at = [], 0
    for seg, v in pairs:
        out.append(np.asarray(seg, np.int64) * width + rank.reshape(-1)[at:at + len(v)])
        at += len(v)
    return out, width


def bounds(seg: np.ndarray, n: int) -> np.ndarray:
    """Where each of the n segments starts in `seg` (sorted), and its end: segment i is [b[i], b[i + 1])."""
    return np.searchsorted(seg, np.arange(n + 1))


def publish_times(seg: np.ndarray, seq: np.ndarray, meta: np.ndarray, t: np.ndarray):
    """Per segment, the seqs that have a publish row and each one's earliest publish time: (seg, seq, time),
    sorted by (seg, seq)."""
    rows = np.flatnonzero((meta & 3) == chunk.PUBLISH)
    return _first(seg[rows], seq[rows], t[rows], t[rows])


def message_times(seg: np.ndarray, seq: np.ndarray, meta: np.ndarray, t: np.ndarray):
    """Per segment, every kept message's seq and when it started: its earliest publish row, else its first row
    (in the segment's order); a message is a seq with a publish row, or a non-null seq. (seg, seq, start), sorted
    by (seg, seq)."""
    published = (meta & 3) == chunk.PUBLISH
    rows = np.flatnonzero(published | (seq != NULL))
    # a seq's publish rows first, the earliest first; a seq without one: its first row
    tie = np.where(published[rows], t[rows], rows)
    return _first(seg[rows], seq[rows], t[rows], tie, ~published[rows])


def _first(seg, seq, t, tie, rank=None):
    order = _order(seg, seq, tie, rank)
    seg, seq, t = seg[order], seq[order], t[order]
    first = np.ones(len(seg), bool)
    first[1:] = (seg[1:] != seg[:-1]) | (seq[1:] != seq[:-1])
    return seg[first], seq[first], t[first]


def _order(seg, seq, tie, rank=None) -> np.ndarray:
    """The stable order by (seg, seq, rank, tie): (seg, seq) as one pair number and (rank, tie) as one, sorted as
    one number when both fit in it (`sort_order`); else np.lexsort on the four."""
    if len(tie):
        low, high = int(tie.min()), int(tie.max())
        if high - low < 2**61:
            (pairs,), _ = pair_ids((seg, seq))
            span = high - low + 1
            inner = tie - low if rank is None else (tie - low) + rank.astype(np.int64) * span
            return sort_order(pairs, inner, span if rank is None else 2 * span)
    return np.lexsort((tie, seq, seg) if rank is None else (tie, rank, seq, seg))


def sort_order(outer: np.ndarray, inner: np.ndarray, inner_span: int) -> np.ndarray:
    """The stable order by (outer, inner), `inner` within 0..inner_span-1: one stable argsort of outer * span +
    inner when that stays below 2**62 (the rows come in runs, which it keeps), else np.lexsort on the two."""
    if len(outer) and int(outer.min()) >= 0 and (int(outer.max()) + 1) * inner_span < _SPAN:
        return np.argsort(outer * inner_span + inner, kind="stable")
    return np.lexsort((inner, outer))


def unsettled(seg: np.ndarray, seq: np.ndarray, meta: np.ndarray, n: int) -> np.ndarray:
    """Per segment, how many of its messages were published (ok) and neither acked with success nor
    dead-lettered."""
    kind, ok, act = meta & 3, (meta >> 4) & 1, (meta >> 2) & 3
    published = (kind == chunk.PUBLISH) & (ok == 1)
    settled = (kind == chunk.DEAD_LETTER) | ((kind == chunk.DELIVERY) & (ok == 1)
                                             & ((act == chunk.ACT_ACK) | (act == chunk.ACT_LATE_ACK)))
    (mine, done), width = pair_ids((seg[published], seq[published]), (seg[settled], seq[settled]))
    span = int(max(mine.max(initial=-1), done.max(initial=-1))) + 1
    if span <= 8 * (len(mine) + len(done)) + (1 << 16):  # pair numbers dense enough for a mask (no sort)
        left = np.zeros(span, bool)
        left[mine] = True
        left[done] = False
        left = np.flatnonzero(left)
    else:
        left = np.unique(mine)
        left = left[~np.isin(left, done)]
    return np.bincount(left // width, minlength=n)[:n]


def seg_max(seg: np.ndarray, values: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """Per segment, the largest of `initial` and its `values`."""
    out = np.array(initial, np.int64, copy=True)
    np.maximum.at(out, seg, values)
    return out


def seg_min(seg: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per segment, the smallest of its `values`, and whether it has any."""
    out = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, seg, values)
    return out, np.bincount(seg, minlength=n)[:n] > 0

