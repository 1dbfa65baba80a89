"""The conformance scenarios beside a watch: run at start and then every `--conform-every`, on their own throwaway
topics and subscriptions, so a window's findings carry `explained_by` as verify's do (same scenarios, same
`conformance.explains.EXPLAINS`).

Those that disturb the target's other subscriptions while they run (`Scenario.disturbs`) never run beside a watch:
the watch probes all the time, and verify runs them only once its drain has ended. The latest run's results explain
the findings decided after it; a finding decided while the first run is still going waits for it (the window's
write waits, bounded), so no finding is written unexplained only because the scenarios had not ended yet.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from ..conformance import explains, runner
from ..conformance.harness import ScenarioRun

# The forms a finding's cause takes for the scenarios, when the subscription's streams were reset in this process's
# life: a watch resumed after a crash (the crashed process's streams ended with it) or a `kill_stream`/`partition` of
# the schedule. verify's drain names the same cause `after_stream_reset` (`drain.EvidenceTally.silent_keys`).
RESET_CAUSE = "after_stream_reset"
RESET_KINDS = frozenset({"lost", "late_delivery"})
FIRST_RUN_WAIT_S = 600.0  # a finding's window waits at most this long for the first run's results


class WatchConformance:
    """`start()` runs the scenarios now and then every `every_s` (None: at start only) in a thread; `explain(f)`
    the ids of the latest run's violated scenarios that explain finding `f`; `summary()` for the report."""

    def __init__(self, target: str, project: str, project_number: str | None, endpoint: str | None, out: Path,
                 every_s: float | None, ordered: frozenset, show=print, on_run_id=lambda run_id: None):
        # the run id goes into watch.json before the run creates anything, None once it deleted what it made
        self.on_run_id = on_run_id
        self.target, self.project, self.project_number, self.endpoint = target, project, project_number, endpoint
        self.out, self.every_s, self.ordered, self.show = out, every_s, ordered, show
        self.beside = [s for s in runner.SCENARIOS if not s.disturbs]
        self.left_out = [s.id for s in runner.SCENARIOS if s.disturbs]
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
        self.thread.start()
        return self

    def stop(self) -> None:
        self.halt.set()
        self.first_done.set()
        self.thread.join(timeout=90)

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

    def explain(self, finding: dict, reset: bool) -> list[str]:
        """The latest run's violated scenarios that explain `finding`; `reset`: its subscription's streams were
        reset in this process's life, so a lost, late or unsettled message is judged as verify's drain judges one
        after a stream reset."""
        self.first_done.wait(FIRST_RUN_WAIT_S)
        with self.lock:
            results = dict(self.results)
        form = RESET_CAUSE if reset and finding["kind"] in RESET_KINDS else finding.get("form")
        return explains.explained_by({**finding, "form": form}, results, finding["subscription"] in self.ordered)

    def summary(self) -> dict:
        with self.lock:
            return {"every_s": self.every_s, "left_out": self.left_out, "runs": list(self.runs),
                    "results": dict(self.results), "error": self.error}
