"""The kernel's plumbing (`pubsubguard.validation.checks.kernel`): Arrow columns as NumPy arrays, and segmented
scans and reductions with NumPy.

A segment is a run of consecutive elements (a key's rows, a message's rows, a message id's rows), given by
`starts` (True at each segment's first element) or by each element's segment number. Nullable numbers are
float64 with NaN for null; `fmin`/`fmax` semantics: NaN is ignored as SQL's min/max ignore null.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def seg_ids(starts: np.ndarray) -> np.ndarray:
    return np.cumsum(starts) - 1


DOUBLING_UP_TO = 16  # segments at most this long: a doubling scan; longer: rank encoding


def seg_cummax(v: np.ndarray, starts: np.ndarray, exclusive: bool = False) -> np.ndarray:
    """Running max of v (NaN = null) restarting at each start; exclusive: of the rows before."""
    n = len(v)
    if n == 0:
        return np.full(0, np.nan)
    idx = np.arange(n)
    pos = idx - np.maximum.accumulate(np.where(starts, idx, 0))  # position within the segment
    longest = int(pos.max()) + 1
    if longest <= DOUBLING_UP_TO:
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
        base = seg_ids(starts).astype(np.int64) * (len(uniq) + 1)
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


def seg_cummin_after(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Min of v over the rows after each row in its segment (NaN when none)."""
    n = len(v)
    ends = np.zeros(n, bool)
    if n:
        ends[:-1] = starts[1:]
        ends[-1] = True
    return -seg_cummax(-v[::-1], ends[::-1], exclusive=True)[::-1]


class Flagged:
    """The flagged rows of each segment, found once for several reductions over them: `segment`, each row's
    segment (sorted), of `segments`. A reduction reads the flagged rows only (a reduceat costs per segment:
    most have no flagged row of a rare kind, e.g. dead letters)."""

    def __init__(self, flags: np.ndarray, segment: np.ndarray, segments: int):
        self.segments = segments
        self.rows = np.flatnonzero(flags)  # ascending
        of = segment[self.rows]
        first = np.ones(len(of), bool)
        first[1:] = of[1:] != of[:-1]
        self.firsts = np.flatnonzero(first)  # into `rows`: each flagged segment's first flagged row
        self.targets = of[self.firsts]  # the segments with a flagged row

    def min(self, v: np.ndarray) -> np.ndarray:
        """Per segment, the min of v over its flagged rows ignoring NaN (NaN when none)."""
        return self._reduce(np.fmin, v)

    def max(self, v: np.ndarray) -> np.ndarray:
        return self._reduce(np.fmax, v)

    def count(self) -> np.ndarray:
        out = np.zeros(self.segments, np.int64)
        out[self.targets] = np.diff(self.firsts, append=len(self.rows))
        return out

    def first_row(self) -> np.ndarray:
        """Per segment, its first flagged row (-1 when none)."""
        out = np.full(self.segments, -1, np.int64)
        out[self.targets] = self.rows[self.firsts]
        return out

    def _reduce(self, reduce: np.ufunc, v: np.ndarray) -> np.ndarray:
        out = np.full(self.segments, np.nan)
        if len(self.rows):
            out[self.targets] = reduce.reduceat(v[self.rows].astype(np.float64, copy=False), self.firsts)
        return out


def flagged_min(v: np.ndarray, flags: np.ndarray, segment: np.ndarray, segments: int) -> np.ndarray:
    """`Flagged(flags, segment, segments).min(v)`, for one reduction over these flags."""
    return Flagged(flags, segment, segments).min(v)


def flagged_max(v: np.ndarray, flags: np.ndarray, segment: np.ndarray, segments: int) -> np.ndarray:
    """As `flagged_min`, the max."""
    return Flagged(flags, segment, segments).max(v)


def flagged_count(flags: np.ndarray, segment: np.ndarray, segments: int) -> np.ndarray:
    """Per segment, its flagged rows, for `segment`, each row's segment, of `segments`."""
    return np.bincount(segment[flags], minlength=segments)


def whole_segments(selected: np.ndarray):
    """An index (or slice, for all) of the selected elements, None for none. The selection is of
    whole segments (by subscription), so a scan over the selected elements sees whole segments."""
    if selected.all():
        return slice(None)
    rows = np.flatnonzero(selected)
    return rows if len(rows) else None


def settle_prefix(settle_time, exists, first_of_key, seqs):
    """Per message of whole keys: the latest settle time of the key's earlier messages (settle
    prefix), and the seq that blocks -- the earliest of the latest-settled earlier messages."""
    prefix_settle = seg_cummax(settle_time, first_of_key, exclusive=True)
    key_first_message = np.flatnonzero(first_of_key)[seg_ids(first_of_key)]
    record = exists & (np.isnan(prefix_settle) | (settle_time > prefix_settle))
    last_record = np.maximum.accumulate(np.where(record, np.arange(len(first_of_key)), -1))
    blocking_at = np.full(len(first_of_key), -1)
    blocking_at[1:] = last_record[:-1]
    blocking_at[blocking_at < key_first_message] = -1  # a record of an earlier key
    return prefix_settle, np.where(blocking_at >= 0, seqs[np.maximum(blocking_at, 0)], np.nan)


def arrow_column(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


def ints(table: pa.Table, name: str) -> np.ndarray:
    """A column without nulls."""
    return arrow_column(table, name).to_numpy(zero_copy_only=False)


def _values_and_validity(arr: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """An int64 array's values as NumPy (no copy; what a null's slot holds is unspecified) and which are
    valid (None: all)."""
    if not len(arr):
        return np.zeros(0, np.int64), None
    values = np.frombuffer(arr.buffers()[1], np.int64, len(arr), arr.offset * 8)
    if not arr.null_count:
        return values, None
    bits = np.frombuffer(arr.buffers()[0], np.uint8, (arr.offset + len(arr) + 7) // 8)
    return values, np.unpackbits(bits, bitorder="little")[arr.offset : arr.offset + len(arr)].view(bool)


def floats(arr: pa.Array, safe: bool = True) -> np.ndarray:
    """A column of ints as float64, null as NaN. `safe`: a value float64 cannot hold exactly (beyond
    +-2**53) is an error, as Arrow's safe cast says it (int64 columns: read from their buffers, twice as
    fast as the cast)."""
    if arr.type != pa.int64():
        return np.asarray(pc.cast(arr, pa.float64(), safe=safe).to_numpy(zero_copy_only=False), dtype=np.float64)
    values, valid = _values_and_validity(arr)
    out = values.astype(np.float64)
    if valid is not None:
        out[~valid] = np.nan
    if safe and len(out) and (np.fmax.reduce(out) >= 2.0**53 or np.fmin.reduce(out) <= -(2.0**53)):
        pc.cast(arr, pa.float64(), safe=True)  # near the bound: Arrow's own check and message (ArrowInvalid)
    return out


def filled_ints(arr: pa.Array, fill: int = 0) -> np.ndarray:
    """A column of ints as int64, null as `fill`."""
    if arr.type != pa.int64():
        return pc.fill_null(arr, fill).to_numpy(zero_copy_only=False).astype(np.int64)
    values, valid = _values_and_validity(arr)
    return values.copy() if valid is None else np.where(valid, values, fill)


def key_starts(h: np.ndarray, h2: np.ndarray) -> np.ndarray:
    """Rows whose (subscription, key) differs from the previous row's (rows are sorted by it)."""
    starts = np.ones(len(h), bool)
    starts[1:] = (h[1:] != h[:-1]) | (h2[1:] != h2[:-1])
    return starts


def nullable_ints(values: np.ndarray) -> list[int | None]:
    """A float column's values as ints, NaN as None (an output column's missing facts)."""
    return [None if np.isnan(v) else int(v) for v in values.tolist()]
