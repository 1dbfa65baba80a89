"""`verify --conform`: the conformance scenarios (`pubsubguard.validation.conformance`) run on the probe's
target beside the probe, so the report can name, per finding, the violated scenarios that explain it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from pubsubguard.core.errors import VerifyError

from ..checks.wording import counted


class ConformanceBeside:
    """The conformance scenarios on the probe's target, started before the probe and run beside it, each on
    its own throwaway topic and subscription (they never touch the estate or the twins): the drain's wait
    for deadlines covers theirs. `result()` waits for them and writes `<report>/conformance.json`; it
    returns what the report needs of them (run id, summary, each scenario's id, behaviour, result,
    detail). `stop()` (interrupted run) ends them at their next call and deletes what they created.

    `apart`: the host:port of a second emulator, started with the same command as the target (`pubsubguard run`
    starts one): the scenarios that disturb the target run there at once, beside the others and the probe,
    instead of after the drain (conformance.json's `apart` says so)."""

    def __init__(self, target: str, estate, emulator_host, report: Path, apart: str | None = None):
        from . import runner

        self.report = report
        self.doc: dict | None = None
        self.error: BaseException | None = None
        self.halt = threading.Event()
        endpoint = emulator_host if target == "emulator" else None
        disturbing = [s for s in runner.SCENARIOS if s.disturbs]
        self.apart = apart if target == "emulator" and disturbing else None
        # Those that disturb the target for other subscriptions (`Scenario.disturbs`) wait for the probe's drain,
        # unless a second emulator takes them.
        beside = runner.SCENARIOS if self.apart else [s for s in runner.SCENARIOS if not s.disturbs]
        self.after = [] if self.apart else disturbing
        where = (f" ({', '.join(s.id for s in disturbing)} at once on a second emulator, {self.apart}, started with "
                 "the same command: it disturbs the other subscriptions of the emulator it runs on)") if self.apart else (
            f" ({', '.join(s.id for s in self.after)} after the probe's drain: it disturbs the target's other "
            "subscriptions)" if self.after else "")
        print(f"verify: conformance scenarios on {target}{f' {endpoint}' if endpoint else ''}, started "
              f"before the probe and run beside it on their own throwaway resources{where}", flush=True)

        def conform(scenarios, run_id=None, part="", apart=None) -> dict:
            return runner.conform(target, estate.project, endpoint=endpoint, scenarios=scenarios, run_id=run_id,
                                       project_number=getattr(estate, "project_number", None), stop=self.halt,
                                       client_log=report / f"client-log-conformance{part}.txt", apart=apart)

        def run() -> None:
            try:
                self.doc = conform(beside, apart=self.apart)
            except BaseException as err:  # noqa: BLE001 - raised in result()
                self.error = err

        self.conform = conform
        self.thread = threading.Thread(target=run, name="conformance", daemon=True)
        self.thread.start()

    def library_note(self) -> str | None:
        """An observation when the client library logged warnings while the scenarios ran (after `result`)."""
        return library_note("conformance scenarios", (self.doc or {}).get("client_log"))

    def stop(self) -> None:
        self.halt.set()
        self.thread.join(timeout=60)

    def result(self) -> dict:
        """Called once the probe's drain has ended: waits for the scenarios beside it, then runs those that
        disturb the target, and writes conformance.json with all of them (one run id)."""
        from . import runner

        self.thread.join()
        if self.error is None and self.after:
            try:
                later = self.conform(self.after, self.doc["run_id"], "-after-drain")
            except Exception as err:  # noqa: BLE001 - said below (an interruption goes on up)
                self.error = err
            else:
                order = [s.id for s in runner.SCENARIOS]
                logs = [d["client_log"] for d in (self.doc, later)]
                merged_log = {"records": sum(log["records"] for log in logs),
                              "commonest": [c for log in logs for c in log["commonest"]][:3],
                              "file": ", ".join(log["file"] for log in logs if log["file"]) or None}
                self.doc = runner.document(
                    {k: self.doc[k] for k in ("target", "endpoint", "project", "run_id", "started")},
                    sorted(self.doc["scenarios"] + later["scenarios"], key=lambda item: order.index(item["id"])),
                    {k: self.doc["cleanup"][k] + later["cleanup"][k] for k in self.doc["cleanup"]},
                    self.doc["duration_s"] + later["duration_s"])
                self.doc["client_log"] = merged_log

        if self.error is not None:
            raise VerifyError(f"conformance scenarios failed: {type(self.error).__name__}: {self.error}")
        doc = self.doc
        self.report.mkdir(parents=True, exist_ok=True)
        (self.report / "conformance.json").write_text(json.dumps(doc, indent=2) + "\n")
        return {"run_id": doc["run_id"], "started": doc["started"], "duration_s": doc["duration_s"],
                "summary": doc["summary"], "file": "conformance.json",
                "scenarios": [{k: item[k] for k in ("id", "behaviour", "source", "result", "detail")}
                              for item in doc["scenarios"]]}


def library_note(what: str, log: dict | None) -> str | None:
    """`the Pub/Sub client library logged N warnings/errors during WHAT (commonest: ...); full text: FILE`."""
    if not log or not log["records"]:
        return None
    commonest = "; ".join(f"{line!r} x{n}" for line, n in log["commonest"])
    return (f"the Pub/Sub client library logged {counted(log['records'], 'warning/error', 'warnings/errors')} during "
            f"the {what} (commonest: "
            f"{commonest}); full text: {log['file']}")

