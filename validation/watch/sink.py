"""What `pubsubguard watch` does with each judged window (the streaming query's `foreachBatch`): the window's
findings appended to findings.jsonl exactly once, its verdict per subscription and guarantee (the batch
checks' truth table, `checks.verdict.guarantee_status`), the metrics, one terminal line, the rolling report.

findings.jsonl is written exactly once per window although Spark may run a window again after a crash (the
last one, whose commit it had not written): `findings.commit` names the last window whose lines are whole and
the file's length then. A window at or below it is not written again; a file longer than it (a crash in the
middle of a write) is cut back to it first. Each line's `id` is the finding's stable id (`judge.finding_id`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..checks import applied_faults
from ..checks.findings import FINDING_KINDS
from ..checks.verdict import guarantee_status
from ..checks.wording import counted

WINDOWS_KEPT = 120  # windows the rolling report shows


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class WatchTotals:
    """What this process's windows said, for the last line and the exit code."""

    windows: int = 0
    errors: int = 0
    errors_planted: int = 0
    errors_explained: Counter = field(default_factory=Counter)  # scenario ids -> error findings they explain
    findings: Counter = field(default_factory=Counter)
    last_line: str = ""
    last_breakage: float | None = None
    broken: set = field(default_factory=set)  # "subscription.guarantee" ever violated in this process
    late_rows: int = 0  # evidence rows that reached the query behind its watermark, not judged

    def errors_said(self) -> str:
        """`3 error findings: 1 planted, 2 explained by stream-reset-keeps-delivering (violated on this target)`."""
        parts = [f"{self.errors_planted} planted"] if self.errors_planted else []
        parts += [f"{n} explained by {ids} (violated on this target)" for ids, n in sorted(self.errors_explained.items())]
        unexplained = self.errors - self.errors_planted - sum(self.errors_explained.values())
        if parts:
            parts.append(f"{unexplained} unexplained")
        return counted(self.errors, "error finding") + (f": {', '.join(parts)}" if parts else "")


class WindowSink:
    """The query's `foreachBatch`: `sink(frame, window_id)`."""

    def __init__(self, out: Path, subscriptions: list, topic_of: dict, horizons: dict, metrics=None,
                 planted=lambda: [], window_s: float = 30.0, show=print, report=None, poison: dict | None = None,
                 explain=lambda finding: []):
        self.out = out
        self.subscriptions = subscriptions  # evidence.records.DeclaredSubscription, in sub_id order
        self.names = [s.name for s in subscriptions]
        self.topic_of = topic_of
        self.horizons = horizons
        self.metrics = metrics
        self.planted = planted  # the fault layer's applied rows so far (None-free list)
        self.window_s = window_s
        self.show = show
        self.report = report  # called with (sink) after each window: the rolling report
        self.poison = poison or {}
        self.explain = explain  # a finding -> the violated conformance scenarios that explain it (conformance.py)
        self.totals = WatchTotals()
        self.recent: deque = deque(maxlen=WINDOWS_KEPT)
        self.recent_findings: deque = deque(maxlen=500)
        self.unsettled: dict[tuple, int] = {}  # (sub_id, key) -> unsettled at its last call
        self.lock = threading.Lock()
        self.window_done = threading.Condition(self.lock)
        self.last_window = -1
        self.progress_seen = -1  # the last window whose query progress `progress` read
        self.started = time.time()

    # -- findings.jsonl, exactly once --------------------------------------------------------------------------
    def _committed(self) -> tuple[int, int]:
        try:
            data = json.loads((self.out / "findings.commit").read_text())
            return int(data["window"]), int(data["length"])
        except (OSError, ValueError, KeyError):
            return -1, 0

    def _append(self, window: int, lines: list[str]) -> bool:
        """The window's lines appended (False: written before, a replay after a restart)."""
        committed, length = self._committed()
        if window <= committed:
            return False
        path = self.out / "findings.jsonl"
        with open(path, "a+b") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() != length:  # a crash in the middle of a window's write: cut back to the last whole one
                handle.truncate(length)
                handle.seek(length)
            handle.write("".join(line + "\n" for line in lines).encode())
            handle.flush()
            os.fsync(handle.fileno())
            length = handle.tell()
        commit = self.out / ".findings.commit.tmp"
        commit.write_text(json.dumps({"window": window, "length": length}) + "\n")
        os.replace(commit, self.out / "findings.commit")
        return True

    # -- a window ----------------------------------------------------------------------------------------------
    def __call__(self, frame, window: int) -> None:
        rows = [r.asDict() for r in frame.collect()]
        now = time.time()
        findings = [self._finding(r, now, window) for r in rows if r["rtype"] == "finding"]
        findings.sort(key=lambda f: (f["subscription"], f["kind"], f["key"] or "", f["seq"] if f["seq"] is not None else -1))
        fresh = self._append(window, [json.dumps(f, sort_keys=True) for f in findings])
        stats = [r for r in rows if r["rtype"] == "stats"]
        record = self._window_record(window, now, findings if fresh else [], stats, replay=not fresh)
        with self.lock:
            self.recent.append(record)
            if fresh:
                self.recent_findings.extend(findings)
            self._update_totals(record, findings if fresh else [])
            self._update_metrics(record, findings if fresh else [], stats, now)
            self.last_window = window
            self.window_done.notify_all()
        with open(self.out / "windows.jsonl", "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        self.show(record["line"])
        if self.report is not None:
            self.report(self)

    def _finding(self, row: dict, now: float, window: int) -> dict:
        sub = self.names[row["sub_id"]]
        kind = row["kind"]
        facts = json.loads(row["facts"] or "{}")
        finding = {"id": row["fid"], "subscription": sub, "kind": kind, "form": row["form"],
                   "severity": row["severity"], "guarantee": FINDING_KINDS[kind][0], "key": row["key"],
                   "seq": row["seq"], "decided_at": _iso(now), "window": window, "explained_by": [],
                   "planted": False, **{k: v for k, v in facts.items()}}
        for expected in applied_faults.expected_findings(self.planted(), {s.name: s for s in self.subscriptions}):
            if applied_faults.covers(expected, finding):
                finding["planted"] = True
                finding["planted_by"] = f"schedule entry {expected['entry']}"
        if not finding["planted"]:
            finding["explained_by"] = self.explain(finding)
        return finding

    def _window_record(self, window: int, now: float, findings: list[dict], stats: list[dict], replay: bool) -> dict:
        per_sub: dict[str, dict] = {n: {"published": 0, "delivered": 0, "decided": 0} for n in self.names}
        for r in stats:
            name = self.names[r["sub_id"]]
            for what in ("published", "delivered", "decided"):
                per_sub[name][what] += r[what] or 0
            self.unsettled[(r["sub_id"], r["key"])] = r["unsettled"] or 0
        unsettled = Counter()
        for (sub_id, _), n in self.unsettled.items():
            unsettled[self.names[sub_id]] += n
        status = {}
        for sub in self.subscriptions:
            judged = guarantee_status(findings, sub, tested=per_sub[sub.name]["decided"] > 0,
                                      poison_published=bool(self.poison.get(sub.name)))
            status[sub.name] = {g: s for g, s in judged.items() if g != "endpoint_pinning"}
        record = {"window": window, "end": _iso(now), "end_ts": now, "replay": replay,
                  "subscriptions": {n: {**per_sub[n], "unsettled": unsettled[n], "guarantees": status[n]}
                                    for n in self.names},
                  "findings": Counter(f"{f['subscription']}: {f['kind']}" + (f" {f['form']}" if f["form"] else "")
                                      + (" (planted)" if f["planted"] else "") for f in findings)}
        record["line"] = self._line(record, findings)
        return record

    def _line(self, record: dict, findings: list[dict]) -> str:
        subs = record["subscriptions"]
        # a publish row is counted once per subscription of its topic in `subs`: here once per topic
        published = sum({self.topic_of[n]: s["published"] for n, s in subs.items()}.values())
        delivered = sum(s["delivered"] for s in subs.values())
        decided = sum(s["decided"] for s in subs.values())
        held = sorted(f"{n}.{g}" for n, s in subs.items() for g, v in s["guarantees"].items() if v == "holds")
        broke = sorted(f"{n}.{g}" for n, s in subs.items() for g, v in s["guarantees"].items() if v == "violated")
        head = (f"watch {record['end'][11:19]} window {record['window']}: {len(subs)} subscriptions probed, "
                f"{counted(published, 'message')} published, {counted(delivered, 'delivery', 'deliveries')}, "
                f"{counted(decided, 'message')} decided")
        if record["replay"]:
            return head + "; a window replayed after a restart: its findings were written before"
        said = f"; held: {counted(len(held), 'guarantee')}" if held else "; nothing decided yet"
        if broke:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(record["findings"].items()))
            said += f"; BROKE: {', '.join(broke)} ({why})"
        elif findings:
            said += "; advisories: " + "; ".join(f"{k}: {v}" for k, v in sorted(record["findings"].items()))
        return head + said

    def _update_totals(self, record: dict, findings: list[dict]) -> None:
        totals = self.totals
        totals.windows += 1
        totals.last_line = record["line"]
        for f in findings:
            totals.findings[f["kind"]] += 1
            if f["severity"] == "error":
                totals.errors += 1
                totals.last_breakage = record["end_ts"]
                if f["planted"]:
                    totals.errors_planted += 1
                elif f["explained_by"]:
                    totals.errors_explained[", ".join(f["explained_by"])] += 1
        for name, s in record["subscriptions"].items():
            for g, v in s["guarantees"].items():
                if v == "violated":
                    totals.broken.add(f"{name}.{g}")

    def _update_metrics(self, record: dict, findings: list[dict], stats: list[dict], now: float) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        topics_counted = set()
        for name, s in record["subscriptions"].items():
            metrics.delivered(name, s["delivered"])
            metrics.unsettled(name, s["unsettled"])
            topic = self.topic_of[name]
            if topic not in topics_counted:  # a publish row counts once per subscription of its topic
                topics_counted.add(topic)
                metrics.published(topic, s["published"])
            for g, v in s["guarantees"].items():
                metrics.guarantee(name, g, v)
        for r in stats:
            if r["latencies"]:
                metrics.latencies(self.names[r["sub_id"]], r["latencies"])
        for f in findings:
            metrics.finding(f["subscription"], f["kind"], f["severity"])
        metrics.window(now, self.window_s)

    def progress(self, progresses: list[dict], delay_s: float) -> None:
        """The query's progress of the windows judged since the last call (`query.recentProgress`): the evidence
        rows its state operator dropped because they came behind the watermark are said, one line a window, and
        counted (metric and last line). Such a row was never judged: if it was a message's delivery, that message
        is called lost past its horizon although it came."""
        for progress in progresses:
            window = progress.get("batchId", -1)
            with self.lock:
                if window <= self.progress_seen:
                    continue
                self.progress_seen = window
            late = sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in progress.get("stateOperators") or [])
            if not late:
                continue
            with self.lock:
                self.totals.late_rows += late
            if self.metrics is not None:
                self.metrics.late_rows(late)
            self.show(f"watch: window {window}: {counted(late, 'evidence row')} came more than {delay_s:g} s behind "
                      "the newest (the watermark) and were not judged; a message whose delivery such a row recorded "
                      "is called lost although it came")

    def judged(self) -> int:
        """The last window judged (-1: none yet)."""
        with self.lock:
            return self.last_window

    def wait_for_window(self, window: int, timeout_s: float) -> bool:
        """Wait until window `window` was judged (False: not within `timeout_s`)."""
        with self.lock:
            return self.window_done.wait_for(lambda: self.last_window >= window, timeout=timeout_s)


def print_line(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()
