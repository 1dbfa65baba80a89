"""The conformance scenarios beside a watch: run at start and then every `--conform-every`, on their own throwaway
topics and subscriptions, so a window's findings carry `explained_by` as verify's do (same scenarios, same
`conformance.explains.EXPLAINS`).

Those that disturb the target's other subscriptions while they run (`Scenario.disturbs`) never run beside the
probe: verify runs them once its drain has ended, a watch once at its first start, before its probe begins, and
only where they could explain something (`STALL_SCENARIO`: the watch probes an ordered dead-lettering subscription).
Their results are kept in `conformance-start.json` and stand for the watch's life, restarts included. The latest
run's results explain the findings decided after it; a finding decided while the first run is still going waits for
it (the window's write waits, bounded), so no finding is written unexplained only because the scenarios had not
ended yet.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from ..checks import applied_faults
from ..conformance import explains, runner
from ..conformance.harness import ScenarioRun

# The forms a finding's cause takes for the scenarios, when the subscription's streams were reset in this process's
# life: a watch resumed after a crash (the crashed process's streams ended with it) or a `kill_stream`/`partition` of
# the schedule. verify's drain names the same cause `after_stream_reset` (`drain.EvidenceTally.silent_keys`).
RESET_CAUSE = "after_stream_reset"
RESET_KINDS = frozenset({"lost", "late_delivery"})
# The cause of a finding on a subscription while an ordered dead-lettering one may be stalled: its messages sent to a
# reset stream (kept in dispatch by the emulator, `stream-reset-keeps-delivering`) expire again and again until they
# reach their last attempt, and this emulator then serves every other subscription only every 10 s
# (`ordered-dead-letter-spares-other-subscriptions`). verify's drain names the same cause `after_stall`.
STALL_CAUSE = "after_stall"
STALL_SCENARIO = "ordered-dead-letter-spares-other-subscriptions"
FIRST_RUN_WAIT_S = 600.0  # a finding's window waits at most this long for the first run's results


def stall_onsets(stalls_after: dict[str, float], resets_us: dict[str, list[int]]) -> dict[str, int]:
    """When each ordered dead-lettering subscription may have stalled (STALL_CAUSE), in microseconds: its first
    stream reset (`resets_us`: a `kill_stream` or `partition` applied to it, or a restart after a crash) plus the
    time its messages sent to the dead stream take to reach their last attempt (`stalls_after`: max delivery
    attempts x ack deadline, seconds). Subscriptions never reset have no onset."""
    return {name: min(resets) + int(stalls_after[name] * 1e6) for name, resets in resets_us.items() if resets}


def stalls_after(subscriptions) -> dict[str, float]:
    """An ordered dead-lettering subscription -> how long after its streams were reset its messages, sent to the dead
    stream and expiring each time, may reach their last attempt (STALL_CAUSE), in seconds."""
    return {s.name: s.max_delivery_attempts * s.ack_deadline_s for s in subscriptions if s.ordering and s.dead_lettering}


class FindingCauses:
    """What a watch knows of a finding's cause beside the scenarios' results: whether its subscription's streams were
    reset in this process's life (`reset`: twins a crashed watch left; a `kill_stream` or `partition` the schedule
    applied, read through `planted()`) and whether an ordered dead-lettering subscription could have stalled by now.
    Calling it with a finding gives `WatchConformance.explain`'s answer (none without the scenarios)."""

    def __init__(self, conformance: "WatchConformance | None", planted, subscriptions, started_us: int):
        self.conformance, self.planted, self.started_us = conformance, planted, started_us
        self.stalls_after = stalls_after(subscriptions)
        self.reset: set[str] = set()  # declared subscriptions whose twins' streams a crashed watch left behind

    def __call__(self, finding: dict) -> list[str]:
        if self.conformance is None:
            return []
        applied = [r for r in self.planted() if r["kind"] in ("kill_stream", "partition")
                   and not applied_faults.not_applied(r)]
        name = finding["subscription"]
        resets = name in self.reset or any(r.get("subscription") == name for r in applied)
        onsets = stall_onsets(self.stalls_after, {s: [self.started_us] * (s in self.reset)
                                                  + [r["time_us"] for r in applied if r.get("subscription") == s]
                                                  for s in self.stalls_after})
        stalled = any(s != name and onset <= time.time_ns() // 1000 for s, onset in onsets.items())
        return self.conformance.explain(finding, resets, stalled)


class WatchConformance:
    """`start()` runs the scenarios now and then every `every_s` (None: at start only) in a thread; `explain(f)`
    the ids of the latest run's violated scenarios that explain finding `f`; `summary()` for the report."""

    def __init__(self, target: str, project: str, project_number: str | None, endpoint: str | None, out: Path,
                 every_s: float | None, ordered: frozenset, show=print, on_run_id=lambda run_id: None,
                 stall_possible: bool = False):
        """`stall_possible`: the watch probes an ordered dead-lettering subscription, so STALL_CAUSE may explain
        findings: the disturbing scenarios then run once, at the first start, before the probe begins."""
        # the run id goes into watch.json before the run creates anything, None once it deleted what it made
        self.on_run_id = on_run_id
        self.target, self.project, self.project_number, self.endpoint = target, project, project_number, endpoint
        self.out, self.every_s, self.ordered, self.show = out, every_s, ordered, show
        self.beside = [s for s in runner.SCENARIOS if not s.disturbs]
        self.disturbing = [s for s in runner.SCENARIOS if s.disturbs] if stall_possible else []
        self.left_out = [s.id for s in runner.SCENARIOS if s.disturbs and s not in self.disturbing]
        self.at_start: dict[str, str] = {}  # the disturbing scenarios' results (conformance-start.json)
        self.halt = threading.Event()
        self.first_done = threading.Event()
        self.lock = threading.Lock()
        self.results: dict[str, str] = {}
        self.runs: list[dict] = []  # each run's id, start, duration, summary (the report's history)
        self.error: str | None = None
        self.thread = threading.Thread(target=self._loop, name="watch-conformance", daemon=True)

    def start(self, unfinished: str | None) -> "WatchConformance":
        """`unfinished`: the run a crashed watch on this --out left going (watch.json): what it made is deleted
        first."""
        if unfinished:
            self._sweep(unfinished)
        left_out = (f"; not beside a watch: {', '.join(self.left_out)} (it disturbs the target's other subscriptions)"
                    if self.left_out else "")
        self.show("watch: conformance scenarios on the target at start"
                  + (f" and every {self.every_s:g} s" if self.every_s else "")
                  + f", each on its own throwaway topic and subscription{left_out}")
        if self.disturbing:
            self._at_start()
        self.thread.start()
        return self

    def _at_start(self) -> None:
        """The disturbing scenarios' results: those of this --out's first start (conformance-start.json), else run
        now, before the probe begins (they slow the target's other subscriptions while they run)."""
        kept = self.out / "conformance-start.json"
        try:
            doc = json.loads(kept.read_text())
            self.at_start = {s["id"]: s["result"] for s in doc["scenarios"]}
            self.show(f"watch: {', '.join(sorted(self.at_start))}: {', '.join(self.at_start.values())} at this --out's "
                      f"first start (conformance run {doc['run_id']}, conformance-start.json)")
            return
        except (OSError, ValueError, KeyError, TypeError):
            pass
        ids = ", ".join(s.id for s in self.disturbing)
        self.show(f"watch: {ids} runs once now, before the probe begins: it disturbs the target's other subscriptions "
                  "while it runs")
        run_id = runner.new_run_id()
        self.on_run_id(run_id)
        began = time.monotonic()
        try:
            doc = runner.conform(self.target, self.project, project_number=self.project_number, endpoint=self.endpoint,
                                 scenarios=self.disturbing, run_id=run_id, stop=self.halt, log=self.show,
                                 client_log=self.out / "client-log-conformance.txt")
        except Exception as err:  # noqa: BLE001 - said; what it would explain stays unexplained
            self.show(f"watch: {ids} failed ({type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}); "
                      "what it would explain is not explained")
            return
        self.on_run_id(None)
        self.at_start = {s["id"]: s["result"] for s in doc["scenarios"]}
        tmp = self.out / ".conformance-start.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, kept)
        self.show(f"watch: conformance run {doc['run_id']} ({time.monotonic() - began:.0f} s): "
                  + ", ".join(f"{i} {r}" for i, r in sorted(self.at_start.items())) + " (conformance-start.json)")

    def stop(self, wait_s: float = 90.0) -> None:
        """Halt the scenarios; a run still going after `wait_s` is left to end with the process (its run id stays in
        watch.json, so the next start deletes what it made)."""
        self.halt.set()
        self.first_done.set()
        if self.thread.ident is not None:  # started (the twins' creation may have failed before)
            self.thread.join(timeout=wait_s)

    def _sweep(self, run_id: str) -> None:
        session = ScenarioRun(self.target, self.project, run_id, self.project_number,
                              api_endpoint=self.endpoint if self.target == "gcp" else None)
        try:
            swept = session.cleanup()
        finally:
            session.close()
        if swept["deleted"] or swept["failed"]:
            self.show(f"watch: deleted {len(swept['deleted'])} throwaway resources of conformance run {run_id}, which "
                      "a crashed watch left" + (f"; NOT deleted: {', '.join(f['name'] for f in swept['failed'])}"
                                                if swept["failed"] else ""))
        self.on_run_id(None)

    def _loop(self) -> None:
        while not self.halt.is_set():
            run_id = runner.new_run_id()
            self.on_run_id(run_id)
            began = time.monotonic()
            try:
                doc = runner.conform(self.target, self.project, project_number=self.project_number,
                                     endpoint=self.endpoint,
                                     scenarios=self.beside, run_id=run_id, stop=self.halt, log=self.show,
                                     client_log=self.out / "client-log-conformance.txt")
            except Exception as err:  # noqa: BLE001 - said; the findings then carry no explanation
                with self.lock:
                    self.error = f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
                self.show(f"watch: the conformance scenarios failed ({self.error}); findings are not explained "
                          "until a run ends")
            else:
                self.on_run_id(None)  # conform() deleted what it made
                if self.halt.is_set():
                    break  # interrupted: its results are partial, the previous run's stand
                self._record(doc, time.monotonic() - began)
            self.first_done.set()
            if not self.every_s or self.halt.wait(self.every_s):
                break

    def _record(self, doc: dict, took_s: float) -> None:
        with self.lock:
            self.results = {s["id"]: s["result"] for s in doc["scenarios"]}
            self.error = None
            self.runs.append({"run_id": doc["run_id"], "started": doc["started"], "duration_s": round(took_s, 1),
                              "summary": doc["summary"]})
        tmp = self.out / ".conformance.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, self.out / "conformance.json")
        summary = ", ".join(f"{n} {result}" for result, n in doc["summary"].items())
        self.show(f"watch: conformance run {doc['run_id']} ({took_s:.0f} s): {summary} (conformance.json)")

    def explain(self, finding: dict, reset: bool, stalled: bool = False) -> list[str]:
        """The violated scenarios (the latest run's, and those run at the first start) that explain `finding`;
        `reset`: its subscription's streams were reset in this process's life, so a lost, late or unsettled message is
        judged as verify's drain judges one after a stream reset; `stalled`: it was decided once an ordered
        dead-lettering subscription (another one) could have stalled (STALL_CAUSE)."""
        self.first_done.wait(FIRST_RUN_WAIT_S)
        with self.lock:
            results = {**self.at_start, **self.results}
        ordered = finding["subscription"] in self.ordered
        forms = [finding.get("form")]
        if finding["kind"] in RESET_KINDS:
            forms = ([RESET_CAUSE] if reset else forms) + ([STALL_CAUSE] if stalled else [])
        said: list[str] = []
        for form in forms:
            said += [s for s in explains.explained_by({**finding, "form": form}, results, ordered) if s not in said]
        return said

    def summary(self) -> dict:
        with self.lock:
            return {"every_s": self.every_s, "left_out": self.left_out, "runs": list(self.runs),
                    "results": {**self.at_start, **self.results}, "error": self.error}
