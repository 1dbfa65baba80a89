"""Offline plan: run the Pulumi program the way `pulumi preview` runs it and write the resource graph.

As the Pulumi CLI does, the program runs in a process of its own, started with the project's own Python
(`pubsubguard.core.langhost_python` finds it as the language host does, `pubsubguard.core.langhost` confines
the process), and talks to the engine over the engine's gRPC protocol (`ResourceMonitor`, `Engine`;
`pubsubguard.core.engine` serves them here on Unix sockets and answers as the engine does in a preview of a
new stack: values unknown at preview stay unknown, secrets stay secrets, resource references never wait,
invokes are answered offline). This process never imports the program: it only records what the program registers, and
decides alone whether the program completed (its exit code, its error log, the stack's outputs
registered). Config comes from `PULUMI_CONFIG` (`pubsubguard.core.project` reads `Pulumi.yaml` and the stack
file as the CLI does). A program that makes no progress for `IDLE_TIMEOUT_S` is stopped with an error
naming the resource it waits for; a program that raises is reported with its own file and line.

The plan it writes, and how a plan file is read back: `pubsubguard.core.plan_file`.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pubsubguard.core import langhost, langhost_node, langhost_python
from pubsubguard.core.engine import serve
from pubsubguard.core.invokes import InvokeResults
from pubsubguard.core.recorder import Limits, Recorder
from pubsubguard.core.langhost import Stream
from pubsubguard.core.plan_file import plan_header, secret_strings
from pubsubguard.core.project import (  # noqa: F401
    UNKNOWN, PlanError, Project, StackConfig, project_root, read_project, read_stack_config,
)

IDLE_TIMEOUT_S = 60.0  # nothing constructed, registered or invoked, the thread waiting or blocked in one place this long: stuck
MEMORY_SIGNS = ("MemoryError", "std::bad_alloc", "heap out of memory", "Array buffer allocation failed",
                "Fatal process out of memory")  # Python's and Node.js's words for an allocation refused
PARALLEL = 16  # the language host's --parallel: the SDK sends up to 4x this many RPCs at once


class ProgramFailed(PlanError):
    """The program failed, was stopped at a limit, or ended before it completed; `run` holds what it
    registered until then (the check still judges it and lists what it found)."""

    def __init__(self, message: str, run: "ProgramRun", stopped: bool = False):
        super().__init__(message)
        self.run = run
        self.stopped = stopped  # stopped at a limit (or timed out): judge no more of it, answer at once


@dataclass
class ProgramRun:
    """One run of a program: its plan, what it printed and logged, and notes on how it ran."""
    plan: dict
    stdout: Stream
    stderr: Stream
    messages: list[tuple[str, str]]  # (severity, text) the program logged below error
    notes: list[str]  # how it ran: the interpreter stood in for, confinements missing
    interpreter: str = ""
    confined: bool = False
    exit_code: int | None = None
    found_by: str = ""  # how the interpreter was found (the toolchain and its environment), for the first screen

    @property
    def secrets(self) -> set[str]:
        return secret_strings(self.plan)


@dataclass(frozen=True)
class StackInputs:
    """What a command reads once and passes down: the project (`Pulumi.yaml`), the stack's name, its
    configuration (`Pulumi.<stack>.yaml` merged with the project's `config:`) and the plan's header they
    make (`plan_header`). Nothing below the command reads those files again."""
    project: Project
    stack: str
    config: StackConfig
    header: dict


def read_inputs(root: Path | None, stack: str, environment_values: Path | None = None) -> StackInputs:
    """Read the project of `root` (default: pubsubguard's own) and the configuration of `stack`, once (with
    the values of the stack's ESC environments from `environment_values`, `esc open --format json`'s output)."""
    project = read_project(Path(root or project_root()).resolve())
    config = read_stack_config(project, stack, environment_values)
    return StackInputs(project=project, stack=stack, config=config, header=plan_header(project, stack, config))


def make_plan(stack: str = "dev", root: Path | None = None, *, invoke_results: InvokeResults | None = None,
              idle_timeout_s: float = IDLE_TIMEOUT_S, on_resource=None, **options) -> dict:
    """Run the program of `root` for `stack` and return the plan (see `run_program`)."""
    return run_program(stack, root, invoke_results=invoke_results, on_resource=on_resource,
                       limits=Limits(idle_timeout_s=idle_timeout_s), **options).plan


def run_program(stack: str = "dev", root: Path | None = None, *, invoke_results: InvokeResults | None = None,
                on_resource=None, limits: Limits = Limits(), python: str | None = None,
                pass_env: tuple[str, ...] = (), require_isolation: bool = False, note=None,
                inputs: StackInputs | None = None) -> ProgramRun:
    """Run the program of `root` for `stack` as `pulumi preview` does (module docstring) and return the
    run. `inputs`: the project and stack as the command read them (`read_inputs`; default: read here).
    `on_resource(record)`, when given, sees each resource as it registers (the engine analyses
    resources then), from the engine's thread. `note(line)` gets each line on how the program runs
    (default: stderr). Raises `ProgramFailed` (with the run so far) when the program does not complete."""
    inputs = inputs or read_inputs(root, stack)
    project, stack, config = inputs.project, inputs.stack, inputs.config
    runner = runner_for(project, python)
    notes: list[str] = list(runner.notes)
    stop = threading.Event()
    recorder = Recorder(project=project.name, stack=stack, invoke_results=invoke_results or InvokeResults(),
                        root=project.root, limits=limits, on_resource=on_resource, on_breach=stop.set,
                        environments=config.environments, environment_values=config.environment_values)
    scratch = langhost.scratch_directory()
    server = child = None
    code = None
    try:
        server = serve(recorder, scratch)
        config_file = scratch / "exec" / "config.json"  # PULUMI_CONFIG may exceed one variable's 128 KiB
        config_file.write_text(json.dumps(config.env()))
        env = runner.environment({"PULUMI_PROJECT": project.name, "PULUMI_STACK": stack}, scratch, tuple(pass_env))
        launch = langhost.Launch(monitor=server.monitor_address, engine=server.engine_address, project=project,
                                 stack=stack, parallel=PARALLEL, idle_timeout_s=limits.idle_timeout_s,
                                 max_resources=limits.max_resources, config_file=config_file)
        child = langhost.start(runner.command(scratch, launch), project, scratch, env, memory_mib=limits.memory_mib,
                               require_isolation=require_isolation, notes=notes, program=runner.program,
                               hidden=(Path(config.environment_values),) if config.environment_values else ())
        for line in notes:
            (note or _note)(line)
        code = langhost.wait(child, time.monotonic() + limits.timeout_s, stop.is_set)
    finally:
        if child is not None:
            child.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    recorder.attach_traced()
    records = dict(recorder.records)
    run = ProgramRun(
        plan={**inputs.header, "resources": [records[urn] for urn in sorted(records)],
              "outputs": recorder.outputs, "unknown_invokes": _unique(recorder.unknown_invokes)},
        stdout=child.stdout, stderr=child.stderr, messages=list(recorder.messages), notes=notes,
        interpreter=runner.program, confined=child.confined, exit_code=code, found_by=runner.found_by,
    )
    failure = _failure(run, recorder, code, limits, config, runner)
    if failure:
        raise ProgramFailed(failure, run, stopped=bool(recorder.breach) or code is None)
    return run


def _note(line: str) -> None:
    print(f"pubsubguard: {line}", file=sys.stderr)


RUNNERS = {"python": langhost_python.PythonRunner, "nodejs": langhost_node.NodeRunner}  # Pulumi.yaml's runtime ->
# what runs its program (`find` looks for the program's Python, or Node.js and its SDK, as the language host)


def runner_for(project: Project, python: str | None = None):
    """The runner of the project's program; PlanError in one line when it cannot run here."""
    return RUNNERS[project.runtime].find(project, python)


MISSING_KEY = re.compile(r"^(?:the program failed: (?P<place>.*?)[A-Za-z]*Error: )?Missing required configuration "
                         r"variable '(?P<key>[^']+)'")  # the SDKs' ConfigMissingError (Python's logged as it is)
UNKNOWN_KEY = re.compile(r"^the program failed: (?P<place>.*?)ConfigValueUnknownError: Configuration value "
                         r"'(?P<key>[^']+)' is read as (?P<kind>[a-z ]+), and offline its value is unknown$")
# a typed read of a key an unread environment may set (langhost_exec.ConfigValueUnknownError)


def _failure(run: ProgramRun, recorder: Recorder, code: int | None, limits: Limits, config: StackConfig,
             runner) -> str | None:
    """Why the run does not count as a completed program, in one line; None when it does."""
    source = config.source
    if recorder.breach:
        return recorder.breach
    if code is None:
        return f"the program did not finish within {limits.timeout_s:g} s (--timeout SECONDS raises the limit)"
    if recorder.errors:
        message = recorder.errors[0] or "the program failed: an error with no message"
        if message.startswith("the program made no progress"):
            return f"{source}: {message}"
        typed = UNKNOWN_KEY.match(message)
        if typed and config.environments_unread:
            return (f"the program failed: {typed.group('place')}configuration value {typed.group('key')!r} is read "
                    f"as {typed.group('kind')}, and offline its value is unknown: {source} does not set it, and "
                    f"{config.unread_environments()} may")
        missing = MISSING_KEY.match(message)
        if missing and config.environments_unread:  # never the SDK's advice to `pulumi config set` it
            return (f"the program failed: {missing.group('place') or ''}configuration value {missing.group('key')!r} "
                    f"is not in {source}: only {config.unread_environments()} could supply it")
        if missing:  # the SDK's two lines (the key, then its advice) as one
            return " ".join(part.strip() for part in message.splitlines() if part.strip()) if missing.group("place") \
                else "the program failed: " + " ".join(part.strip() for part in message.splitlines() if part.strip())
        if message.startswith("the program failed:") and any(sign in message for sign in MEMORY_SIGNS):
            message += f" (the program's memory is limited to {limits.memory_mib} MiB; --memory-limit MIB raises it)"
        elif message.startswith("the program failed:") and recorder.unknown_invokes and \
                any(sign in message for sign in (UNKNOWN, "NoneType", "Unknown")):
            # the error is about a value an unknown invoke result leaves empty or unknown (not any error)
            tokens = ", ".join(sorted({i["token"] for i in recorder.unknown_invokes}))
            message += f" (offline, the results of {tokens} are unknown; give them with --invoke-results FILE)"
        return message
    own = runner.failure(code)
    if own:
        return own
    last = (run.stderr.text().strip().splitlines() or [""])[-1][:300]
    memory = (f" (its memory is limited to {limits.memory_mib} MiB; --memory-limit MIB raises it)"
              if any(sign in run.stderr.text()[-4000:] for sign in MEMORY_SIGNS) else "")
    signum = -code if code < 0 else code - 128 if run.confined and code > 128 else None  # bwrap: 128 + signal
    if signum is not None:
        name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
        return f"the program was killed by {name} before it completed{memory}"
    if code != 0:
        return f"the program exited with code {code} before it completed" + (memory or (f" ({last})" if last else ""))
    if not recorder.completed:
        return "the program exited (code 0) before it completed: it never registered its stack's outputs"
    return None


def _unique(invokes: list[dict]) -> list[dict]:
    seen = {}
    for invoke in invokes:
        seen.setdefault(json.dumps(invoke, sort_keys=True), invoke)
    return [seen[key] for key in sorted(seen)]


