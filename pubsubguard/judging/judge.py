"""Judging: one or more pack processes fed each resource as the program registers it (`Judge`), driven
from a process of its own (`JudgeProcess`), and the two ways in: a saved plan (`judge_plan`) or a
program run as `pulumi preview` runs it (`judge_program`). Each gives the pack's `Judgement`; the
command composes the check's `Outcome` from it (`result.compose`)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pubsubguard.core import plan as planning
from pubsubguard.core.invokes import InvokeResults
from pubsubguard.judging.result import CheckError, Judgement, Violation, sort_key
from pubsubguard.judging.pack import PackProcess, peak_mib, default_pack_dir, read_manifest, reconcile_config
from pubsubguard.judging.analyzer import (
    configure_stack, level_of, level_value, protobufs, analyze_request, analyze_stack_request, cannot_judge_entries,
    judged_resources, plan_context, policy_infos,
)


IN_FLIGHT = 16  # Analyze calls outstanding per pack process: a call's round trip (~2 ms) overlaps the next ones


PARALLEL_FROM_RESOURCES = 400  # below this, one pack process (starting another costs ~0.6 s)


def default_workers(resources: int) -> int:
    return 1 if resources < PARALLEL_FROM_RESOURCES else max(1, min(os.cpu_count() or 1, 4))


def judge_plan(plan: dict, *, pack_dir: Path | None = None, policy_config: dict | None = None,
               source: str = "", config_source: str = "policy config", workers: int | None = None,
               invoke_results: InvokeResults | None = None) -> Judgement:
    """Start the pack, judge `plan` over gRPC, stop the pack; returns every violation reported."""
    with Judge(plan_context(plan), pack_dir=pack_dir, policy_config=policy_config, config_source=config_source,
               workers=workers or default_workers(len(judged_resources(plan))), invoke_results=invoke_results) as judge:
        for record in plan["resources"]:
            judge.analyze(record)
        return judge.finish(plan, source)


@dataclass(frozen=True)
class ProgramJudgement:
    """A program judged as a preview judges it: its run (plan, output), the pack's judgement, and why
    the program did not complete (None when it did)."""
    run: planning.ProgramRun
    judgement: Judgement
    failure: str | None


def judge_program(inputs: planning.StackInputs, *, invoke_results: InvokeResults | None = None,
                  policy_config: dict | None = None, source: str = "", config_source: str = "policy config",
                  timings: dict | None = None, run_options: dict | None = None,
                  pack_dir: Path | None = None) -> ProgramJudgement:
    """Plan the program of `inputs` (the project and stack the command read) and judge it as the engine
    does in a preview: the pack judges each resource as the program registers it; the stack rules run
    once the program is done. The program runs in a confined process of its own (`plan.run_program`);
    the judging client runs in another (`JudgeProcess`), so the pack works on the core the program leaves
    free. A program that did not complete gives its `failure` and what was judged until then (no stack
    rules). `timings` gets `plan_s` (until the program is done), `check_s` (after it) and the peak memory
    of the judge and pack processes in MiB (`judge_mib`, `pack_mib`). `run_options` go to `run_program`
    (python, pass_env, limits, require_isolation, note)."""
    import time

    started = time.perf_counter()
    with JudgeProcess(inputs.header, policy_config=policy_config, config_source=config_source, pack_dir=pack_dir,
                      invoke_results=invoke_results) as judge:
        try:
            run = planning.run_program(inputs.stack, inputs.project.root, invoke_results=invoke_results,
                                       on_resource=judge.analyze, inputs=inputs, **(run_options or {}))
            failure = None
            stopped = False
        except planning.ProgramFailed as err:
            run, failure, stopped = err.run, str(err), err.stopped
        planned = time.perf_counter()
        # A program that failed: every resource it registered is judged (the stack rules, which need the
        # whole program, are not); one stopped at a limit: only what was judged already (exit at once).
        judgement, peaks = judge.finish(run.plan, source, partial=failure is not None, abandon=stopped)
    if timings is not None:
        timings.update(plan_s=planned - started, check_s=time.perf_counter() - planned, **peaks)
    return ProgramJudgement(run=run, judgement=judgement, failure=failure)


class JudgeProcess:
    """A `Judge` (one pack process) driven from a process of its own: `analyze` sends each registered
    resource down a pipe, `finish` sends the plan and receives the result. A context manager: the
    process (and with it the pack) has stopped when it exits. The process runs in a session of its own,
    so Ctrl-C reaches only the command, which closes the pipe: that stops the judge and its pack."""

    def __init__(self, context: dict, **judge_options):
        self.context, self.options = context, judge_options
        self.process: subprocess.Popen | None = None
        self.sending = self.receiving = None
        self.broken = False

    def __enter__(self) -> "JudgeProcess":
        from multiprocessing.connection import Connection

        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        package_parent = str(Path(__file__).resolve().parents[2])  # the folder that holds `pubsubguard`
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", f"from pubsubguard.judging.judge import judge_main; judge_main({from_parent}, {to_parent})"],
                pass_fds=(from_parent, to_parent), stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                cwd=package_parent,  # `-c` puts the cwd first on sys.path: never the judged repository, whose
            )                        # own `pubsubguard/` folder would otherwise stand in for this package
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self.sending = Connection(to_child, readable=False)
        self.receiving = Connection(from_child, writable=False)
        self.sending.send((self.context, self.options))
        return self

    def analyze(self, record: dict) -> None:
        if self.broken:
            return
        try:
            self.sending.send(("analyze", record))
        except OSError:  # the judge exited; finish() says so
            self.broken = True

    def finish(self, plan: dict, source: str = "", partial: bool = False, abandon: bool = False
               ) -> tuple[Judgement, dict]:
        try:
            self.sending.send(("finish", plan, source, partial, abandon))
            kind, value, peaks = self.receiving.recv()
        except (OSError, EOFError):
            code = self.process.wait(timeout=30) if self.process else None
            raise CheckError(f"the policy check's process exited unexpectedly (exit code {code})") from None
        if kind == "error":
            raise value
        return value, peaks

    def __exit__(self, *exc) -> None:
        for connection in (self.sending, self.receiving):
            if connection is not None:
                connection.close()
        if self.process is not None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def judge_main(receive_fd: int, send_fd: int) -> None:
    """The judge process (`JudgeProcess`): a Judge fed from the pipe until `finish`, or until it closes."""
    import pickle
    from multiprocessing.connection import Connection

    receiving, sending = Connection(receive_fd, writable=False), Connection(send_fd, readable=False)
    peaks: dict[str, float] = {}
    try:
        try:
            context, options = receiving.recv()
        except EOFError:
            return
        with Judge(context, **options) as judge:
            for pack in judge.packs:
                pack.on_close = lambda peak: peaks.update(pack_mib=max(peak, peaks.get("pack_mib", 0.0)))
            while True:
                try:
                    message = receiving.recv()
                except EOFError:  # the command stopped (an error in the program, Ctrl-C): stop too
                    return
                if message[0] == "analyze":
                    judge.analyze(message[1])
                    continue
                _, plan, source, partial, abandon = message
                try:
                    reply = ("result", judge.finish(plan, source, partial, abandon))
                except BaseException as err:  # noqa: BLE001 - handed to the command, which reports it
                    try:
                        pickle.dumps(err)
                    except Exception:  # noqa: BLE001 - an error that cannot cross processes: its text does
                        err = CheckError(f"the policy check failed: {type(err).__name__}: {err}")
                    reply = ("error", err)
                break
        peaks["judge_mib"] = peak_mib(os.getpid()) or 0.0
        try:
            sending.send((*reply, peaks))
        except OSError:  # the command stopped waiting (Ctrl-C during the stack rules): nothing to tell
            return
    finally:
        receiving.close()
        sending.close()


class Judge:
    """The pack processes of one check, started and configured as the CLI does (`GetAnalyzerInfo`,
    `Configure`, `ConfigureStack`), then `Analyze` for each resource as it is handed over — also while the
    program is still registering resources, as the engine analyses each resource when it registers — and
    `AnalyzeStack` once at `finish`. Each `Analyze` is independent of the others, so the work is spread
    over `workers` pack processes, each started and configured exactly as the CLI starts its one; results
    do not depend on `workers`. A context manager: the processes always stop."""

    _DONE = object()

    def __init__(self, context: dict, *, pack_dir: Path | None = None, policy_config: dict | None = None,
                 config_source: str = "policy config", workers: int = 1, invoke_results: InvokeResults | None = None):
        import queue
        import threading

        self.context = context
        self.pack_dir = Path(pack_dir or default_pack_dir())
        self.manifest = read_manifest(self.pack_dir)
        self.policy_config = policy_config or {}
        self.config_source = config_source
        self.invoke_results = invoke_results  # given data-source results: settings a rule fills from them
        self.packs = [PackProcess(self.pack_dir, project=str(context.get("project") or "project"),
                                  stack=str(context.get("stack") or "stack")) for _ in range(workers)]
        self.queue: queue.Queue = queue.Queue()
        self.by_urn: dict[str, dict] = {}
        self.diagnostics: list[tuple[int, str, Any]] = []
        self.errors: list[BaseException] = []
        self.count = 0
        self.info = None
        self.effective: dict[str, tuple[str, dict]] = {}
        self.threads: list = []
        self._configured = threading.Event()
        self._configure_request = None
        self.abandoned = False  # finish(partial=True): resources not yet sent to a pack are not judged

    def __enter__(self) -> "Judge":
        import threading

        self.threads = [threading.Thread(target=self._serve, args=(index,), daemon=True, name=f"pack-{index}")
                        for index in range(len(self.packs))]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        for _ in self.threads:
            self.queue.put(self._DONE)
        for pack in self.packs:
            pack.close()

    def _serve(self, index: int) -> None:
        """One pack: start and configure it, then Analyze what the queue hands over until done."""
        pack = self.packs[index]
        try:
            pack.__enter__()
            if index == 0:
                self._configure_all()
            else:
                self._configured.wait()
            if self.errors:
                return
            pack.stub.Configure(self._configure_request)
            configure_stack(pack.stub, self.context)
            in_flight: collections.deque = collections.deque()

            def collect() -> None:
                order, urn, answer = in_flight.popleft()
                for diagnostic in answer.result().diagnostics:
                    self.diagnostics.append((order, urn, diagnostic))

            while (item := self.queue.get()) is not self._DONE:
                if self.abandoned:
                    continue
                order, request = item
                in_flight.append((order, request.urn, pack.stub.Analyze.future(request)))
                while in_flight and (len(in_flight) >= IN_FLIGHT or in_flight[0][2].done()):
                    collect()
            while in_flight:
                collect()
        except BaseException as err:  # noqa: BLE001 - re-raised by finish()
            self.errors.append(err)
            self._configured.set()
            while self.queue.get() is not self._DONE:  # drain, so finish() never waits on this pack
                pass

    def _configure_all(self) -> None:
        from google.protobuf import empty_pb2, json_format

        pb = protobufs()
        try:
            self.info = self.packs[0].stub.GetAnalyzerInfo(empty_pb2.Empty())
            self.policies = policy_infos(self.info)
            initial = {
                name: {
                    "level": level_of(cfg.enforcementLevel) if cfg.enforcementLevel else None,
                    "properties": json_format.MessageToDict(cfg.properties),
                }
                for name, cfg in self.info.initialConfig.items()
            }
            self.effective = reconcile_config(self.policies, initial, self.policy_config, self.config_source,
                                              invoke_results=self.invoke_results,
                                              gcp_project=self.context.get("gcp_project"))
            configure = pb.ConfigureAnalyzerRequest()
            for name, (level, props) in self.effective.items():
                configure.policyConfig[name].enforcementLevel = level_value(level)
                configure.policyConfig[name].properties.update(props)
            self._configure_request = configure
        finally:
            self._configured.set()

    def analyze(self, record: dict) -> None:
        """Hand over one registered resource (in registration order: providers before their users)."""
        self.by_urn[record["urn"]] = record
        if record.get("external"):
            return
        self.queue.put((self.count, analyze_request(record, self.context, self.by_urn)))
        self.count += 1

    def finish(self, plan: dict, source: str = "", partial: bool = False, abandon: bool = False) -> Judgement:
        """AnalyzeStack over the whole plan once every Analyze is answered; the pack's judgement. `partial`: the
        program did not complete, so the stack rules, which need the whole program, do not run;
        `abandon`: it was stopped at a limit, so resources still queued are not sent either."""
        self.abandoned = abandon
        for _ in self.threads:
            self.queue.put(self._DONE)
        for thread in self.threads:
            thread.join()
        self.threads = []
        if self.errors:
            raise self.errors[0]
        stack_diagnostics = [] if partial else list(self.packs[0].stub.AnalyzeStack(analyze_stack_request(plan)).diagnostics)
        found = [(urn, d) for _, urn, d in sorted(self.diagnostics, key=lambda item: item[0])]
        found += [("", d) for d in stack_diagnostics]
        by_urn = {r["urn"]: r for r in plan["resources"]}
        violations, cannot_judge = [], []
        for subject, d in found:
            undecided = cannot_judge_entries(d, subject, by_urn)
            if undecided is not None:
                cannot_judge += undecided
                continue
            urn = d.urn or subject
            resource = by_urn.get(urn, {})
            message = d.message
            if d.description and message.startswith(d.description + "\n"):
                message = message[len(d.description) + 1 :]
            violations.append(
                Violation(
                    policy=d.policyName, level=level_of(d.enforcementLevel), message=message, urn=urn,
                    resource_type=resource.get("type", ""), resource_name=resource.get("name", ""),
                )
            )
        info, effective = self.info, self.effective
        return Judgement(
            pack=info.name, pack_version=str(self.manifest.get("version") or info.version), stack=str(plan.get("stack")),
            source=source, resources=len(judged_resources(plan)), policies=tuple(self.policies),
            levels={name: level for name, (level, _) in effective.items()}, violations=tuple(sorted(violations, key=sort_key)),
            unknown_invokes=tuple(plan.get("unknown_invokes") or ()),
            unjudged=tuple(sorted(cannot_judge, key=lambda e: (e["policy"], e["urn"]))),
        )
