"""Offline plan: run the Pulumi program the way the Python language host does, against a recording
monitor that answers as the engine does in `pulumi preview` of a new stack, and write the resource graph.

The language host runs `runpy.run_path(<main>, run_name="__main__")` inside
`pulumi.runtime.run_in_stack`, with config from `PULUMI_CONFIG` (`pubsubguard.project` reads
`Pulumi.yaml` and the stack file as the CLI does). This does exactly that in a worker thread, with
`pubsubguard.engine`'s monitor standing in for the engine (the only part that cannot run here): values
unknown at preview stay unknown, secrets stay secrets, resource references never wait, invokes are
answered offline. A program that makes no progress for `IDLE_TIMEOUT_S` is stopped with an error
naming the resource it waits for; a program that raises is reported with its own file and line.

Plan format (`format: pubsubguard-plan/1`), deterministic (sorted keys, resources sorted by URN):

    {"format": "pubsubguard-plan/1", "project": "pubsubguard", "stack": "dev",
     "gcp_project": "pubsubguard-dev", "provider_config": {"project": ..., "region": ...},
     "resources": [{"urn", "type", "name", "custom", "parent", "id", "provider", "inputs",
                    "dependencies", "property_dependencies", "source" ({path, line} where
                    the program constructs it), "external" (read with .get)}...],
     "outputs": {"topics": {...}, "subscriptions": {...}, "probe_isolation": true},
     "unknown_invokes": [{"token", "args"}...]}

Values unknown at preview are `UNKNOWN` (the engine's sentinel string); secrets are the engine's
secret envelope `{"4dabf1…": "1b4706…", "value": …}`.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pubsubguard import storage
from pubsubguard.engine import InvokeResults, make_monitor
from pubsubguard.project import UNKNOWN, PlanError, Project, read_project, read_stack_config  # noqa: F401

PLAN_FORMAT = "pubsubguard-plan/1"
IDLE_TIMEOUT_S = 60.0  # nothing constructed, registered or invoked, the thread waiting or blocked in one place this long: stuck


def project_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _gcp_project(values: dict[str, Any]) -> str | None:
    project = values.get("gcp:project")
    return project if isinstance(project, str) and project != UNKNOWN else None


@contextmanager
def _environment(values: dict[str, str], cwd: Path):
    saved = {key: os.environ.get(key) for key in values}
    saved_cwd = os.getcwd()
    os.environ.update(values)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def _unknowns_print_as_sentinel():
    """A value unknown at preview that a program formats into a string keeps the sentinel, so the
    string is unknown too (the engine would never have run that code with a known value)."""
    from pulumi.output import Unknown

    saved = {name: Unknown.__dict__.get(name) for name in ("__str__", "__repr__", "__format__")}
    Unknown.__str__ = Unknown.__repr__ = lambda self: UNKNOWN
    Unknown.__format__ = lambda self, spec: UNKNOWN
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(Unknown, name)
            else:
                setattr(Unknown, name, value)


@contextmanager
def _no_cyclic_gc():
    """The SDK allocates a dozen objects per resource property (outputs, futures, tasks) that live until
    the program ends; the cyclic collector's full passes over that growing heap made planning quadratic
    (1,000 topics: 47 s with it, 25 s without, 8 % more memory). Reference counting still frees what it
    can; the collector is back on (as it was) when the plan is made."""
    import gc

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _outputs_awaited_in_linear_time():
    """The SDK waits for outstanding outputs with `asyncio.wait(pending, FIRST_COMPLETED)` in a loop,
    which re-arms a callback on every pending task after each completion: quadratic in the number of
    outputs (a fifth of a 2,500-resource plan). FIRST_EXCEPTION has the same outcome (every output
    resolved, the first error raised) in linear time. Only the SDK's stack module sees the change."""
    import types

    from pulumi.runtime import stack as stack_module

    async def wait(tasks, *, timeout=None, return_when=asyncio.ALL_COMPLETED):
        if return_when == asyncio.FIRST_COMPLETED:
            return_when = asyncio.FIRST_EXCEPTION
        return await asyncio.wait(tasks, timeout=timeout, return_when=return_when)

    saved = stack_module.asyncio
    shim = types.ModuleType("asyncio")
    shim.__dict__.update({k: v for k, v in vars(asyncio).items() if not k.startswith("__")})
    shim.wait = wait
    stack_module.asyncio = shim
    try:
        yield
    finally:
        stack_module.asyncio = saved


@contextmanager
def _stack_traces_without_source_text():
    """The SDK captures a stack trace for every resource (`_get_stack_trace`) with
    `traceback.extract_stack()`, which also reads each frame's source line from disk and converts every
    file name to a URI again: a sixth of the plan's time at 1,000 topics. This builds the same
    `StackTrace` message (the frames below the concrete resource's `__init__`, each with its file URI
    and line; `tests/test_plan_preview.py` compares the two) from the live frames, without source text
    and with one URI conversion per file."""
    import pathlib

    from pulumi.runtime import resource as runtime_resource
    from pulumi.runtime.proto import source_pb2

    uris: dict[str, str | None] = {}

    def uri_of(filename: str) -> str | None:
        try:
            return uris[filename]
        except KeyError:
            try:
                uri = pathlib.Path(filename).as_uri() if filename else None
            except BaseException:  # noqa: BLE001 - as the SDK: a frame without a file URI has no position
                uri = None
            uris[filename] = uri
            return uri

    def stack_trace():
        frame, inits = sys._getframe(1), 0
        while frame is not None:  # newest to oldest: find the third `__init__` (the concrete resource's)
            if frame.f_code.co_name == "__init__":
                inits += 1
                if inits == 3:
                    break
            frame = frame.f_back
        if frame is None or frame.f_back is None:
            return source_pb2.StackTrace()
        frames = []
        frame = frame.f_back
        while frame is not None:
            uri, line = uri_of(frame.f_code.co_filename), frame.f_lineno
            pc = source_pb2.SourcePosition(uri=uri, line=line) if uri is not None and line is not None else None
            frames.append(source_pb2.StackFrame(pc=pc))
            frame = frame.f_back
        return source_pb2.StackTrace(frames=frames)

    saved = runtime_resource._get_stack_trace
    runtime_resource._get_stack_trace = stack_trace
    try:
        yield
    finally:
        runtime_resource._get_stack_trace = saved


@contextmanager
def _resource_types_once_per_class():
    """The SDK derives a resource class's property types from its annotations (`resource_types`) each
    time a resource of that class resolves its outputs; they depend only on the class, so each class's
    are derived once while the program runs (the SDK only reads them)."""
    from pulumi import _types

    saved = _types.resource_types
    derived: dict[type, dict] = {}

    def resource_types(resource_cls: type) -> dict:
        try:
            return derived[resource_cls]
        except KeyError:
            return derived.setdefault(resource_cls, saved(resource_cls))

    _types.resource_types = resource_types
    try:
        yield
    finally:
        _types.resource_types = saved


@contextmanager
def _counting_registrations(monitor):
    """Counts the resources the program has constructed, to name the one a stuck plan waits for."""
    import pulumi.resource as resource_module

    saved = resource_module.register_resource, resource_module.read_resource

    def counted(original):
        def call(res, ty, name, *args, **kwargs):
            with monitor.lock:
                monitor.started[(ty, name)] = monitor.started.get((ty, name), 0) + 1
            monitor.touch()  # constructing resources is progress, even before any of them registers
            return original(res, ty, name, *args, **kwargs)

        return call

    resource_module.register_resource = counted(saved[0])
    resource_module.read_resource = counted(saved[1])
    try:
        yield
    finally:
        resource_module.register_resource, resource_module.read_resource = saved


def program_error(err: BaseException, project: Project, unknown_invokes: list[dict]) -> str:
    """The program's own error, where it happened in the program's files: `file:line: Type: message`."""
    import pulumi

    message = str(err).strip() or err.__class__.__name__
    if isinstance(err, pulumi.RunError):
        return message
    place = ""
    for frame in traceback.extract_tb(err.__traceback__):
        try:
            relative = Path(frame.filename).resolve().relative_to(project.root.resolve())
        except ValueError:
            continue
        place = f"{relative.as_posix()}:{frame.lineno}: "
    text = f"{place}{err.__class__.__name__}: {message}".splitlines()[0]
    if unknown_invokes:
        tokens = ", ".join(sorted({i["token"] for i in unknown_invokes}))
        text += f" (offline, the results of {tokens} are unknown; give them with --invoke-results FILE)"
    return f"the program failed: {text}"


def make_plan(stack: str = "dev", root: Path | None = None, *, invoke_results: InvokeResults | None = None,
              idle_timeout_s: float = IDLE_TIMEOUT_S, on_resource=None) -> dict:
    """Run the program of `root` for `stack` and return the plan (see module docstring).

    `on_resource(record)`, when given, sees each resource as it registers (the engine analyses
    resources then), from the thread that registers it."""
    project = read_project(Path(root or project_root()).resolve())
    config = read_stack_config(project, stack)
    monitor = make_monitor(invoke_results or InvokeResults(), project.root, on_resource)
    env = {
        **config.env(),
        "PULUMI_PROJECT": project.name,
        "PULUMI_STACK": stack,
        "PULUMI_DRY_RUN": "true",
    }
    outcome: dict[str, BaseException] = {}
    with _environment(env, project.program_dir), _unknowns_print_as_sentinel(), _counting_registrations(monitor), \
            _outputs_awaited_in_linear_time(), _no_cyclic_gc(), _stack_traces_without_source_text(), \
            _resource_types_once_per_class():
        saved_path, saved_modules = list(sys.path), set(sys.modules)
        worker = threading.Thread(target=_run_program, args=(project, stack, monitor, outcome), daemon=True,
                                  name="pubsubguard-plan")
        try:
            worker.start()
            where: list = []
            while worker.is_alive():
                worker.join(0.1)
                if _busy(worker, where):
                    monitor.touch()
                idle = time.monotonic() - monitor.last_activity
                if worker.is_alive() and idle > idle_timeout_s:
                    raise PlanError(_stuck(monitor, idle_timeout_s, config.source))
        finally:
            sys.path[:] = saved_path
            _forget_program_modules(set(sys.modules) - saved_modules, project.program_dir)
    if "error" in outcome:
        err = outcome["error"]
        if isinstance(err, PlanError):
            raise err
        raise PlanError(program_error(err, project, monitor.unknown_invokes))
    records = {urn: r for urn, r in monitor.records.items()}
    return {
        **plan_header(project, stack, config),
        "resources": [records[urn] for urn in sorted(records)],
        "outputs": monitor.outputs,
        "unknown_invokes": _unique(monitor.unknown_invokes),
    }


def plan_header(project: Project, stack: str, config) -> dict:
    """The plan's fields that come from the project and stack files alone."""
    return {
        "format": PLAN_FORMAT,
        "project": project.name,
        "stack": stack,
        "gcp_project": _gcp_project(config.values) or "unknown-project",
        "provider_config": {k.split(":", 1)[1]: v for k, v in sorted(config.values.items())
                            if k.startswith("gcp:") and isinstance(v, str) and v != UNKNOWN},
    }


def _forget_program_modules(names: set[str], folder: Path) -> None:
    """Drop the modules the program imported from its own folder, and their names on the packages
    that stay (else `from pkg import mod` would find a stale module beside a fresh `pkg.mod`)."""
    for name in sorted(names, key=lambda n: -n.count(".")):
        if name == "__main__" or _in(sys.modules.get(name), folder):
            sys.modules.pop(name, None)
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and getattr(sys.modules[parent], child, None) is not None:
                delattr(sys.modules[parent], child)


def _in(module, folder: Path) -> bool:
    path = getattr(module, "__file__", None)
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _unique(invokes: list[dict]) -> list[dict]:
    seen = {}
    for invoke in invokes:
        seen.setdefault(json.dumps(invoke, sort_keys=True), invoke)
    return [seen[key] for key in sorted(seen)]


def _busy(worker: threading.Thread, last: list) -> bool:
    """Whether the program's thread moved since the last sample (`last` holds where it was) and is not
    waiting in its event loop's `select`: a loop that waits there, or a thread blocked in one place, for
    `IDLE_TIMEOUT_S` with outputs unresolved waits forever (nothing else can wake the loop: RPCs run
    inline). Sampled from outside, so the program pays nothing per callback."""
    frame = sys._current_frames().get(worker.ident)
    if frame is None or (frame.f_code.co_name == "select" and frame.f_code.co_filename.endswith("selectors.py")):
        return False
    where = (id(frame), frame.f_lasti, frame.f_lineno)
    moved, last[:] = where != tuple(last), where
    return moved


def _stuck(monitor, idle_timeout_s: float, source: str) -> str:
    with monitor.lock:
        pending = [f"{ty} {name!r}" for (ty, name), count in sorted(monitor.started.items())
                   if count > monitor.finished.get((ty, name), 0)]
    what = (f"waiting for {pending[0]}" + (f" (and {len(pending) - 1} more)" if len(pending) > 1 else "")
            + ", whose inputs never resolved") if pending else "waiting on something that never completes"
    return f"{source}: the program made no progress for {idle_timeout_s:g} s, {what}"


def _run_program(project: Project, stack: str, monitor, outcome: dict) -> None:
    import pulumi
    from pulumi.runtime import mocks, settings

    class ProgressLoop(asyncio.SelectorEventLoop):
        """The program's event loop (its progress is watched from outside: `_busy`)."""

        def run_in_executor(self, executor, func, *args):
            """The SDK sends each RPC from a thread pool so the loop runs on while a remote engine
            answers; this monitor answers in this process at once, so the call runs here: a thread
            hop per RPC cost the plan a third of its time in lock and wake-up traffic."""
            if executor is not None:
                return super().run_in_executor(executor, func, *args)
            future = self.create_future()
            try:
                future.set_result(func(*args))
            except Exception as err:  # noqa: BLE001 - delivered to the awaiting coroutine, as the pool would
                future.set_exception(err)
            return future

    loop = ProgressLoop()
    asyncio.set_event_loop(loop)
    try:
        settings.reset_options()
        pulumi.runtime.config.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
        settings.configure(
            mocks.MockSettings(
                monitor=monitor,
                monitor_features=set(monitor.GetDeploymentInfo(None).supportedFeatures),
                engine=mocks.MockEngine(None),
                project=project.name,
                stack=stack,
                dry_run=True,
                organization="organization",
                callbacks=None,
            )
        )
        loop.run_until_complete(
            pulumi.runtime.run_in_stack(lambda: runpy.run_path(str(project.main), run_name="__main__"))
        )
    except BaseException as err:  # noqa: BLE001 - reported to the caller as the program's error
        outcome["error"] = err
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()
        finally:
            asyncio.set_event_loop(None)
            settings.reset_options()


def dumps(plan: dict) -> str:
    return json.dumps(plan, indent=2, sort_keys=True) + "\n"


def load_plan(path: Path) -> dict:
    try:
        plan = json.loads(storage.read_text(path))
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file (make one with `pubsubguard plan --out {path}`)") from None
    except json.JSONDecodeError as err:
        raise PlanError(f"{path}: not JSON ({err})") from None
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise PlanError(f"{path}: format: expected {PLAN_FORMAT!r}, got {plan.get('format') if isinstance(plan, dict) else type(plan).__name__!r}")
    return plan


def resources_of(plan: dict, type_: str) -> list[dict]:
    return [r for r in plan["resources"] if r["type"] == type_]
