"""The pass's building blocks that have a bound of their own (the findings are tested end to end)."""

from __future__ import annotations

import numpy as np
import pytest

from pubsubguard.validation.checks import aggregates, scans


@pytest.mark.parametrize("n, samples", [(50, 100), (100_000, 1_000), (123_457, 10_000)])
def test_latency_summary_percentiles_within_one_step(n, samples):
    rng = np.random.default_rng(n)
    values = rng.lognormal(3.0, 1.0, n)
    parts = np.array_split(values, 4)  # four partitions, merged by weight on the driver
    summaries = [aggregates.latency_summary(p, samples) for p in parts]
    assert sum(int(s[1].sum()) for s in summaries) == n
    exact = np.sort(values)
    ps = (0.5, 0.95, 0.99)
    for p, got in zip(ps, aggregates.merged_percentiles(summaries, ps)):
        want_rank = int(np.ceil(p * n))  # nearest rank, 1-based
        got_rank = np.searchsorted(exact, got, side="right")
        bound = sum(-(-len(part) // samples) for part in parts) if n > 4 * samples else 0
        assert abs(got_rank - want_rank) <= bound, (p, got_rank, want_rank, bound)


@pytest.mark.parametrize("n, samples", [(0, 10), (1, 10), (10, 10), (11, 10), (30, 10), (31, 10), (123_457, 10_000)])
def test_a_latency_summary_crosses_the_wire_exactly(n, samples):
    """The pass's row carries a summary as bytes, a count and a step (`summary_wire`); the driver gets back the
    same values and weights, the last weight being what remains when the step does not divide the count."""
    values = np.random.default_rng(n).lognormal(3.0, 1.0, n)
    summary = aggregates.latency_summary(values, samples)
    sample, count, step = aggregates.summary_wire(*summary)
    assert isinstance(sample, bytes) and count == n
    back = aggregates.summary_of_wire(sample, count, step)
    assert np.array_equal(back[0], summary[0]) and np.array_equal(back[1], summary[1])
    assert back[1].dtype == np.int64 and back[0].dtype.kind == "f"


def test_merged_percentiles_of_nothing_are_none():
    assert aggregates.merged_percentiles([], (0.5,)) == [None]
    assert aggregates.merged_percentiles([(np.zeros(0), np.zeros(0, np.int64))], (0.5, 0.9)) == [None, None]


def test_segmented_running_max_restarts_at_each_segment():
    v = np.array([3.0, np.nan, 1.0, 5.0, 2.0, np.nan, 4.0])
    starts = np.array([True, False, False, True, False, True, False])
    np.testing.assert_array_equal(scans.seg_cummax(v, starts), [3, 3, 3, 5, 5, np.nan, 4])
    np.testing.assert_array_equal(scans.seg_cummax(v, starts, exclusive=True), [np.nan, 3, 3, np.nan, 5, np.nan, np.nan])
    np.testing.assert_array_equal(scans.seg_cummin_after(v, starts), [1, 1, np.nan, 2, np.nan, 4, np.nan])


@pytest.mark.parametrize("longest", [1, 2, 5, scans.DOUBLING_UP_TO, scans.DOUBLING_UP_TO + 1, 200])
def test_segmented_scans_match_a_loop(longest):
    """Both ways of the scan (doubling for short segments, rank encoding for long) against a loop."""
    rng = np.random.default_rng(longest)
    for _ in range(30):
        lengths = rng.integers(1, longest + 1, size=int(rng.integers(1, 12)))
        lengths[0] = longest  # the longest segment decides the way
        rng.shuffle(lengths)
        n = int(lengths.sum())
        v = np.round(rng.normal(size=n), 1)  # ties included
        v[rng.random(n) < 0.3] = np.nan
        starts = np.zeros(n, bool)
        starts[np.cumsum(lengths)[:-1]] = True
        starts[0] = True
        want, want_ex, want_after = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        for begin, end in zip(np.flatnonzero(starts), [*np.flatnonzero(starts)[1:], n]):
            for i in range(begin, end):
                before, upto, after = v[begin:i], v[begin : i + 1], v[i + 1 : end]
                want[i] = np.nan if np.isnan(upto).all() else np.nanmax(upto)
                want_ex[i] = np.nan if len(before) == 0 or np.isnan(before).all() else np.nanmax(before)
                want_after[i] = np.nan if len(after) == 0 or np.isnan(after).all() else np.nanmin(after)
        np.testing.assert_array_equal(scans.seg_cummax(v, starts), want)
        np.testing.assert_array_equal(scans.seg_cummax(v, starts, exclusive=True), want_ex)
        np.testing.assert_array_equal(scans.seg_cummin_after(v, starts), want_after)
