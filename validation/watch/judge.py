"""The streaming checks' per-key step: what `pubsubguard watch` decides of one (subscription, ordering key) each
time Spark's state store hands it new rows or its timeout passes (`applyInPandasWithState`).

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

# what a call returns: findings and one statistics row per call
OUTPUT = (
    "rtype string, sub_id int, key string, kind string, form string, severity string, seq long, t long, "
    "fid string, facts string, published long, delivered long, decided long, unsettled long, "
    "latencies array<double>"
)
# what the state store keeps of a key
# (the rows are one int64 block of shape (5, n), the emitted ids `fid seq` lines: PySpark 4.3's Python worker
# cannot read a state schema that has arrays, KeyError 'elementType' in ArrayType.fromJson)
STATE = ("key string, sub_id int, rows binary, emitted string, lost binary, decided_through long, "
         "closed_through long")
_ROWS = ("seq", "meta", "t", "ack_t", "att")
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
    """One key's state as arrays (NULL for a null number)."""

    def __init__(self, values: tuple | None):
        if values is None:
            self.key, self.sub_id = None, None
            self.rows = {name: np.zeros(0, np.int64) for name in _ROWS}
            self.emitted, self.emitted_seq, self.lost = [], [], []
            self.decided_through, self.closed_through = NULL, NULL
            return
        self.key, self.sub_id, rows, emitted, lost, self.decided_through, self.closed_through = values
        block = np.frombuffer(bytes(rows), np.int64).reshape(len(_ROWS), -1)
        self.rows = {name: block[i].copy() for i, name in enumerate(_ROWS)}
        pairs = [line.split(" ") for line in emitted.split("\n") if line]
        self.emitted, self.emitted_seq = [p[0] for p in pairs], [int(p[1]) for p in pairs]
        self.lost = np.frombuffer(bytes(lost), np.int64).tolist()

    def as_tuple(self) -> tuple:
        block = np.stack([self.rows[name] for name in _ROWS]) if len(self.rows["seq"]) else np.zeros((len(_ROWS), 0), np.int64)
        emitted = "".join(f"{fid} {seq}\n" for fid, seq in zip(self.emitted, self.emitted_seq))
        return (self.key, self.sub_id, block.astype(np.int64).tobytes(), emitted,
                np.asarray(self.lost[-MAX_LOST_KEPT:], np.int64).tobytes(), int(self.decided_through),
                int(self.closed_through))


def _ints(series: pd.Series) -> np.ndarray:
    """A column as int64, NULL for a null. The query hands its numbers null-free (`stream.judged`), so they come as
    int64 and are taken as they are; a column with nulls would have come as float64, inexact past 2**53."""
    if series.dtype == np.int64:
        return series.to_numpy()
    values = pd.to_numeric(series)
    return np.where(values.isna(), NULL, values.fillna(0)).astype(np.int64)


def _kernel_table(rows: dict[str, np.ndarray], h: int) -> pa.Table:
    """The kernel's input for one key, in the batch checks' order (`checks.run._ORDER`: seq, foreign last,
    time, row kind)."""
    order = np.lexsort((rows["meta"] & 3, rows["t"], (rows["meta"] & 3) == chunk.FOREIGN, rows["seq"]))

    def column(name):
        values = rows[name][order]
        return pa.array(values, pa.int64(), mask=values == NULL)

    return pa.table({"h": pa.array(np.full(len(order), h, np.int64)), "meta": pa.array(rows["meta"][order]),
                     "seq": column("seq"), "t": pa.array(rows["t"][order]), "ack_t": column("ack_t"),
                     "att": column("att")})


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


def judge_key(judge: JudgeConfig, key: tuple, frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    """The step (`applyInPandasWithState`'s function) for the key `(h, h2)`."""
    h = int(key[0])
    new = [f for f in frames if len(f)]
    new = pd.concat(new, ignore_index=True) if new else None
    if new is not None:
        new = new[new["sub_id"] != CLOCK_SUB]
    if h == 0 and (new is None or not len(new)):  # the clock's group: nothing to judge, nothing kept
        if state.exists:
            state.remove()
        return
    keep = KeyState(state.get if state.exists else None)
    watermark_us = max(0, state.getCurrentWatermarkMs()) * 1000
    out: list[dict] = []
    stats = {"published": 0, "delivered": 0, "latencies": []}
    if new is not None and len(new):
        _take(judge, keep, new, out, stats)
    if keep.sub_id is None:  # only rows that left nothing to keep (foreign)
        yield _frame(out)
        return
    decided = _decide(judge, keep, h, watermark_us, out)
    out.append({"rtype": "stats", "sub_id": keep.sub_id, "key": keep.key, "published": stats["published"],
                "delivered": stats["delivered"], "decided": decided, "unsettled": _unsettled(keep),
                "latencies": stats["latencies"]})
    _evict(judge, keep, watermark_us)
    if len(keep.rows["seq"]) or keep.lost or keep.closed_through != NULL:
        state.update(keep.as_tuple())
        upcoming = _next_time(judge, keep)
        if upcoming is not None:
            state.setTimeoutTimestamp(max(upcoming // 1000, state.getCurrentWatermarkMs() + 1))
    else:
        state.remove()
    yield _frame(out)


def _frame(out: list[dict]) -> pd.DataFrame:
    columns = [c.split()[0] for c in OUTPUT.split(", ")]
    return pd.DataFrame([{c: r.get(c) for c in columns} for r in out], columns=columns)


def _take(judge: JudgeConfig, keep: KeyState, new: pd.DataFrame, out: list[dict], stats: dict) -> None:
    """The new rows: foreign ones judged at once (nothing can change them), late ones said, the rest kept."""
    meta = _ints(new["meta"])
    kind = meta & 3
    seq = _ints(new["seq"])
    names = judge.subscriptions.names
    foreign = kind == chunk.FOREIGN
    if foreign.any():
        rows = new[foreign]
        table = _kernel_table({"seq": seq[foreign], "meta": meta[foreign], "t": _ints(rows["t"]),
                               "ack_t": _ints(rows["ack_t"]), "att": _ints(rows["att"])}, 0)
        for f in _found(table, judge.subscriptions, judge.skew_us):
            out.append(_finding(f, rows["key"].iloc[0], names))  # a group's rows are one key's
    mine = ~foreign
    if not mine.any():
        return
    rows = new[mine]
    meta, kind, seq = meta[mine], kind[mine], seq[mine]
    t = _ints(rows["t"])
    if keep.sub_id is None:
        keep.sub_id = int(rows["sub_id"].iloc[0])
        keep.key = rows["key"].iloc[0]
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
    # a first delivery's latency: from its publish (the key's kept publish rows)
    published_at = _publish_times(keep.rows["seq"], keep.rows["meta"], keep.rows["t"])
    seen = set(keep.rows["seq"][(keep.rows["meta"] & 3) == chunk.DELIVERY].tolist())
    for i in np.flatnonzero(kind == chunk.DELIVERY):
        s = int(seq[i])
        if s in published_at and s not in seen:
            stats["latencies"].append(max(0.0, (t[i] - published_at[s]) / 1e6))
            seen.add(s)
    stay = ~(late & (seq <= keep.closed_through))  # rows of messages that left the state do not come back
    for name, values in (("seq", seq), ("meta", meta), ("t", t), ("ack_t", _ints(rows["ack_t"])),
                         ("att", _ints(rows["att"]))):
        keep.rows[name] = np.concatenate([keep.rows[name], values[stay]])


def _publish_times(seq: np.ndarray, meta: np.ndarray, t: np.ndarray) -> dict[int, int]:
    """seq -> its first publish row's time."""
    times: dict[int, int] = {}
    for s, m, when in zip(seq.tolist(), meta.tolist(), t.tolist()):
        if m & 3 == chunk.PUBLISH and (s not in times or when < times[s]):
            times[s] = when
    return times


def _message_times(keep: KeyState) -> dict[int, int]:
    """seq -> when the message started (its publish, else its first row), for every kept message."""
    seq, t = keep.rows["seq"], keep.rows["t"]
    starts = _publish_times(seq, keep.rows["meta"], t)
    for s, when in zip(seq.tolist(), t.tolist()):
        if s != NULL and s not in starts:
            starts[s] = min(when, starts.get(s, when))
    return starts


def _decide(judge: JudgeConfig, keep: KeyState, h: int, watermark_us: int, out: list[dict]) -> int:
    """Findings of the messages decided by now (their horizon passed the watermark), each written once; how
    many messages were newly decided."""
    horizon = judge.horizon_us[keep.sub_id]
    starts = _message_times(keep)
    decided = {s for s, when in starts.items() if when + horizon <= watermark_us}
    newly = sorted(s for s in decided if s > keep.decided_through)
    names = judge.subscriptions.names
    emitted = set(keep.emitted)
    found = []
    if decided:
        # one kernel call over every kept row, as proven: `lost_proven` changes nothing but `lost` (kernel.completeness),
        # and a message's `lost` depends on its own rows only; so the other findings are those of the decided
        # messages, and `lost` is said of the newly decided ones alone (once)
        newly_set = set(newly)
        proven = kernel.SubscriptionConfig(**{**judge.subscriptions.__dict__, "lost_proven": (True,) * len(names)})
        for f in _found(_kernel_table(keep.rows, h), proven, judge.skew_us):
            if f["seq"] is None or f["seq"] not in (newly_set if f["kind"] == "lost" else decided):
                continue
            if f["kind"] == "lost":
                published = f.get("published_us")
                at_crash = published is not None and any(lo <= published <= hi for lo, hi in judge.crash_windows)
                f["form"] = "at_crash" if at_crash else "past_horizon"
                if at_crash:
                    f["severity"] = "advisory"
                keep.lost.append(int(f["seq"]))
            found.append(f)
    if newly:
        keep.decided_through = max(keep.decided_through, newly[-1])
    for f in found:
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
    published = set(seq[(kind == chunk.PUBLISH) & (ok == 1)].tolist())
    settled = set(seq[(kind == chunk.DEAD_LETTER) | ((kind == chunk.DELIVERY) & (ok == 1)
                                                      & ((act == chunk.ACT_ACK) | (act == chunk.ACT_LATE_ACK)))].tolist())
    return len(published - settled)


def _evict(judge: JudgeConfig, keep: KeyState, watermark_us: int) -> None:
    """The rows of messages decided one horizon ago leave the state (with their findings' ids)."""
    horizon = judge.horizon_us[keep.sub_id]
    gone = sorted(s for s, when in _message_times(keep).items()
                  if when + 2 * horizon <= watermark_us and s <= keep.decided_through)
    if not gone:
        return
    keep.closed_through = max(keep.closed_through, gone[-1])
    stay = ~np.isin(keep.rows["seq"], gone) & ~((keep.rows["seq"] != NULL) & (keep.rows["seq"] <= keep.closed_through))
    keep.rows = {name: values[stay] for name, values in keep.rows.items()}
    kept = [(fid, s) for fid, s in zip(keep.emitted, keep.emitted_seq) if s > keep.closed_through]
    keep.emitted = [fid for fid, _ in kept]
    keep.emitted_seq = [s for _, s in kept]


def _next_time(judge: JudgeConfig, keep: KeyState) -> int | None:
    """When this key next has something to decide or to let go (microseconds), None when nothing is kept."""
    horizon = judge.horizon_us[keep.sub_id]
    times = []
    for s, when in _message_times(keep).items():
        times.append(when + (horizon if s > keep.decided_through else 2 * horizon))
    return min(times) if times else None
