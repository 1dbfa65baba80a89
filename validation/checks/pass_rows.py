"""The pass's output: one schema (`OUTPUT_SCHEMA`) for the findings, statistics and plot rows a chunk yields
(`append_findings`, `append_statistics`, `append_plot`); `checks.run` joins them to the evidence, `aggregates`
merges the statistics and plots."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .aggregates import CHUNK_TIMELINE_BINS, HOTTEST_KEYS, INT64, TIMELINE_SERIES, shift_for
from .chunk import ACT_LATE_ACK, Chunk, EXT_CRASH, EXT_EXPIRE, FOREIGN, Found
from .findings import FINDING_FACTS, FINDING_KINDS
from .scans import nullable_ints

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
        # a partition's latency summary (`aggregates.latency_summary`) as bytes (`aggregates.summary_wire`): a
        # list column of 10,000 numbers a row cost the JVM's Arrow-to-row conversion about 0.15 s at 1M rows
        ("latency_ms", pa.binary()),
        ("latency_n", pa.int64()),
        ("latency_step", pa.int64()),
        ("key_deliveries", pa.int64()),
        ("key_published", pa.bool_()),  # the key has publish rows: its name is in the publish log
        ("poison_published", pa.int64()),  # poison publishes with status ok
        # the report's timeline (`plot_aggregates`): a series' counts per bin of 2**bin_shift µs
        # (bins numbered from the epoch), the chunk's extent, crash window and expiry deadlines
        ("series", pa.string()),
        ("bin_shift", pa.int64()),
        ("bins", pa.binary()),  # int64 little-endian (`aggregates.INT64`), as the latencies, for the same reason
        ("bin_counts", pa.binary()),
        ("first_publish_us", pa.int64()),
        ("first_ok_publish_us", pa.int64()),
        ("last_us", pa.int64()),
        ("crash_first_us", pa.int64()),
        ("crash_last_us", pa.int64()),
        ("expiry_deadline_s", pa.int64()),
    ]
)


def append_findings(out: dict[str, list], found: Found, chunk: Chunk, names: tuple[str, ...], row_id_base: int) -> None:
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


def append_statistics(out: dict[str, list], chunk: Chunk, names: tuple[str, ...], latencies: dict[int, list[np.ndarray]]) -> None:
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
        append_row(
            out, subscription=names[s], published=int(published[s]), poison_published=int(poison[s]),
            delivered=int(delivered[s]),
            distinct_delivered=int(distinct[s]), acked=int(acked[s]), dead_lettered=int(dead_lettered[s]),
            settled=int(settled[s]), publish_duplicates=int(publish_duplicates[s]),
        )
        latencies.setdefault(s, []).append(latency_of.get(s, np.zeros(0)))
        begin = hot_end[s - 1] if s else 0
        for k in hot[max(begin, hot_end[s] - HOTTEST_KEYS) : hot_end[s]][::-1].tolist():
            append_row(
                out, subscription=names[s], h=int(key_h[k]), h2=int(key_h2[k]),
                key_published=bool(chunk.key_published[k]), key_deliveries=int(key_deliveries[k]),
            )


def append_row(out, **values):
    row = dict.fromkeys(out)
    row.update(values)
    for name, value in row.items():
        out[name].append(value)


# a delivery's timeline series by act * 3 + action_ext (TIMELINE_SERIES: 2 ack ... 7 none)
SERIES_OF_DELIVERY = np.array([
    7, 4, 6,  # ACT_OTHER: none, expire, crash
    2, 2, 2,  # ACT_ACK
    5, 5, 5,  # ACT_LATE_ACK
    3, 3, 3,  # ACT_NACK
])


def append_plot(out: dict[str, list], chunk: Chunk, names: tuple[str, ...]) -> None:
    """This chunk's timeline counts (one row per series), its extent and crash window (one row), and
    per subscription the longest deadline an expired or late-acked delivery was held to."""
    delivery, t = chunk.is_delivery, chunk.t_us
    published = chunk.is_publish & chunk.ok
    counted = np.flatnonzero(delivery | published)
    row_t = t[counted]
    row_series = np.where(delivery[counted], SERIES_OF_DELIVERY[chunk.act[counted] * 3 + chunk.action_ext[counted]], 0)
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
                append_row(out, series=TIMELINE_SERIES[code], bin_shift=k, bins=(used + base).astype(INT64).tobytes(),
                           bin_counts=per_bin[used].astype(INT64).tobytes())
    crash = t[delivery & (chunk.action_ext == EXT_CRASH)]
    # a where and a plain reduction: NumPy's masked reductions (`where=`) took 5x as long
    last = np.where(delivery | chunk.is_dead_letter, np.fmax(chunk.t, chunk.ack_t), -np.inf).max(initial=-np.inf)
    never = np.iinfo(np.int64).max
    first_publish, first_ok_publish = (int(np.where(rows, t, never).min(initial=never)) for rows in (chunk.is_publish, published))
    append_row(
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
            append_row(out, series="expiry", subscription=names[s], expiry_deadline_s=int(longest[s]))
