"""Directed conformance scenarios: which documented Pub/Sub behaviour does a target keep?

The random probe (`pubsubguard.validation.job`) says what a target did under a keyed workload; these scenarios say
which *documented* behaviour it lacks. Each is short and scripted, runs on its own throwaway topics and
subscriptions (`pubsubguard-conform-<run id>-<scenario>-<part>`, deleted afterwards, also when the run is
interrupted), never on a declared estate, and ends in one of `RESULTS` with its evidence: every request,
the target's response or error, and when (seconds since the scenario started):

- `holds`: the target did what the cited fact says;
- `violated`: it did something the fact rules out (the detail says what);
- `unsupported`: it refused the setup the scenario needs (the error is the evidence);
- `inconclusive`: the outcome rests on timing the scenario could not control (a delivery that did not
  come within its window) or the scenario could not inject what it needed; the detail says which.

Scenarios use google-cloud-pubsub's own clients over gRPC: unary Pull/Acknowledge/ModifyAckDeadline
where the ack ids must be under exact control, streaming pull with `ack_with_response()` where the
client's exactly-once result is the question. `run_scenarios` runs them concurrently in a thread pool;
`pubsubguard conform` (pubsubguard/commands/conform.py) is the command around it.

`python -m pubsubguard.validation.conformance --update-doc docs/emulator.md out/conform/conformance.json` rewrites
the generated conformance section of docs/emulator.md from a run's results.

The module's parts: `pubsubguard.validation.conformance.harness` (the registry, `ScenarioRun`, `ScenarioClient`, the outcomes),
`pubsubguard.validation.conformance.scenarios` (the scenarios), `pubsubguard.validation.conformance.docs` (the docs rewriter);
this module runs them (`run_scenarios`, `conform`), links findings to them (`EXPLAINS`, `explained_by`)
and callers import each name from the part that defines it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from pubsubguard.core.errors import UserError

from . import scenarios as registered  # noqa: F401  (importing it registers its scenarios in SCENARIOS)
from ..checks.findings import severity_of_result
from ..evidence.records import read_record
from .docs import update_doc
from .harness import (
    INCONCLUSIVE, PULL_TIMEOUT_S, ScenarioClient, RESULTS, SCENARIOS, Scenario, ScenarioEnded, ScenarioInterrupted,
    ScenarioRun, VIOLATED, new_run_id, one_line,
)


# ----------------------------------------------------------------------------------------- running
def run_one(session: ScenarioRun, spec: Scenario) -> dict:
    client = ScenarioClient(session, spec.id)
    try:
        result, detail = spec.run(client)
    except ScenarioEnded as outcome:
        result, detail = outcome.result, outcome.detail
    except ScenarioInterrupted:
        result, detail = INCONCLUSIVE, "interrupted before it ended"
    except Exception as err:  # noqa: BLE001 - an unexpected answer is reported, not hidden
        result, detail = INCONCLUSIVE, f"the scenario could not finish: {one_line(err)}"
    return {"id": spec.id, "behaviour": spec.behaviour, "source": spec.source, "result": result,
            "severity": severity_of_result(result), "detail": detail, "duration_s": client.now(), "evidence": client.evidence}


def run_scenarios(session: ScenarioRun, scenarios: list[Scenario] | None = None,
                  on_done: Callable[[dict], None] | None = None, apart: ScenarioRun | None = None) -> list[dict]:
    """Run the scenarios concurrently, those that disturb the target (`Scenario.disturbs`) after the others, or,
    given `apart` (a session on a second target of the same kind), on that one beside the others;
    on Ctrl-C/SIGTERM stop them, wait for their threads, re-raise. Cleanup is the caller's
    (`ScenarioRun.cleanup`), in a `finally`."""
    scenarios = list(SCENARIOS if scenarios is None else scenarios)
    results: dict[str, dict] = {}
    if apart is not None:
        _run_phase([(apart if s.disturbs else session, s) for s in scenarios], results, on_done)
        return [results[spec.id] for spec in scenarios]
    for phase in ([s for s in scenarios if not s.disturbs], [s for s in scenarios if s.disturbs]):
        if phase:
            _run_phase([(session, s) for s in phase], results, on_done)
    return [results[spec.id] for spec in scenarios]


def _run_phase(runs: list[tuple[ScenarioRun, Scenario]], results: dict[str, dict],
               on_done: Callable[[dict], None] | None) -> None:
    pool = ThreadPoolExecutor(max_workers=max(1, len(runs)), thread_name_prefix="conform")
    futures = {pool.submit(run_one, session, spec): spec for session, spec in runs}
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.5)
            for future in done:
                results[futures[future].id] = future.result()
                if on_done is not None:
                    on_done(results[futures[future].id])
    except BaseException:
        for session in {id(session): session for session, _ in runs}.values():
            session.stop.set()
        wait(futures, timeout=PULL_TIMEOUT_S + 30)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class LibraryLog(logging.Handler):
    """The Pub/Sub client library's warnings and errors while scenarios run (e.g. a stream's background thread
    ending when a scenario's channel closes under it) go to `path` and are counted, never to the terminal."""

    LOGGERS = ("google.api_core", "google.cloud.pubsub_v1", "grpc")
    _STREAM_THREAD = "Thread-ConsumeBidirectionalStream"

    def __init__(self, path: Path | None):
        super().__init__(logging.WARNING)
        self.path = path
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def __enter__(self) -> "LibraryLog":
        self.saved = [(logging.getLogger(name), logging.getLogger(name).propagate) for name in self.LOGGERS]
        for logger, _ in self.saved:
            logger.addHandler(self)
            logger.propagate = False
        return self

    def __exit__(self, *exc) -> None:
        # a stream's thread logs its end once its channel is closed: wait (briefly) for those threads first
        for thread in [t for t in threading.enumerate() if t.name.startswith(self._STREAM_THREAD)]:
            thread.join(timeout=2.0)
        for logger, propagate in self.saved:
            logger.removeHandler(self)
            logger.propagate = propagate
        if self.path is not None and self.lines:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("".join(f"{line}\n" for line in self.lines))

    def summary(self) -> dict:
        """conformance.json's `client_log`: how many records, the commonest first lines, and the file."""
        from collections import Counter

        firsts = Counter(line.splitlines()[0][:200] for line in self.lines)
        return {"records": len(self.lines), "commonest": [[line, n] for line, n in firsts.most_common(3)],
                "file": str(self.path) if self.path is not None and self.lines else None}


def conform(target: str, project: str, *, project_number: str | None = None, endpoint: str | None = None,
            scenarios: list[Scenario] | None = None, on_done: Callable[[dict], None] | None = None,
            log: Callable[[str], None] = print, run_id: str | None = None,
            stop: threading.Event | None = None, client_log: Path | None = None,
            emulator_host: str | None = None, apart: str | None = None) -> dict:
    """Run the scenarios on a target (run id: fresh unless given), delete what they created (also when
    interrupted, or when `stop` is set from another thread) and return the results document (conformance.json).
    The client library's warnings go to `client_log` (a file; counted in the document), not the terminal.
    `emulator_host`: the emulator dialled, when not PUBSUB_EMULATOR_HOST's. `apart` (emulator only): the host:port
    of a second emulator, started with the same command as the target, on which the scenarios that disturb the
    target (`Scenario.disturbs`) run at once, beside the others, instead of after them (the document's `apart`)."""
    from ..probe.clients import log_abandoned_ack_retries

    log_abandoned_ack_retries()
    run_id = run_id or new_run_id()
    started, began = utc_now(), time.monotonic()
    apart = apart if target == "emulator" else None
    stop = stop or threading.Event()  # one flag for both sessions
    with LibraryLog(client_log) as library:
        session = ScenarioRun(target, project, run_id, project_number,
                              api_endpoint=endpoint if target == "gcp" else None, stop=stop,
                              emulator_host=emulator_host if target == "emulator" else None)
        sessions = [session]
        try:
            if apart is not None:
                sessions.append(ScenarioRun(target, project, run_id, project_number, stop=stop, emulator_host=apart))
            results = run_scenarios(session, scenarios, on_done=on_done, apart=sessions[1] if apart else None)
        finally:
            cleanups = []
            for each in sessions:
                cleanups.append(each.cleanup())
                each.close()
            cleanup = {key: [item for each in cleanups for item in each[key]] for key in cleanups[0]}
            if cleanup["failed"]:
                log(f"conform: NOT deleted: {', '.join(f['name'] for f in cleanup['failed'])}")
    run = {"target": target, "endpoint": endpoint, "project": project, "run_id": run_id,
           "started": started.isoformat(timespec="seconds")}
    if apart is not None:
        run["apart"] = {"endpoint": apart,
                        "scenarios": [s.id for s in (SCENARIOS if scenarios is None else scenarios) if s.disturbs]}
    return {**document(run, results, cleanup, time.monotonic() - began), "client_log": library.summary()}


def document(run: dict, scenarios: list[dict], cleanup: dict, duration_s: float) -> dict:
    """conformance.json: the run (target, endpoint, project, run_id, started; `apart`: the second emulator and the
    scenarios run on it), its scenarios' results counted, what was cleaned up."""
    counts = {result: sum(1 for s in scenarios if s["result"] == result) for result in RESULTS}
    return {**run, "duration_s": round(duration_s, 1), "summary": counts, "scenarios": scenarios, "cleanup": cleanup}


def exit_code(doc: dict) -> int:
    return 1 if doc["summary"][VIOLATED] else 0


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pubsubguard.validation.conformance",
                                     description="Rewrite a document's generated conformance section from a run.")
    parser.add_argument("--update-doc", type=Path, required=True, help="the document (docs/emulator.md)")
    parser.add_argument("results", type=Path, help="conformance.json of a `pubsubguard conform` run")
    args = parser.parse_args(argv)
    try:
        doc = read_record(args.results, missing="expected the conformance.json of a `pubsubguard conform` run",
                          damaged="damaged", expected="the conformance.json of a `pubsubguard conform` run")
    except UserError as err:
        print(err, file=sys.stderr)
        return 2
    update_doc(args.update_doc, doc)
    print(f"{args.update_doc}: conformance section rewritten from {args.results} (run {doc['run_id']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

