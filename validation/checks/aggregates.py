"""The pass's statistics and plot rows merged on the driver (`pubsubguard.validation.checks.run` collects them):
per subscription the counts summed, latency percentiles and CDF from the partitions' mergeable summaries, the
hottest keys; the run's timeline and extent for the report's plots. The kernel (`pubsubguard.validation.checks.kernel`)
makes those rows per chunk of a partition; this module is their other half, and the report's only source of
figures and plot data besides the findings.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HOTTEST_KEYS = 5
LATENCY_SAMPLES = 10_000  # per partition and subscription: percentiles within 1/10,000 of the rank


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


FLOAT64, INT64 = np.dtype("<f8"), np.dtype("<i8")  # the pass's arrays as bytes: one byte order on every machine


def summary_wire(values: np.ndarray, weights: np.ndarray) -> tuple[bytes, int, int]:
    """A `latency_summary` as the pass's row carries it: the sorted sample as bytes, the number of values it
    stands for and the step (every weight is the step but the last, which is what remains)."""
    return values.astype(FLOAT64).tobytes(), int(weights.sum()), int(weights[0]) if len(weights) else 1


def summary_of_wire(sample: bytes, n: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """The `latency_summary` a pass's row carries (`summary_wire`), exactly."""
    values = np.frombuffer(sample, FLOAT64)
    weights = np.full(len(values), step, np.int64)
    if len(values):
        weights[-1] = n - step * (len(values) - 1)
    return values, weights


def _int64s(column: "pa.ChunkedArray") -> tuple[np.ndarray, np.ndarray]:
    """The int64 arrays a binary column's rows carry as bytes, flattened, and the length of each."""
    blobs = column.to_pylist()
    return (np.frombuffer(b"".join(blobs), INT64),
            np.fromiter((len(b) // INT64.itemsize for b in blobs), np.int64, len(blobs)))


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


COUNTS = ("published", "poison_published", "delivered", "distinct_delivered", "acked", "dead_lettered", "settled",
          "publish_duplicates")
# the columns of the pass's rows each merge reads: the driver selects them before it filters the rows (a filter copies
# every column it keeps, chunk by chunk: 35-80 ms a filter of the whole output at 10M rows, 269 chunks)
STATISTICS_COLUMNS = ("subscription", *COUNTS, "h", "h2", "key_deliveries", "key_published", "latency_ms", "latency_n",
                      "latency_step")
PLOT_COLUMNS = ("series", "subscription", "bin_shift", "bins", "bin_counts", "first_publish_us", "first_ok_publish_us",
                "last_us", "crash_first_us", "crash_last_us", "expiry_deadline_s")


def summarise(rows: pa.Table, names: tuple[str, ...], percentiles=(0.5, 0.95, 0.99)) -> dict[str, dict]:
    """The statistics rows of the pass (all partitions; no findings), merged per subscription:
    counts summed, latency percentiles from the partitions' summaries, and `hottest`, the top keys
    as (h, h2, deliveries, key_published) by (deliveries, h, h2) -- a deterministic pick among
    ties -- unnamed."""
    counts = COUNTS
    merged = {name: {**dict.fromkeys(counts, 0), "hot": [], "latency": []} for name in names}
    for row in rows.select(["subscription", *counts, "h", "h2", "key_deliveries", "key_published"]).to_pylist():
        s = merged[row["subscription"]]
        if row["key_deliveries"] is not None:
            s["hot"].append((row["key_deliveries"], row["h"], row["h2"], row["key_published"]))
        elif row["published"] is not None:
            for n in counts:
                s[n] += row[n]
    lat = rows.filter(pc.is_valid(rows["latency_ms"]))
    for sub, sample, n, step in zip(*(lat[c].to_pylist() for c in ("subscription", "latency_ms", "latency_n",
                                                                   "latency_step"))):
        merged[sub]["latency"].append(summary_of_wire(sample, n, step))
    stats = {}
    for name, s in merged.items():
        # a redelivery is a delivery of a message id delivered before: not the first delivery of a message's
        # second id (a publish-side duplicate)
        delivered, redelivered = s["delivered"], s["delivered"] - s["distinct_delivered"] - s["publish_duplicates"]
        stats[name] = {
            "subscription": name,
            **{n: s[n] for n in counts},
            "redeliveries": redelivered,
            "redelivery_rate": redelivered / delivered if delivered else None,
            **{f"latency_p{round(q * 100)}_ms": v for q, v in zip(percentiles, merged_percentiles(s["latency"], percentiles))},
            "hottest": [(h, h2, d, p) for d, h, h2, p in sorted(s["hot"], reverse=True)[:HOTTEST_KEYS]],
            "latency_cdf": latency_cdf(s["latency"]),
        }
    return stats


# -- the report's timeline ----------------------------------------------------------------------
# The report plots the run's throughput per bin; the pass counts it, so the report reads nothing
# more. A chunk does not know the run's extent, so it counts per bin of 2**k µs numbered from the
# epoch, k the least (from TIMELINE_MIN_SHIFT) that spans its rows in CHUNK_TIMELINE_BINS bins;
# `plot_aggregates` coarsens every chunk's bins to the run's k (a power of two apart: exact).
TIMELINE_SERIES = ("published", "settled", *(f"delivered:{a}" for a in ("ack", "nack", "expire", "late_ack", "crash", "none")))
TIMELINE_MIN_SHIFT = 17  # the finest bin: 2**17 µs = 131 ms
CHUNK_TIMELINE_BINS = 4096
TIMELINE_BINS = 300  # the run's timeline has at most this many bins (at least half as many, or 131 ms ones)
LATENCY_POINTS = 2_000  # per subscription on the latency CDF


def shift_for(lo: int, hi: int, most_bins: int) -> int:
    """The least k >= TIMELINE_MIN_SHIFT with [lo, hi] in at most `most_bins` bins of 2**k µs."""
    k = TIMELINE_MIN_SHIFT
    while (hi >> k) - (lo >> k) + 1 > most_bins:
        k += 1
    return k


def plot_aggregates(rows: pa.Table, timeline_bins: int | None = None) -> dict:
    """The pass's timeline rows merged: the run's extent (`first_publish_us`, `t0` the first
    successful publish, `t1` the last receive or ack), the timeline in at most `timeline_bins` bins
    of `bin_us` (a power of two µs) from `t0` (aligned down to a bin), `timeline` series -> {bin: count},
    `expiry_deadline_s` per subscription and `crash` (first, last receive) or None."""
    # each filter on the columns it reads: a filter copies what it keeps, and the bins are megabytes at 10M rows
    extent = rows.select(["series", "first_publish_us", "first_ok_publish_us", "last_us", "crash_first_us",
                          "crash_last_us"])
    extent = extent.filter(pc.equal(extent["series"], "extent"))

    def extreme(name, fold):
        values = [v for v in extent[name].to_pylist() if v is not None]
        return fold(values) if values else None

    first_publish, t0, t1 = extreme("first_publish_us", min), extreme("first_ok_publish_us", min), extreme("last_us", max)
    crash_first, crash_last = extreme("crash_first_us", min), extreme("crash_last_us", max)
    expiry: dict[str, int] = {}
    expiring = rows.select(["series", "subscription", "expiry_deadline_s"])
    for row in expiring.filter(pc.equal(expiring["series"], "expiry")).to_pylist():
        expiry[row["subscription"]] = max(expiry.get(row["subscription"], 0), row["expiry_deadline_s"])
    result = {"first_publish_us": first_publish, "t0": t0, "t1": t1, "expiry_deadline_s": expiry,
              "crash": None if crash_first is None else (crash_first, crash_last)}
    if t0 is None or t1 is None:
        return {**result, "timeline": None}
    t1 = max(t1, t0 + 1)
    timeline_bins = TIMELINE_BINS if timeline_bins is None else timeline_bins
    counted = rows.select(["series", "bin_shift", "bins", "bin_counts"])
    counted = counted.filter(pc.is_in(counted["series"], pa.array(TIMELINE_SERIES)))
    shifts = counted["bin_shift"].to_pylist()
    k = max([shift_for(t0, t1, timeline_bins), *shifts])
    first_bin = t0 >> k
    # merged per series with NumPy over the flattened arrays (a chunk of 2**16 rows brings up to a few
    # thousand bins: Python lists and a dict update per bin cost ~0.3 s on the driver at 10M rows);
    # a series' bins keep the order they first appear in
    names = counted["series"].to_pylist()
    values, lengths = _int64s(counted["bins"])
    counts, _ = _int64s(counted["bin_counts"])
    values = (values >> np.repeat(k - np.asarray(shifts, np.int64), lengths)) - first_bin
    code_of = {name: i for i, name in enumerate(dict.fromkeys(names))}
    codes = np.repeat(np.array([code_of[name] for name in names], np.int64), lengths)
    timeline: dict[str, dict[int, int]] = {}
    for name, code in code_of.items():
        mine = codes == code
        unique, first, inverse = np.unique(values[mine], return_index=True, return_inverse=True)
        sums = np.zeros(len(unique), np.int64)
        np.add.at(sums, inverse.reshape(-1), counts[mine])
        order = np.argsort(first, kind="stable")
        timeline[name] = dict(zip(unique[order].tolist(), sums[order].tolist()))
    return {**result, "t0": first_bin << k, "bin_us": 1 << k, "bins": (t1 >> k) - first_bin + 1, "timeline": timeline}


def latency_cdf(summaries: list[tuple[np.ndarray, np.ndarray]], points: int = LATENCY_POINTS) -> dict | None:
    """The latency CDF of one subscription from its partitions' `latency_summary`s: at most `points`
    (ms, fraction of messages at or below) steps, evenly spaced in rank, the largest value always
    kept; `messages` the number of messages it stands for."""
    if not summaries:
        return None
    v = np.concatenate([s[0] for s in summaries])
    w = np.concatenate([s[1] for s in summaries])
    if len(v) == 0:
        return None
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(w[order])
    total = int(cum[-1])
    if len(v) > points:
        keep = np.unique(np.append(np.searchsorted(cum, np.linspace(0, total, points), side="left"), len(v) - 1))
        v, cum = v[keep], cum[keep]
    return {"ms": v.tolist(), "fraction": (cum / total).tolist(), "messages": total}
