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
something decided (sorted by key, as the batch checks hand it a partition), not once per key.

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

# PySpark 4.3's applyInPandasWithState serializer (pyspark/worker.py) pads each output chunk with an empty frame and
# pd.concat warns of it on every window, on the watch's terminal: the warning is about PySpark's frames, not ours,
# and pandas' future behaviour changes nothing for them (the dtypes come from the output schema).
warnings.filterwarnings("ignore", message="The behavior of DataFrame concatenation with empty or all-NA entries",
                        category=FutureWarning)

NULL = -(2**62)  # a null number in the state's arrays
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


def _kernel_table(parts: list[tuple[int, dict[str, np.ndarray]]]) -> pa.Table:
    """The kernel's input for some keys (each `(h, rows)`), in the batch checks' order (`checks.run._ORDER`: the
    key's hashes, seq, foreign last, time, row kind)."""
    rows = {name: np.concatenate([part[name] for _, part in parts]) for name in _ROWS}
    h = np.concatenate([np.full(len(part["seq"]), key_h, np.int64) for key_h, part in parts])
    meta = rows["meta"]
    order = np.lexsort((meta & 3, rows["t"], (meta & 3) == chunk.FOREIGN, rows["seq"], meta >> 32, h))

    def column(name):
        values = rows[name][order]
        return pa.array(values, pa.int64(), mask=values == NULL)

    return pa.table({"h": pa.array(h[order]), "meta": pa.array(meta[order]), "seq": column("seq"),
                     "t": pa.array(rows["t"][order]), "ack_t": column("ack_t"), "att": column("att")})


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


def _new_rows(frames: Iterator[pd.DataFrame]) -> dict[str, np.ndarray] | None:
    """The call's new rows but the clock's, as arrays sorted by key (h, h2); None when there are none."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    new = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    sub_id = _ints(new["sub_id"])
    judged = sub_id != CLOCK_SUB
    if not judged.all():
        new, sub_id = new[judged], sub_id[judged]
    if not len(new):
        return None
    h, h2 = _ints(new["h"]), _ints(new["h2"])
    order = np.lexsort((h2, h))  # stable: a key's rows keep the order Spark handed them in
    rows = {name: _ints(new[name])[order] for name in _ROWS}
    rows.update(h=h[order], h2=h2[order], sub_id=sub_id[order], key=new["key"].to_numpy(object)[order])
    return rows


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
    watermark_ms = state.getCurrentWatermarkMs()
    watermark_us = max(0, watermark_ms) * 1000
    keys = decode(state.get) if state.exists else {}
    new = _new_rows(frames)
    groups = _groups(new)
    # Spark times a key out once the watermark passed its timeout (timeout < watermark), unless it has new rows
    timed_out = [k for k, keep in keys.items()
                 if k not in groups and keep.timeout_ms is not None and keep.timeout_ms < watermark_ms]
    out: list[dict] = []
    foreign: list[tuple[int, object, dict]] = []
    judged: list[tuple[KeyState, dict]] = []
    for k, (lo, hi) in groups.items():
        keep = keys.get(k) or KeyState(*k)
        stats = {"published": 0, "delivered": 0, "latencies": []}
        _take(judge, keep, {name: values[lo:hi] for name, values in new.items()}, out, stats, foreign)
        if keep.sub_id is not None:  # else only rows that left nothing to keep (foreign)
            keys[k] = keep
            judged.append((keep, stats))
    judged += [(keys[k], {"published": 0, "delivered": 0, "latencies": []}) for k in timed_out]
    _judge_foreign(judge, foreign, out)
    times = [_message_times(keep) for keep, _ in judged]  # the rows do not change until some are evicted
    decided = _decide_all(judge, [keep for keep, _ in judged], times, watermark_us, out)
    for (keep, stats), newly, when in zip(judged, decided, times):
        out.append({"rtype": "stats", "sub_id": keep.sub_id, "key": keep.key, "published": stats["published"],
                    "delivered": stats["delivered"], "decided": newly, "unsettled": _unsettled(keep),
                    "latencies": stats["latencies"]})
        if _evict(judge, keep, when, watermark_us):
            when = _message_times(keep)
        if keep.kept():
            upcoming = _next_time(judge, keep, when)
            keep.timeout_ms = None if upcoming is None else max(upcoming // 1000, watermark_ms + 1)
        else:
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


def _frame(out: list[dict]) -> pd.DataFrame:
    columns = [c.split()[0] for c in OUTPUT.split(", ")]
    return pd.DataFrame([{c: r.get(c) for c in columns} for r in out], columns=columns)


def _take(judge: JudgeConfig, keep: KeyState, new: dict[str, np.ndarray], out: list[dict], stats: dict,
          foreign: list) -> None:
    """A key's new rows: foreign ones set aside to be judged at once (nothing can change them), late ones said,
    the rest kept."""
    meta = new["meta"]
    kind = meta & 3
    seq = new["seq"]
    names = judge.subscriptions.names
    is_foreign = kind == chunk.FOREIGN
    if is_foreign.any():
        first = int(np.flatnonzero(is_foreign)[0])
        foreign.append((keep.h, new["key"][first], {name: new[name][is_foreign] for name in _ROWS}))
    mine = ~is_foreign
    if not mine.any():
        return
    rows = {name: values[mine] for name, values in new.items()}
    meta, kind, seq, t = rows["meta"], kind[mine], rows["seq"], rows["t"]
    if keep.sub_id is None:
        keep.sub_id = int(rows["sub_id"][0])
        keep.key = rows["key"][0]
    sub = names[keep.sub_id]
    horizon_s = judge.horizon_us[keep.sub_id] / 1e6
    delivered = kind != chunk.PUBLISH
    stats["published"] += int(((kind == chunk.PUBLISH) & (((meta >> 4) & 1) == 1)).sum())
    stats["delivered"] += int((kind == chunk.DELIVERY).sum())
    lost = set(keep.lost)
    late = delivered & ((seq <= keep.closed_through) | np.isin(seq, list(lost)))
    for i in np.flatnonzero(late):
        form = "after_lost" if int(seq[i]) in lost else "after_close"
        out.append({"rtype": "finding", "sub_id": keep.sub_id, "key": keep.key, "kind": "late_delivery",
                    "form": form, "severity": "advisory", "seq": int(seq[i]), "t": int(t[i]),
                    "fid": finding_id(sub, "late_delivery", form, keep.key, int(seq[i]), int(t[i])),
                    "facts": json.dumps({"received_us": int(t[i]), "horizon_s": horizon_s})})
    # a first delivery's latency: from its publish (the key's kept publish rows), for a seq no kept row delivered
    published, published_at = _publish_times(keep.rows["seq"], keep.rows["meta"], keep.rows["t"])
    seen = keep.rows["seq"][(keep.rows["meta"] & 3) == chunk.DELIVERY]
    first = np.flatnonzero(kind == chunk.DELIVERY)
    first = first[np.isin(seq[first], published) & ~np.isin(seq[first], seen)]
    if len(first):
        first = first[np.sort(np.unique(seq[first], return_index=True)[1])]  # each seq's first, in arrival order
        at = published_at[np.searchsorted(published, seq[first])]
        stats["latencies"].extend(np.maximum(0.0, (t[first] - at) / 1e6).tolist())
    stay = ~(late & (seq <= keep.closed_through))  # rows of messages that left the state do not come back
    for name in _ROWS:
        keep.rows[name] = np.concatenate([keep.rows[name], rows[name][stay]])


def _judge_foreign(judge: JudgeConfig, foreign: list, out: list[dict]) -> None:
    """The foreign rows of the call's keys, judged together (each `(h, key name, rows)`)."""
    if not foreign:
        return
    names = {(h, int(rows["meta"][0] >> 32)): key for h, key, rows in foreign}
    table = _kernel_table([(h, rows) for h, _, rows in foreign])
    for f in _found(table, judge.subscriptions, judge.skew_us):
        out.append(_finding(f, names[(f["h"], f["h2"])], judge.subscriptions.names))


def _publish_times(seq: np.ndarray, meta: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The seqs that have a publish row (sorted), and each one's earliest publish row's time."""
    published = (meta & 3) == chunk.PUBLISH
    seqs, which = np.unique(seq[published], return_inverse=True)
    times = np.full(len(seqs), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(times, which.reshape(-1), t[published])
    return seqs, times


def _message_times(keep: KeyState) -> tuple[np.ndarray, np.ndarray]:
    """Every kept message's seq (sorted) and when it started: its publish, else its first row kept (in the order the
    rows came)."""
    seq, t = keep.rows["seq"], keep.rows["t"]
    seqs, starts = _publish_times(seq, keep.rows["meta"], t)
    other = (seq != NULL) & ~np.isin(seq, seqs)
    if other.any():
        more, first = np.unique(seq[other], return_index=True)
        seqs, starts = np.concatenate([seqs, more]), np.concatenate([starts, t[other][first]])
        order = np.argsort(seqs, kind="stable")
        seqs, starts = seqs[order], starts[order]
    return seqs, starts


def _decide_all(judge: JudgeConfig, keeps: list[KeyState], times: list, watermark_us: int,
                out: list[dict]) -> list[int]:
    """Findings of the messages decided by now (their horizon passed the watermark), each written once; per key,
    how many messages were newly decided.

    One kernel call over every kept row of the keys that have a decided message, as proven: `lost_proven` changes
    nothing but `lost` (kernel.completeness), and a message's `lost` depends on its own rows only; so the other
    findings are those of the decided messages, and `lost` is said of the newly decided ones alone (once). The
    kernel judges each key on its own rows, so one call over many keys finds what a call per key finds."""
    due = [_due(judge, keep, when, watermark_us) for keep, when in zip(keeps, times)]
    with_decided = [keep for keep, (decided, _) in zip(keeps, due) if decided]
    found: dict[tuple[int, int], list[dict]] = {}
    if with_decided:
        names = judge.subscriptions.names
        proven = kernel.SubscriptionConfig(**{**judge.subscriptions.__dict__, "lost_proven": (True,) * len(names)})
        table = _kernel_table([(keep.h, keep.rows) for keep in with_decided])
        for f in _found(table, proven, judge.skew_us):
            found.setdefault((f["h"], f["h2"]), []).append(f)
    return [_said(judge, keep, found.get((keep.h, keep.h2), []), decided, newly, out)
            for keep, (decided, newly) in zip(keeps, due)]


def _due(judge: JudgeConfig, keep: KeyState, times: tuple, watermark_us: int) -> tuple[set[int], list[int]]:
    """The key's kept messages decided by now, and those of them newly decided (sorted); `times`: _message_times."""
    seqs, starts = times
    decided = seqs[starts + judge.horizon_us[keep.sub_id] <= watermark_us]
    return set(decided.tolist()), decided[decided > keep.decided_through].tolist()


def _said(judge: JudgeConfig, keep: KeyState, found: list[dict], decided: set[int], newly: list[int],
          out: list[dict]) -> int:
    """What the kernel found of the key's decided messages, written once (`out`); how many were newly decided."""
    horizon = judge.horizon_us[keep.sub_id]
    names = judge.subscriptions.names
    newly_set = set(newly)
    emitted = set(keep.emitted)
    said = []
    for f in found:
        if f["seq"] is None or f["seq"] not in (newly_set if f["kind"] == "lost" else decided):
            continue
        if f["kind"] == "lost":
            published = f.get("published_us")
            at_crash = published is not None and any(lo <= published <= hi for lo, hi in judge.crash_windows)
            f["form"] = "at_crash" if at_crash else "past_horizon"
            if at_crash:
                f["severity"] = "advisory"
            keep.lost.append(int(f["seq"]))
        said.append(f)
    if newly:
        keep.decided_through = max(keep.decided_through, newly[-1])
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
    return len(newly)


def _finding(f: dict, key, names: tuple[str, ...], horizon_s: float | None = None) -> dict:
    sub = f["subscription"]
    return {"rtype": "finding", "sub_id": names.index(sub), "key": key, "kind": f["kind"], "form": f["form"],
            "severity": f["severity"], "seq": f["seq"], "t": f["t"],
            "fid": finding_id(sub, f["kind"], f["form"], key, f["seq"], f["t"] if f["mh"] is None else f["mh"]),
            "facts": _facts(f, horizon_s=horizon_s)}


def _unsettled(keep: KeyState) -> int:
    """Kept messages published and not yet acked with success nor dead-lettered."""
    seq, meta = keep.rows["seq"], keep.rows["meta"]
    kind, ok, act = meta & 3, (meta >> 4) & 1, (meta >> 2) & 3
    published = seq[(kind == chunk.PUBLISH) & (ok == 1)]
    settled = seq[(kind == chunk.DEAD_LETTER) | ((kind == chunk.DELIVERY) & (ok == 1)
                                                 & ((act == chunk.ACT_ACK) | (act == chunk.ACT_LATE_ACK)))]
    return len(np.setdiff1d(published, settled))


def _evict(judge: JudgeConfig, keep: KeyState, times: tuple, watermark_us: int) -> bool:
    """The rows of messages decided one horizon ago leave the state (with their findings' ids); whether some
    did. `times`: _message_times."""
    seqs, starts = times
    gone = seqs[(starts + 2 * judge.horizon_us[keep.sub_id] <= watermark_us) & (seqs <= keep.decided_through)]
    if not len(gone):
        return False
    keep.closed_through = max(keep.closed_through, int(gone[-1]))
    stay = ~np.isin(keep.rows["seq"], gone) & ~((keep.rows["seq"] != NULL) & (keep.rows["seq"] <= keep.closed_through))
    keep.rows = {name: values[stay] for name, values in keep.rows.items()}
    kept = [(fid, s) for fid, s in zip(keep.emitted, keep.emitted_seq) if s > keep.closed_through]
    keep.emitted = [fid for fid, _ in kept]
    keep.emitted_seq = [s for _, s in kept]
    return True


def _next_time(judge: JudgeConfig, keep: KeyState, times: tuple) -> int | None:
    """When this key next has something to decide or to let go (microseconds), None when nothing is kept.
    `times`: _message_times."""
    seqs, starts = times
    if not len(seqs):
        return None
    horizon = judge.horizon_us[keep.sub_id]
    return int((starts + np.where(seqs > keep.decided_through, horizon, 2 * horizon)).min())
