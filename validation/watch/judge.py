"""The streaming checks' step: what `pubsubguard watch` decides of each (subscription, ordering key) each time
Spark's state store hands it new rows or its timeout passes (`applyInPandasWithState`).

The rows are the batch checks' packed rows (`checks.chunk.INPUT_COLUMNS`, made by `checks.run._unified`), and
every finding comes from the same kernel (`checks.kernel.check_partition`) over the rows the key's state still
holds. What watch adds is *when* a message is judged:

- its **delivery horizon** (`horizon.py`): a message is decided once the query's watermark passed its publish
  time plus the horizon. Only then are its findings written (a finding about a message that may still change
  is never said), and only then may it be `lost`: the kernel's completeness is run on the newly decided
  messages alone, as proven, and what it calls lost is `lost` of form `past_horizon`;
- its **retention**: a decided message stays in the state for one more horizon (a duplicate or a late
  redelivery is judged beside its earlier deliveries), then its rows leave the state. The state of a key is so
  bounded by the watermark: at most two horizons of its messages;
- a delivery of a message already found lost, or of one whose rows left the state, is `late_delivery`
  (advisory): the lost finding stands.

**Keys are judged by bucket** (issue 65). The query groups its rows by a bucket of the key (`stream.BUCKETS`), so
Spark calls `judge_bucket` once per bucket with the new rows of all its keys, and the bucket's state holds each
key's (`KeyState`, the bucket encoded by `encode`) with the time its own timeout would have come. Within a call a
key is judged exactly when Spark would have called it alone: when it has new rows, or when the watermark passed its
own timeout (Spark's rule: timeout < watermark); the bucket's timeout is the earliest of its keys'. So what is
decided, and when, is what a call per key decides, while the kernel runs once per call over every key that has
something decided (sorted by key, as the batch checks hand it a partition), not once per key. The bookkeeping of
the call's keys (which rows are late, first deliveries' latencies, when each message started, which are decided,
unsettled or let go, each key's next timeout) is done for all of them at once (`segments.py`: NumPy operations over
their rows, each row tagged with its key), not key by key: at 1,000,000 rows a loop over the keys cost about
0.7 ms a key and call, more than the kernel (docs/performance.md).

Each finding has a stable id (its subscription, kind, form, key, seq and row); the ids written so far are kept
in the state until their message leaves it, so a finding the kernel finds again in a later call is not written
twice, also after a restart from the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from ..checks import chunk, kernel
from ..checks.findings import FINDING_FACTS
from . import segments
from .segments import NULL

# PySpark 4.3's applyInPandasWithState serializer (pyspark/worker.py) pads each output chunk with an empty frame and
# pd.concat warns of it on every window, on the watch's terminal: the warning is about PySpark's frames, not ours,
# and pandas' future behaviour changes nothing for them (the dtypes come from the output schema).
warnings.filterwarnings("ignore", message="The behavior of DataFrame concatenation with empty or all-NA entries",
                        category=FutureWarning)

CLOCK_SUB = -1  # the clock rows' sub_id: they move the watermark and are never judged

# what a call returns: findings and one statistics row per key judged
OUTPUT = (
    "rtype string, sub_id int, key string, kind string, form string, severity string, seq long, t long, "
    "fid string, facts string, published long, delivered long, decided long, unsettled long, "
    "latencies array<double>"
)
# what the state store keeps of a bucket: its keys' states (`encode`). PySpark 4.3's Python worker cannot read a
# state schema that has arrays (KeyError 'elementType' in ArrayType.fromJson), so the numbers are int64 blocks:
#   keys   one row of _KEY_FIELDS per key, in (h, h2) order
#   rows   the keys' kept rows, one after the other, as one block of shape (5, n) (_ROWS)
#   lost   the seqs each key found lost, one after the other
#   text   JSON: the keys' names and the ids of the findings each wrote ([fid, seq] pairs)
STATE = "keys binary, rows binary, lost binary, text string"
_ROWS = ("seq", "meta", "t", "ack_t", "att")
_KEY_FIELDS = ("h", "h2", "sub_id", "decided_through", "closed_through", "timeout_ms", "rows", "lost")
MAX_LOST_KEPT = 1000  # seqs found lost a key remembers (a later delivery of one is late_delivery after_lost)


@dataclass(frozen=True)
class JudgeConfig:
    """What the step needs, the same on every executor: the kernel's subscriptions (probed, in sub_id order),
    each one's delivery horizon in microseconds, and the clock skew tolerated."""

    subscriptions: kernel.SubscriptionConfig
    horizon_us: tuple[int, ...]
    skew_us: int
    # (sub_id, key) -> seq ranges a stopped publisher may have published without writing their rows
    # (`outdir.WatchDir.reserve_seqs`): a delivery of one has no publish row and is not the target's doing
    unrecorded: dict = field(default_factory=dict)
    # (first_us, last_us) before a crash of the watch, when a delivery and its ack may have happened without their
    # row: a message published then without a delivery row is lost of form `at_crash` (advisory), not past_horizon
    crash_windows: tuple = ()
    # the query's watermark delay in ms (`stream.judged` sets it beside `withWatermark`). With it, a call that holds
    # the driver's clock row (every bucket gets each one) judges at the watermark Spark's next window will have at
    # least -- its own rule: the newest event time in ms less the delay, and the clock is one of those times -- so a
    # message is decided in the window its horizon passes, not the one after (a backlog read in one window is judged
    # in it, not held in the state for the next). None: Spark's watermark alone.
    delay_ms: int | None = None


def unrecorded_ranges(rows: list, subscriptions: list) -> dict:
    """The manifest's `unrecorded` [topic, key, first, last] rows per (sub_id, key) of the probed subscriptions."""
    out: dict = {}
    for topic, key, first, last in rows:
        for sub_id, sub in enumerate(subscriptions):
            if sub.topic == topic and last >= first:
                out.setdefault((sub_id, key), []).append((first, last))
    return out


def _unrecorded(judge: "JudgeConfig", sub_id: int, key, seq) -> bool:
    return any(first <= seq <= last for first, last in judge.unrecorded.get((sub_id, key), ()))


def finding_id(subscription: str, kind: str, form, key, seq, t) -> str:
    """A finding's stable id: the same finding found again (a later call, a restart) has the same one."""
    text = "\x1f".join(str(part) for part in (subscription, kind, form, key, seq, t))
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


class KeyState:
    """One key's state as arrays (NULL for a null number), and when its own timeout comes (ms, None: never)."""

    def __init__(self, h: int, h2: int, key=None, sub_id=None):
        self.h, self.h2, self.key, self.sub_id = h, h2, key, sub_id
        self.rows = {name: np.zeros(0, np.int64) for name in _ROWS}
        self.emitted, self.emitted_seq, self.lost = [], [], []
        self.decided_through, self.closed_through = NULL, NULL
        self.timeout_ms = None

    def kept(self) -> bool:
        """Whether anything of the key stays in the state."""
        return bool(len(self.rows["seq"]) or self.lost or self.closed_through != NULL)


def decode(values: tuple) -> dict[tuple[int, int], KeyState]:
    """A bucket's state (STATE) as its keys' states, by (h, h2)."""
    keys, rows, lost, text = values
    index = np.frombuffer(bytes(keys), np.int64).reshape(-1, len(_KEY_FIELDS))
    block = np.frombuffer(bytes(rows), np.int64).reshape(len(_ROWS), -1)
    lost = np.frombuffer(bytes(lost), np.int64)
    names, emitted = json.loads(text)
    out: dict[tuple[int, int], KeyState] = {}
    row, lost_at = 0, 0
    for i, (h, h2, sub_id, decided, closed, timeout, n, m) in enumerate(index.tolist()):
        keep = KeyState(h, h2, names[i], sub_id)
        keep.rows = {name: block[j, row:row + n] for j, name in enumerate(_ROWS)}
        keep.lost = lost[lost_at:lost_at + m].tolist()
        keep.emitted = [fid for fid, _ in emitted[i]]
        keep.emitted_seq = [seq for _, seq in emitted[i]]
        keep.decided_through, keep.closed_through = decided, closed
        keep.timeout_ms = None if timeout == NULL else timeout
        out[(h, h2)] = keep
        row, lost_at = row + n, lost_at + m
    return out


def encode(keys: dict[tuple[int, int], KeyState]) -> tuple:
    """The bucket's state (STATE) of its keys' states."""
    states = [keys[k] for k in sorted(keys)]
    lost = [np.asarray(keep.lost[-MAX_LOST_KEPT:], np.int64) for keep in states]
    index = np.array([[keep.h, keep.h2, keep.sub_id, keep.decided_through, keep.closed_through,
                       NULL if keep.timeout_ms is None else keep.timeout_ms, len(keep.rows["seq"]), len(gone)]
                      for keep, gone in zip(states, lost)], np.int64).reshape(-1, len(_KEY_FIELDS))
    block = np.stack([np.concatenate([keep.rows[name] for keep in states]).astype(np.int64) for name in _ROWS])
    text = json.dumps([[keep.key for keep in states],
                       [[[fid, seq] for fid, seq in zip(keep.emitted, keep.emitted_seq)] for keep in states]])
    return index.tobytes(), block.tobytes(), np.concatenate(lost).astype(np.int64).tobytes(), text


def _ints(series: pd.Series) -> np.ndarray:
    """A column as int64, NULL for a null. The query hands its numbers null-free (`stream.judged`), so they come as
    integers and are taken as they are; a column with nulls would have come as float64, inexact past 2**53."""
    if series.dtype.kind == "i":
        return series.to_numpy().astype(np.int64, copy=False)
    values = pd.to_numeric(series)
    return np.where(values.isna(), NULL, values.fillna(0)).astype(np.int64)


def _kernel_table(key_h: np.ndarray, key_h2: np.ndarray, seg: np.ndarray, rows: dict[str, np.ndarray]) -> pa.Table:
    """The kernel's input for some keys' rows (`seg`: each row's key, whose hashes are `key_h`, `key_h2`; one
    (h, h2) per key), in the batch checks' order (`checks.run._ORDER`: the key's hashes, seq, foreign last, time,
    row kind)."""
    meta, h = rows["meta"], key_h[seg]
    order = _kernel_order(key_h, key_h2, seg, meta, rows["seq"], rows["t"])

    def column(name):
        values = rows[name][order]
        return pa.array(values, pa.int64(), mask=values == NULL)

    return pa.table({"h": pa.array(h[order]), "meta": pa.array(meta[order]), "seq": column("seq"),
                     "t": pa.array(rows["t"][order]), "ack_t": column("ack_t"), "att": column("att")})


def _kernel_order(key_h, key_h2, seg, meta, seq, t) -> np.ndarray:
    """The stable order by (h, h2, seq, foreign last, t, row kind): (the key's place among the keys by (h, h2),
    seq) as one pair number and (foreign, t, kind) as one, sorted by `segments.sort_order`, when the times span
    less than 2**58 us; else np.lexsort on the six."""
    kind = meta & 3
    if len(t) and int(t.max()) - int(t.min()) < 2**58:
        place = np.empty(len(key_h), np.int64)
        place[np.lexsort((key_h2, key_h))] = np.arange(len(key_h))
        (pairs,), _ = segments.pair_ids((place[seg], seq))
        span = (int(t.max()) - int(t.min()) + 1) * 4
        inner = ((t - t.min()) << 2) + kind + (kind == chunk.FOREIGN).astype(np.int64) * span
        return segments.sort_order(pairs, inner, 2 * span)
    return np.lexsort((kind, t, kind == chunk.FOREIGN, seq, meta >> 32, key_h[seg]))


def _found(table: pa.Table, config: kernel.SubscriptionConfig, skew_us: int) -> list[dict]:
    """The kernel's findings over `table` (its statistics and plot rows left out)."""
    if table.num_rows == 0:
        return []
    out = []
    for batch in kernel.check_partition(iter(table.to_batches()), config, skew_us, 0):
        rows = batch.to_pylist()
        out.extend(r for r in rows if r["kind"] is not None)
    return out


def _facts(row: dict, **more) -> str:
    facts = {name: row[name] for name in FINDING_FACTS if row.get(name) is not None}
    facts.update({k: v for k, v in more.items() if v is not None})
    if row.get("ev_seqs"):
        facts["evidence_seqs"] = row["ev_seqs"]
    return json.dumps(facts, sort_keys=True)


def _new_rows(frames: Iterator[pd.DataFrame]) -> tuple[dict[str, np.ndarray] | None, int | None]:
    """The call's new rows but the clock's, as arrays sorted by key (h, h2), None when there are none; and the
    newest clock row's time (us), None without one."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return None, None
    new = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    sub_id = _ints(new["sub_id"])
    judged = sub_id != CLOCK_SUB
    clock_us, at = None, slice(None)
    if not judged.all():
        clock_us = int(_ints(new["t"])[~judged].max())
        if not judged.any():
            return None, clock_us
        at = np.flatnonzero(judged)
    columns = {name: _ints(new[name])[at] for name in ("h", *_ROWS)}
    h, h2 = columns["h"], columns["meta"] >> 32  # the key's second hash: meta's high half (checks.run._meta)
    order = np.lexsort((h2, h))  # stable: a key's rows keep the order Spark handed them in
    rows = {name: columns[name][order] for name in _ROWS}
    rows.update(h=h[order], h2=h2[order], sub_id=sub_id[at][order], key=new["key"].to_numpy(object)[at][order])
    return rows, clock_us


def _watermark(judge: JudgeConfig, spark_ms: int, clock_us: int | None) -> int:
    """The call's watermark (ms): Spark's, or the one the clock row gives the next window if later (JudgeConfig.
    delay_ms). Spark drops, from the next window on, every row older than that, so what is decided at it is what
    the next window would decide, one window sooner."""
    if clock_us is None or judge.delay_ms is None:
        return spark_ms
    return max(spark_ms, clock_us // 1000 - judge.delay_ms)


def _groups(new: dict[str, np.ndarray] | None) -> dict[tuple[int, int], tuple[int, int]]:
    """(h, h2) -> the (first, end) of its rows in `new`."""
    if new is None:
        return {}
    h, h2 = new["h"], new["h2"]
    starts = np.flatnonzero(np.concatenate([[True], (h[1:] != h[:-1]) | (h2[1:] != h2[:-1])]))
    ends = np.append(starts[1:], len(h))
    return {(int(h[lo]), int(h2[lo])): (int(lo), int(hi)) for lo, hi in zip(starts.tolist(), ends.tolist())}


def judge_bucket(judge: JudgeConfig, bucket: tuple, frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    """The step (`applyInPandasWithState`'s function) for a bucket of keys: each key with new rows, or whose own
    timeout the watermark passed, judged as a call for it alone would judge it."""
    keys = decode(state.get) if state.exists else {}
    new, clock_us = _new_rows(frames)
    watermark_ms = _watermark(judge, state.getCurrentWatermarkMs(), clock_us)
    groups = _groups(new)
    # Spark times a key out once the watermark passed its timeout (timeout < watermark), unless it has new rows
    timed_out = [k for k, keep in keys.items()
                 if k not in groups and keep.timeout_ms is not None and keep.timeout_ms < watermark_ms]
    out: list[dict] = []
    judged, fresh, stats = _take(judge, keys, new, groups, out)
    judged += [keys[k] for k in timed_out]
    if judged:
        _judge(judge, judged, fresh, stats, watermark_ms, out)
    for keep in judged:
        if not keep.kept():
            del keys[(keep.h, keep.h2)]
    if keys:
        state.update(encode(keys))
        timeouts = [keep.timeout_ms for keep in keys.values() if keep.timeout_ms is not None]
        if timeouts:
            state.setTimeoutTimestamp(min(timeouts))
    elif state.exists:
        state.remove()
    if out:
        yield _frame(out)


def _take(judge: JudgeConfig, keys: dict, new: dict | None, groups: dict, out: list[dict]):
    """The call's new rows: foreign ones judged at once (nothing can change them), late ones said. Returns the keys
    they judge (a key with rows of its own, or one already kept; in (h, h2) order), the rows to keep (`seg`: the
    key's place in that list) and per key its new rows' statistics (published, delivered, latencies)."""
    judged: list[KeyState] = []
    if new is None:
        return judged, None, {"published": [], "delivered": [], "latencies": []}
    kind = new["meta"] & 3
    lows = np.fromiter((lo for lo, _ in groups.values()), np.int64, len(groups))
    group = np.repeat(np.arange(len(groups)), np.diff(np.append(lows, len(kind))))
    is_foreign = kind == chunk.FOREIGN
    mine_at = np.flatnonzero(~is_foreign)
    first_mine = mine_at[np.minimum(np.searchsorted(mine_at, lows), max(0, len(mine_at) - 1))] if len(mine_at) else lows
    has_mine = np.bincount(group[mine_at], minlength=len(groups)) > 0
    has_foreign = np.bincount(group[is_foreign], minlength=len(groups)) > 0
    seg_of = np.full(len(groups), -1, np.int64)
    foreign: list[tuple[int, object, dict]] = []
    for g, k in enumerate(groups):
        keep = keys.get(k) or KeyState(*k)
        if has_foreign[g]:
            lo, hi = groups[k]
            at = lo + np.flatnonzero(is_foreign[lo:hi])
            foreign.append((keep.h, new["key"][at[0]], {name: new[name][at] for name in _ROWS}))
        if has_mine[g] and keep.sub_id is None:
            keep.sub_id, keep.key = int(new["sub_id"][first_mine[g]]), new["key"][first_mine[g]]
        if keep.sub_id is not None:  # else only rows that left nothing to keep (foreign)
            keys[k] = keep
            seg_of[g] = len(judged)
            judged.append(keep)
    n = len(judged)
    rows = {name: new[name][mine_at] for name in _ROWS}
    seg, kind = seg_of[group[mine_at]], kind[mine_at]
    meta, seq, t = rows["meta"], rows["seq"], rows["t"]
    stats = {"published": np.bincount(seg[(kind == chunk.PUBLISH) & (((meta >> 4) & 1) == 1)], minlength=n),
             "delivered": np.bincount(seg[kind == chunk.DELIVERY], minlength=n)}
    closed = np.fromiter((keep.closed_through for keep in judged), np.int64, n)
    delivered = kind != chunk.PUBLISH
    late = delivered & (seq <= closed[seg])
    lost = [(j, s) for j, keep in enumerate(judged) for s in keep.lost]
    if lost:
        (mine, gone), _ = segments.pair_ids((seg, seq), tuple(np.array(lost, np.int64).T))
        late |= delivered & np.isin(mine, gone)
    names = judge.subscriptions.names
    for i in np.flatnonzero(late).tolist():
        keep, s, at = judged[seg[i]], int(seq[i]), int(t[i])
        form = "after_lost" if s in keep.lost else "after_close"
        out.append({"rtype": "finding", "sub_id": keep.sub_id, "key": keep.key, "kind": "late_delivery",
                    "form": form, "severity": "advisory", "seq": s, "t": at,
                    "fid": finding_id(names[keep.sub_id], "late_delivery", form, keep.key, s, at),
                    "facts": json.dumps({"received_us": at, "horizon_s": judge.horizon_us[keep.sub_id] / 1e6})})
    _judge_foreign(judge, foreign, out)
    stats["latencies"] = _latencies(judged, seg, kind, seq, t)
    stay = ~(late & (seq <= closed[seg]))  # rows of messages that left the state do not come back
    return judged, {"seg": seg[stay], **{name: rows[name][stay] for name in _ROWS}}, stats


def _kept(keeps: list[KeyState]) -> dict[str, np.ndarray]:
    """The kept rows of `keeps`, one after the other, with `seg` (the key's place in `keeps`)."""
    sizes = np.fromiter((len(keep.rows["seq"]) for keep in keeps), np.int64, len(keeps))
    rows = {name: np.concatenate([keep.rows[name] for keep in keeps] or [np.zeros(0, np.int64)]).astype(np.int64)
            for name in _ROWS}
    return {"seg": np.repeat(np.arange(len(keeps)), sizes), **rows}


def _latencies(judged: list[KeyState], seg, kind, seq, t) -> list[list[float]]:
    """Per key, its first deliveries' latencies (in the order they came): a delivery of a seq that has a kept
    publish row and that no kept row delivered, from its earliest kept publish."""
    n = len(judged)
    wanted = np.flatnonzero(kind == chunk.DELIVERY)
    if not len(wanted):
        return [[] for _ in range(n)]
    kept = _kept(judged)
    pseg, pseq, ptime = segments.publish_times(kept["seg"], kept["seq"], kept["meta"], kept["t"])
    seen = (kept["meta"] & 3) == chunk.DELIVERY
    (published, seen, mine), _ = segments.pair_ids((pseg, pseq), (kept["seg"][seen], kept["seq"][seen]),
                                                   (seg[wanted], seq[wanted]))
    ok = np.isin(mine, published) & ~np.isin(mine, seen)
    wanted, mine = wanted[ok], mine[ok]
    first = np.sort(np.unique(mine, return_index=True)[1])  # each seq's first, in arrival order
    wanted, mine = wanted[first], mine[first]
    at = ptime[np.searchsorted(published, mine)]
    latency = np.maximum(0.0, (t[wanted] - at) / 1e6)
    ends = segments.bounds(seg[wanted], n)
    return [latency[ends[j]:ends[j + 1]].tolist() for j in range(n)]


def _judge(judge: JudgeConfig, judged: list[KeyState], fresh: dict | None, stats: dict, watermark_ms: int,
           out: list[dict]) -> None:
    """The judged keys' rows (kept, then `fresh`) decided, said, counted, let go, and each key's next timeout."""
    n = len(judged)
    watermark_us = max(0, watermark_ms) * 1000
    rows = _kept(judged)
    if fresh is not None and len(fresh["seg"]):
        order = np.argsort(np.concatenate([rows["seg"], fresh["seg"]]), kind="stable")  # a key's kept rows first
        rows = {name: np.concatenate([rows[name], fresh[name]])[order] for name in rows}
    horizon = np.asarray(judge.horizon_us, np.int64)[np.fromiter((keep.sub_id for keep in judged), np.int64, n)]
    through = np.fromiter((keep.decided_through for keep in judged), np.int64, n)
    mseg, mseq, start = segments.message_times(rows["seg"], rows["seq"], rows["meta"], rows["t"])
    decided = start + horizon[mseg] <= watermark_us
    newly = decided & (mseq > through[mseg])
    _decide(judge, judged, rows, (mseg, mseq, decided, newly), through, out)
    through = segments.seg_max(mseg[newly], mseq[newly], through)
    unsettled = segments.unsettled(rows["seg"], rows["seq"], rows["meta"], n)
    counts = np.bincount(mseg[newly], minlength=n)
    published, delivered = stats["published"], stats["delivered"]
    latencies = stats["latencies"] + [[] for _ in range(n - len(stats["latencies"]))]
    for j, keep in enumerate(judged):
        keep.decided_through = int(through[j])
        out.append({"rtype": "stats", "sub_id": keep.sub_id, "key": keep.key,
                    "published": int(published[j]) if j < len(published) else 0,
                    "delivered": int(delivered[j]) if j < len(delivered) else 0, "decided": int(counts[j]),
                    "unsettled": int(unsettled[j]), "latencies": latencies[j]})
    # the rows of messages decided one horizon ago leave the state (with their findings' ids)
    gone = (start + 2 * horizon[mseg] <= watermark_us) & (mseq <= through[mseg])
    if gone.any():
        closed = np.fromiter((keep.closed_through for keep in judged), np.int64, n)
        closed = segments.seg_max(mseg[gone], mseq[gone], closed)
        evicted = np.bincount(mseg[gone], minlength=n) > 0
        (kept, left), _ = segments.pair_ids((rows["seg"], rows["seq"]), (mseg[gone], mseq[gone]))
        seq = rows["seq"]
        drop = evicted[rows["seg"]] & (np.isin(kept, left) | ((seq != NULL) & (seq <= closed[rows["seg"]])))
        rows = {name: values[~drop] for name, values in rows.items()}
        for j in np.flatnonzero(evicted).tolist():
            keep = judged[j]
            keep.closed_through = int(closed[j])
            if keep.emitted:
                still = [(fid, s) for fid, s in zip(keep.emitted, keep.emitted_seq) if s > keep.closed_through]
                keep.emitted, keep.emitted_seq = [fid for fid, _ in still], [s for _, s in still]
        # a message's rows all go or all stay (the test is of its (seg, seq)), in their order: the messages left
        # are the ones that stayed, with the same start
        stays = ~(evicted[mseg] & (gone | ((mseq != NULL) & (mseq <= closed[mseg]))))
        mseg, mseq, start = mseg[stays], mseq[stays], start[stays]
    # when each key next has something to decide or to let go
    upcoming, some = segments.seg_min(mseg, start + np.where(mseq > through[mseg], 1, 2) * horizon[mseg], n)
    ends = segments.bounds(rows["seg"], n)
    for j, keep in enumerate(judged):
        keep.rows = {name: rows[name][ends[j]:ends[j + 1]] for name in _ROWS}
        keep.timeout_ms = max(int(upcoming[j]) // 1000, watermark_ms + 1) if some[j] and keep.kept() else None


def _decide(judge: JudgeConfig, judged: list[KeyState], rows: dict, messages: tuple, through: np.ndarray,
            out: list[dict]) -> None:
    """Findings of the messages decided by now (their horizon passed the watermark), each written once.

    One kernel call over every kept row of the keys that have a decided message, as proven: `lost_proven` changes
    nothing but `lost` (kernel.completeness), and a message's `lost` depends on its own rows only; so the other
    findings are those of the decided messages, and `lost` is said of the newly decided ones alone (once). The
    kernel judges each key on its own rows, so one call over many keys finds what a call per key finds."""
    mseg, mseq, decided, newly = messages
    n = len(judged)
    with_decided = np.bincount(mseg[decided], minlength=n) > 0
    if not with_decided.any():
        return
    names = judge.subscriptions.names
    proven = kernel.SubscriptionConfig(**{**judge.subscriptions.__dict__, "lost_proven": (True,) * len(names)})
    mine = with_decided[rows["seg"]]
    h = np.fromiter((keep.h for keep in judged), np.int64, n)
    h2 = np.fromiter((keep.h2 for keep in judged), np.int64, n)
    table = _kernel_table(h, h2, rows["seg"][mine], {name: rows[name][mine] for name in _ROWS})
    place = {(keep.h, keep.h2): j for j, keep in enumerate(judged)}
    found: dict[int, list[dict]] = {}
    for f in _found(table, proven, judge.skew_us):
        found.setdefault(place[(f["h"], f["h2"])], []).append(f)
    ends = segments.bounds(mseg, n)
    for j in sorted(found):
        lo, hi = ends[j], ends[j + 1]
        _said(judge, judged[j], found[j], set(mseq[lo:hi][decided[lo:hi]].tolist()),
              set(mseq[lo:hi][newly[lo:hi]].tolist()), out)

def _frame(out: list[dict]) -> pd.DataFrame:
    columns = [c.split()[0] for c in OUTPUT.split(", ")]
    return pd.DataFrame([{c: r.get(c) for c in columns} for r in out], columns=columns)


def _judge_foreign(judge: JudgeConfig, foreign: list, out: list[dict]) -> None:
    """The foreign rows of the call's keys, judged together (each `(h, key name, rows)`)."""
    if not foreign:
        return
    names = {(h, int(rows["meta"][0] >> 32)): key for h, key, rows in foreign}
    seg = np.concatenate([np.full(len(rows["seq"]), j, np.int64) for j, (_, _, rows) in enumerate(foreign)])
    table = _kernel_table(np.array([h for h, _, _ in foreign], np.int64),
                          np.array([int(rows["meta"][0] >> 32) for _, _, rows in foreign], np.int64), seg,
                          {name: np.concatenate([rows[name] for _, _, rows in foreign]) for name in _ROWS})
    for f in _found(table, judge.subscriptions, judge.skew_us):
        out.append(_finding(f, names[(f["h"], f["h2"])], judge.subscriptions.names))


def _said(judge: JudgeConfig, keep: KeyState, found: list[dict], decided: set[int], newly: set[int],
          out: list[dict]) -> None:
    """What the kernel found of the key's decided messages (`newly`: those decided in this call), written once
    (`out`)."""
    horizon = judge.horizon_us[keep.sub_id]
    names = judge.subscriptions.names
    emitted = set(keep.emitted)
    said = []
    for f in found:
        if f["seq"] is None or f["seq"] not in (newly if f["kind"] == "lost" else decided):
            continue
        if f["kind"] == "lost":
            published = f.get("published_us")
            at_crash = published is not None and any(lo <= published <= hi for lo, hi in judge.crash_windows)
            f["form"] = "at_crash" if at_crash else "past_horizon"
            if at_crash:
                f["severity"] = "advisory"
            keep.lost.append(int(f["seq"]))
        said.append(f)
    for f in said:
        if f["kind"] == "unexpected" and f["form"] == "unpublished" and _unrecorded(judge, keep.sub_id, keep.key, f["seq"]):
            # published by this watch's publisher, which was stopped before it wrote the row (a crash): said as
            # such, not as the target's delivery of something never published
            f = {**f, "form": "unrecorded", "severity": "advisory"}
        record = _finding(f, keep.key, names, horizon_s=horizon / 1e6 if f["kind"] == "lost" else None)
        if record["fid"] in emitted:
            continue
        emitted.add(record["fid"])
        keep.emitted.append(record["fid"])
        keep.emitted_seq.append(int(f["seq"]))
        out.append(record)


def _finding(f: dict, key, names: tuple[str, ...], horizon_s: float | None = None) -> dict:
    sub = f["subscription"]
    return {"rtype": "finding", "sub_id": names.index(sub), "key": key, "kind": f["kind"], "form": f["form"],
            "severity": f["severity"], "seq": f["seq"], "t": f["t"],
            "fid": finding_id(sub, f["kind"], f["form"], key, f["seq"], f["t"] if f["mh"] is None else f["mh"]),
            "facts": _facts(f, horizon_s=horizon_s)}
