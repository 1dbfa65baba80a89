"""Judge a plan with the policy pack the way the Pulumi CLI does, without the CLI.

The CLI starts a Python pack as `<pack venv python> -u -m pulumi.policy <engine address> <pack dir>`,
reads the port the pack prints on stdout, and talks the gRPC Analyzer protocol to it:
`GetAnalyzerInfo` (policies and their default levels), `Configure` (every policy's effective level and
config properties), `ConfigureStack`, `Analyze` once per resource (its inputs), and `AnalyzeStack`
once with every resource (with parents, dependencies and property dependencies). This module does
the same from the project's virtualenv (protobuf 6) against the pack's own (protobuf 5): they only
share the wire.

Plan values equal to `pubsubguard.plan.UNKNOWN` travel as the engine's unknown sentinel, which is
what the CLI sends for a value not known during preview; secrets travel in the engine's envelope.
Resources the program only reads (`Topic.get(...)`) are not judged, as in a preview. Each resource
carries its provider (the default gcp provider with the stack's `gcp:*` config, or the explicit
provider resource it names), so rules know the provider's project.
"""

from __future__ import annotations

import collections
import json
import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pubsubguard import plan as planning
from pubsubguard.errors import UserError, read_yaml_mapping

LEVELS = ("advisory", "mandatory", "remediate", "disabled")
STARTUP_TIMEOUT_S = 60.0
ENGINE_ADDRESS = "127.0.0.1:0"  # the pack logs nothing to the engine; the CLI passes its own address

class CheckError(UserError):
    """The check could not run: the message names the file, option or pack at fault."""

@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    level: str  # default level the pack declares
    kind: str  # "resource" or "stack"
    config_schema: dict = field(default_factory=dict)

@dataclass(frozen=True)
class Violation:
    policy: str
    level: str  # effective level: "mandatory" or "advisory"
    message: str  # the rule's own sentence (the SDK's "description\n" prefix removed)
    urn: str  # "" when the violation is about the stack as a whole
    resource_type: str
    resource_name: str

@dataclass
class CheckResult:
    pack: str
    pack_version: str
    stack: str
    source: str  # what was judged: "Pulumi.dev.yaml" or a plan file
    resources: int
    policies: list[PolicyInfo]
    levels: dict[str, str]  # effective level of every policy
    violations: list[Violation]
    unknown_invokes: list[dict] = field(default_factory=list)  # invokes whose results were unknown offline
    unjudged: list[dict] = field(default_factory=list)  # {urn, resource_name, policy, properties}: not judged
    error: str | None = None  # the program did not complete (what happened); the verdict is then exit 2
    unknowns_fail: bool = False  # `--unknowns fail`: a mandatory rule that could not decide fails the check
    program: Any = None  # the program's run (`plan.ProgramRun`: its output, log, notes), when one ran

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.level == "mandatory"]

    @property
    def undecided_mandatory(self) -> list[dict]:
        """Not-judged entries of mandatory rules (they fail the check with `--unknowns fail`)."""
        return [e for e in self.unjudged if self.levels.get(e["policy"]) == "mandatory"]

    @property
    def failed(self) -> bool:
        return bool(self.mandatory) or (self.unknowns_fail and bool(self.undecided_mandatory))

    @property
    def exit_code(self) -> int:
        if self.error:
            return 2
        return 1 if self.failed else 0

    @property
    def secrets(self) -> set[str]:
        return self.program.secrets if self.program is not None else set()

# --- The pack process ------------------------------------------------------------------------------
def default_pack_dir() -> Path:
    """The checkout's `policies/`, else the installed pack's folder in the cache (pubsubguard.packenv)."""
    from pubsubguard import packenv

    return packenv.default_pack_dir()

def pack_python(pack_dir: Path) -> Path:
    """The pack's interpreter: PulumiPolicy.yaml's `runtime.options.virtualenv` (as the CLI), else the
    virtualenv made in the cache for its requirements (pubsubguard.packenv)."""
    from pubsubguard import packenv

    return packenv.pack_python(pack_dir)

def read_manifest(pack_dir: Path) -> dict:
    return read_yaml_mapping(
        pack_dir / "PulumiPolicy.yaml", CheckError, f"is {pack_dir} a policy pack?", "a mapping with 'runtime' and 'version'"
    )

class PackProcess:
    """The running pack: a context manager that always terminates the process it started."""

    def __init__(self, pack_dir: Path | None = None, *, project: str = "pubsubguard", stack: str = "dev"):
        self.pack_dir = Path(pack_dir or default_pack_dir()).resolve()
        self.python = pack_python(self.pack_dir)
        self.env = {
            **os.environ,
            "PULUMI_PROJECT": project,
            "PULUMI_STACK": stack,
            "PULUMI_DRY_RUN": "true",
            "PYTHONUNBUFFERED": "1",
        }
        self.process: subprocess.Popen | None = None
        self.channel = None
        self.stub = None
        self.port: int | None = None
        self.on_close = None  # called with the pack's peak memory (MiB) just before it stops

    def __enter__(self) -> "PackProcess":
        self.process = subprocess.Popen(
            [str(self.python), "-u", "-m", "pulumi.policy", ENGINE_ADDRESS, str(self.pack_dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=str(self.pack_dir),
        )
        try:
            self.port = self._read_port()
            import grpc
            from pulumi.runtime.proto import analyzer_pb2_grpc

            self.channel = grpc.insecure_channel(
                f"127.0.0.1:{self.port}", options=[("grpc.max_receive_message_length", 400 * 1024 * 1024),
                                                   ("grpc.max_send_message_length", 400 * 1024 * 1024)]
            )
            self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)
            from google.protobuf import empty_pb2

            # Ready when it answers (not `channel_ready_future`, whose polling thread outlives the wait and
            # raised "Cannot monitor channel state: Channel closed!" when the check ended soon after).
            self.stub.GetPluginInfo(empty_pb2.Empty(), wait_for_ready=True, timeout=STARTUP_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        return self

    def _read_port(self) -> int:
        assert self.process and self.process.stdout
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CheckError(f"policy pack {self.pack_dir}: printed no port within {STARTUP_TIMEOUT_S:.0f} s")
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.process.stdout.fileno(), 1)
            if not chunk:
                self.process.wait(timeout=10)
                stderr = (self.process.stderr.read() if self.process.stderr else b"").decode(errors="replace")
                raise CheckError(
                    f"policy pack {self.pack_dir}: exited with code {self.process.returncode} before serving:\n"
                    + "\n".join(stderr.strip().splitlines()[-15:])
                )
            line += chunk
        try:
            return int(line.strip())
        except ValueError:
            raise CheckError(f"policy pack {self.pack_dir}: printed {line!r} where the CLI expects its port") from None

    def close(self) -> None:
        if self.process is not None and self.on_close is not None:
            self.on_close(_peak_mib(self.process.pid) or 0.0)
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()

    def __exit__(self, *exc) -> None:
        self.close()

# --- Policy config (as `pulumi preview --policy-pack-config`) --------------------------------------
def read_policy_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CheckError(f"--policy-config {path}: no such file") from None
    except json.JSONDecodeError as err:
        raise CheckError(f"--policy-config {path}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise CheckError(f"--policy-config {path}: expected a JSON object of policy name to level or settings")
    return data

_JSON_TYPES = {
    "boolean": (bool,), "string": (str,), "array": (list,), "object": (dict,),
    "integer": (int,), "number": (int, float),
}

def reconcile_config(policies: list[PolicyInfo], initial: dict[str, dict], user: dict[str, Any],
                     source: str = "policy config") -> dict[str, tuple[str, dict]]:
    """Every policy's (level, properties), as the CLI computes them before `Configure`.

    Precedence: the user's entry for the policy, then the user's "all" level, then the pack's initial
    config, then the policy's own default; properties start from the schema defaults.
    """
    names = {p.name for p in policies}
    for key in user:
        if key != "all" and key not in names:
            raise CheckError(f"{source}: {key!r}: no such policy in the pack (policies: {', '.join(sorted(names))})")
    all_level = _level(user.get("all"), f"{source}: all") if "all" in user else None
    result = {}
    for policy in policies:
        level, props = policy.level, {}
        for key, spec in (policy.config_schema.get("properties") or {}).items():
            if isinstance(spec, dict) and "default" in spec:
                props[key] = spec["default"]
        seed = initial.get(policy.name) or {}
        level = seed.get("level") or level
        props.update(seed.get("properties") or {})
        if all_level:
            level = all_level
        entry = user.get(policy.name)
        where = f"{source}: {policy.name}"
        if isinstance(entry, str):
            level = _level(entry, where)
        elif isinstance(entry, dict):
            for key, value in entry.items():
                if key == "enforcementLevel":
                    level = _level(value, f"{where}.enforcementLevel")
                    continue
                spec = (policy.config_schema.get("properties") or {}).get(key)
                if spec is None:
                    known_keys = ", ".join(sorted(policy.config_schema.get("properties") or {})) or "none"
                    raise CheckError(f"{where}.{key}: not a setting of this policy (settings: {known_keys})")
                expected = _JSON_TYPES.get(spec.get("type"), (object,))
                if isinstance(value, bool) and bool not in expected or not isinstance(value, expected):
                    raise CheckError(f"{where}.{key}: expected {spec.get('type')}, got {json.dumps(value)}")
                props[key] = value
        elif entry is not None:
            raise CheckError(f"{where}: expected a level ({', '.join(LEVELS)}) or an object, got {json.dumps(entry)}")
        result[policy.name] = (level, props)
    return result

def _level(value: Any, where: str) -> str:
    if value not in LEVELS:
        raise CheckError(f"{where}: expected one of {', '.join(LEVELS)}, got {json.dumps(value)}")
    return value

# --- The wire --------------------------------------------------------------------------------------
def _pb():
    from pulumi.runtime.proto import analyzer_pb2

    return analyzer_pb2

def _level_name(value: int) -> str:
    pb = _pb()
    return {pb.ADVISORY: "advisory", pb.MANDATORY: "mandatory", pb.REMEDIATE: "remediate", pb.DISABLED: "disabled"}[value]

def _level_value(name: str) -> int:
    pb = _pb()
    return {"advisory": pb.ADVISORY, "mandatory": pb.MANDATORY, "remediate": pb.REMEDIATE, "disabled": pb.DISABLED}[name]

def wire_value(value: Any) -> Any:
    """A plan value as the CLI marshals it: unknowns are the engine's unknown (string) sentinel."""
    from pulumi.runtime import rpc

    if value == planning.UNKNOWN:
        return rpc.UNKNOWN  # the SDK's marshalled unknown, the same string the plan records
    if isinstance(value, dict):
        return {k: wire_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [wire_value(v) for v in value]
    return value

def _struct(values: dict):
    from google.protobuf import struct_pb2

    struct = struct_pb2.Struct()
    struct.update(wire_value(values))
    return struct

def _provider(resource: dict, plan: dict, by_urn: dict):
    """The provider the CLI reports for a resource: the explicit provider resource it names, else the
    default provider of its package (with the stack's `<package>:*` config). None for components."""
    if not resource.get("custom") or resource["type"].startswith("pulumi:"):
        return None
    explicit = by_urn.get(resource.get("provider") or "")
    if explicit is not None:
        return _pb().AnalyzerProviderResource(
            type=explicit["type"], name=explicit["name"], urn=explicit["urn"],
            properties=_struct(explicit.get("inputs") or {}),
        )
    package = resource["type"].split(":", 1)[0]
    config = plan.get("provider_config") or ({"project": plan["gcp_project"]} if plan.get("gcp_project") else {})
    return _pb().AnalyzerProviderResource(
        type=f"pulumi:providers:{package}",
        name="default",
        urn=f"urn:pulumi:{plan.get('stack')}::{plan.get('project')}::pulumi:providers:{package}::default",
        properties=_struct(config if package == "gcp" else {}),
    )


def judged_resources(plan: dict) -> list[dict]:
    """What the engine sends to analyzers: every registered resource, not those only read."""
    return [r for r in plan["resources"] if not r.get("external")]


def analyze_request(resource: dict, context: dict, by_urn: dict):
    """The `Analyze` request the CLI sends for one resource."""
    pb = _pb()
    request = pb.AnalyzeRequest(
        type=resource["type"], name=resource["name"], urn=resource["urn"],
        properties=_struct(resource.get("inputs") or {}),
        options=pb.AnalyzerResourceOptions(parent=resource.get("parent") or ""),
    )
    provider = _provider(resource, context, by_urn)
    if provider is not None:
        request.provider.CopyFrom(provider)
    return request


def analyze_stack_request(plan: dict):
    pb = _pb()
    request = pb.AnalyzeStackRequest()
    by_urn = {r["urn"]: r for r in plan["resources"]}
    for resource in judged_resources(plan):
        item = request.resources.add(
            type=resource["type"], name=resource["name"], urn=resource["urn"],
            properties=_struct(resource.get("inputs") or {}),
            options=pb.AnalyzerResourceOptions(parent=resource.get("parent") or ""),
            parent=resource.get("parent") or "",
            dependencies=resource.get("dependencies") or [],
        )
        for key, urns in (resource.get("property_dependencies") or {}).items():
            item.propertyDependencies[key].urns.extend(urns)
        provider = _provider(resource, plan, by_urn)
        if provider is not None:
            item.provider.CopyFrom(provider)
    return request

def policy_infos(info) -> list[PolicyInfo]:
    from google.protobuf import json_format

    pb = _pb()
    result = []
    for p in info.policies:
        schema = json_format.MessageToDict(p.configSchema) if p.HasField("configSchema") else {}
        result.append(
            PolicyInfo(
                name=p.name, description=p.description, level=_level_name(p.enforcementLevel),
                kind="stack" if p.policy_type == pb.POLICY_TYPE_STACK else "resource", config_schema=schema,
            )
        )
    return result

IN_FLIGHT = 16  # Analyze calls outstanding per pack process: a call's round trip (~2 ms) overlaps the next ones
PARALLEL_FROM_RESOURCES = 400  # below this, one pack process (starting another costs ~0.6 s)

def default_workers(resources: int) -> int:
    return 1 if resources < PARALLEL_FROM_RESOURCES else max(1, min(os.cpu_count() or 1, 4))

def run_check(plan: dict, *, pack_dir: Path | None = None, policy_config: dict | None = None,
              source: str = "", config_source: str = "policy config", workers: int | None = None) -> CheckResult:
    """Start the pack, judge `plan` over gRPC, stop the pack; returns every violation reported."""
    with Judge(plan_context(plan), pack_dir=pack_dir, policy_config=policy_config, config_source=config_source,
               workers=workers or default_workers(len(judged_resources(plan)))) as judge:
        for record in plan["resources"]:
            judge.analyze(record)
        return judge.finish(plan, source)


def check_program(root: Path, stack: str, *, invoke_results=None, policy_config: dict | None = None,
                  source: str = "", config_source: str = "policy config", timings: dict | None = None,
                  run_options: dict | None = None, pack_dir: Path | None = None):
    """Plan the program of `root` and judge it as the engine does in a preview: the pack judges each
    resource as the program registers it; the stack rules run once the program is done. The program
    runs in a confined process of its own (`plan.run_program`); the judging client runs in another
    (`JudgeProcess`), so the pack works on the core the program leaves free. Returns (plan, result);
    a program that did not complete gives a result with `error` set (what was judged until then, no
    stack rules). `timings` gets `plan_s` (until the program is done), `check_s` (after it) and the
    peak memory of the judge and pack processes in MiB (`judge_mib`, `pack_mib`). `run_options` go to
    `run_program` (python, pass_env, limits, require_isolation, note)."""
    import time

    project = planning.read_project(root)
    header = planning.plan_header(project, stack, planning.read_stack_config(project, stack))
    started = time.perf_counter()
    with JudgeProcess(header, policy_config=policy_config, config_source=config_source, pack_dir=pack_dir) as judge:
        try:
            run = planning.run_program(stack, root, invoke_results=invoke_results, on_resource=judge.analyze,
                                       **(run_options or {}))
            failure = None
            stopped = False
        except planning.ProgramFailed as err:
            run, failure, stopped = err.run, str(err), err.stopped
        planned = time.perf_counter()
        # A program that failed: every resource it registered is judged (the stack rules, which need the
        # whole program, are not); one stopped at a limit: only what was judged already (exit at once).
        result, peaks = judge.finish(run.plan, source, partial=failure is not None, abandon=stopped)
    result.error, result.program = failure, run
    if timings is not None:
        timings.update(plan_s=planned - started, check_s=time.perf_counter() - planned, **peaks)
    return run.plan, result


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
        package_parent = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", f"from pubsubguard.check import judge_main; judge_main({from_parent}, {to_parent})"],
                pass_fds=(from_parent, to_parent), stdin=subprocess.DEVNULL, env=env, start_new_session=True,
            )
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
               ) -> tuple[CheckResult, dict]:
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
        peaks["judge_mib"] = _peak_mib(os.getpid()) or 0.0
        try:
            sending.send((*reply, peaks))
        except OSError:  # the command stopped waiting (Ctrl-C during the stack rules): nothing to tell
            return
    finally:
        receiving.close()
        sending.close()


def _peak_mib(pid: int) -> float | None:
    """A running process's peak resident memory (Linux's VmHWM), in MiB; None where unknown."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024
    except (OSError, StopIteration, ValueError):
        return None


def plan_context(plan: dict) -> dict:
    """What a resource's Analyze request needs besides the resource: stack, project, provider config."""
    return {key: plan.get(key) for key in ("project", "stack", "gcp_project", "provider_config")}


class Judge:
    """The pack processes of one check, started and configured as the CLI does (`GetAnalyzerInfo`,
    `Configure`, `ConfigureStack`), then `Analyze` for each resource as it is handed over — also while the
    program is still registering resources, as the engine analyses each resource when it registers — and
    `AnalyzeStack` once at `finish`. Each `Analyze` is independent of the others, so the work is spread
    over `workers` pack processes, each started and configured exactly as the CLI starts its one; results
    do not depend on `workers`. A context manager: the processes always stop."""

    _DONE = object()

    def __init__(self, context: dict, *, pack_dir: Path | None = None, policy_config: dict | None = None,
                 config_source: str = "policy config", workers: int = 1):
        import queue
        import threading

        self.context = context
        self.pack_dir = Path(pack_dir or default_pack_dir())
        self.manifest = read_manifest(self.pack_dir)
        self.policy_config = policy_config or {}
        self.config_source = config_source
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
            _configure_stack(pack.stub, self.context)
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

        pb = _pb()
        try:
            self.info = self.packs[0].stub.GetAnalyzerInfo(empty_pb2.Empty())
            self.policies = policy_infos(self.info)
            initial = {
                name: {
                    "level": _level_name(cfg.enforcementLevel) if cfg.enforcementLevel else None,
                    "properties": json_format.MessageToDict(cfg.properties),
                }
                for name, cfg in self.info.initialConfig.items()
            }
            self.effective = reconcile_config(self.policies, initial, self.policy_config, self.config_source)
            configure = pb.ConfigureAnalyzerRequest()
            for name, (level, props) in self.effective.items():
                configure.policyConfig[name].enforcementLevel = _level_value(level)
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

    def finish(self, plan: dict, source: str = "", partial: bool = False, abandon: bool = False) -> CheckResult:
        """AnalyzeStack over the whole plan once every Analyze is answered; the result. `partial`: the
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
                    policy=d.policyName, level=_level_name(d.enforcementLevel), message=message, urn=urn,
                    resource_type=resource.get("type", ""), resource_name=resource.get("name", ""),
                )
            )
        violations.sort(key=lambda v: (v.urn, v.level != "mandatory", v.policy, v.message))
        info, effective = self.info, self.effective
        return CheckResult(
            pack=info.name, pack_version=str(self.manifest.get("version") or info.version), stack=str(plan.get("stack")),
            source=source, resources=len(judged_resources(plan)), policies=self.policies,
            levels={name: level for name, (level, _) in effective.items()}, violations=violations,
            unknown_invokes=list(plan.get("unknown_invokes") or []),
            unjudged=sorted(cannot_judge, key=lambda e: (e["policy"], e["urn"])),
        )


CANNOT_JUDGE = re.compile(r"^can't run policy '(?P<policy>[^']+)' from policy pack '[^']*' during preview: "
                          r"\w+ value at \.(?P<what>.*) can't be known during preview$", re.S)


def cannot_judge_entries(diagnostic, subject: str, by_urn: dict) -> list[dict] | None:
    """The "not judged" entries a pack's cannot-judge line carries (`pubsub_rules.rule`: the policy SDK's
    own line for a policy that met an unknown), or None for any other diagnostic. A resource rule's line
    is about the resource judged (`subject`); a stack rule's names each resource: `<urn>: <properties>`."""
    match = CANNOT_JUDGE.match(diagnostic.message)
    if match is None:
        return None
    entries = []
    for part in match.group("what").split("; "):
        urn, _, paths = part.rpartition(": ") if part.startswith("urn:") else ("", "", part)
        urn = urn or diagnostic.urn or subject
        record = by_urn.get(urn, {})
        properties = [p for p in paths.split(", ") if p]
        entries.append({"urn": urn, "resource_type": record.get("type", ""), "resource_name": record.get("name", ""),
                        "policy": match.group("policy"), "properties": properties,
                        "unknown_inputs": {p: (record.get("unknowns") or {}).get(p) or _sources_of(record, p)
                                           for p in properties}})
    return entries


def _sources_of(record: dict, path: str) -> list[dict]:
    """Where an unknown input comes from, from the plan's provenance of its top-level property."""
    unknowns = record.get("unknowns") or {}
    top = path.split(".")[0].split(" ")[0]
    return next((sources for key, sources in unknowns.items() if key.split(".")[0] == top), [])


def _configure_stack(stub, context: dict) -> None:
    import grpc

    pb = _pb()
    try:
        stub.ConfigureStack(
            pb.AnalyzerStackConfigureRequest(
                stack=str(context.get("stack") or ""), project=str(context.get("project") or ""),
                organization="organization", dry_run=True,
            )
        )
    except grpc.RpcError as err:  # packs built on older SDKs do not implement it; the CLI goes on too
        if err.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise

# --- Output ----------------------------------------------------------------------------------------
def grouped(result: CheckResult) -> list[tuple[str, list[Violation]]]:
    groups: dict[str, list[Violation]] = {}
    for v in result.violations:
        groups.setdefault(v.urn, []).append(v)
    return sorted(groups.items(), key=lambda item: (not any(v.level == "mandatory" for v in item[1]), item[0]))

COMPACT_FROM = 40  # violations: above this, text output summarises per rule (the machine formats keep all)
EXAMPLES = 3


def format_text(result: CheckResult, compact: bool | None = None, locate=None, verbose: bool = False) -> str:
    """The report for a person, as linters print: one line per violation, `file:line: level rule: message`
    (the line in the program that creates the resource, `locate(violation) -> (file, line)`), mandatory
    first; an advisory rule that fires on more than a few resources is one line with its count; URNs
    only with `verbose`; what could not be judged and what the program printed; the verdict last."""
    lines = [
        f"pubsubguard check: {result.source or 'plan'} (stack {result.stack}), {result.resources} resources, "
        f"pack {result.pack}@{result.pack_version} ({len(result.policies)} policies)",
        "",
    ]
    if compact is None:
        compact = len(result.mandatory) > COMPACT_FROM

    def where(v: Violation) -> str:
        if locate is None:
            return f"{v.resource_type.split(':')[-1]} {v.resource_name}: " if v.resource_name else "stack: "
        path, line = locate(v)
        return f"{path}:{line}: "

    def entry(v: Violation, level_width: int = 9) -> list[str]:
        text = [f"{where(v)}{v.level:<{level_width}} {v.policy}: {v.message}"]
        return text + ([f"    {v.urn}"] if verbose and v.urn else [])

    mandatory = [v for v in result.violations if v.level == "mandatory"]
    advisory = [v for v in result.violations if v.level != "mandatory"]
    if compact:
        lines += _per_rule(result)
    else:
        for v in sorted(mandatory, key=lambda v: (where(v), v.policy)):
            lines += entry(v)
        by_rule: dict[str, list[Violation]] = {}
        for v in advisory:
            by_rule.setdefault(v.policy, []).append(v)
        for rule, found in sorted(by_rule.items()):
            if len(found) > EXAMPLES and not verbose:
                names = sorted({v.resource_name or "stack" for v in found})
                lines.append(f"{where(found[0])}{found[0].level:<9} {rule} ({len(found)} resources: "
                             f"{', '.join(names[:EXAMPLES])} and {len(names) - EXAMPLES} more): {found[0].message}")
            else:
                for v in sorted(found, key=where):
                    lines += entry(v)
        if result.violations:
            lines.append("")
    lines += _not_judged(result)
    lines += _program_section(result)
    mandatory, advisory = len(result.mandatory), len(result.violations) - len(result.mandatory)
    if result.error:
        lines.append(f"ERROR: {result.error}")
        lines.append(f"Seen until then: {mandatory} mandatory, {advisory} advisory violation{'s' if advisory != 1 else ''} "
                     "(the stack rules did not run).")
        return "\n".join(lines) + "\n"
    verdict = "REJECTED" if result.failed else "PASSED"
    undecided = (f", {len(result.undecided_mandatory)} mandatory not judged (--unknowns fail)"
                 if result.unknowns_fail and result.undecided_mandatory else "")
    lines.append(f"{verdict}: {mandatory} mandatory, {advisory} advisory violation{'s' if advisory != 1 else ''}{undecided}.")
    return "\n".join(lines) + "\n"


PROGRAM_LINES = 20  # of each of the program's streams, in the text output


def _program_section(result: CheckResult) -> list[str]:
    """What the program printed and logged, under its own heading, as `pulumi preview` shows its
    diagnostics (never on this command's stdout as the program wrote it: here, indented and cut)."""
    run = result.program
    if run is None:
        return []
    lines = []
    for severity, message in run.messages:
        lines.append(f"  {severity}: {message.splitlines()[0] if message else ''}"[:300])
    for name, stream in (("stdout", run.stdout), ("stderr", run.stderr)):
        if not stream.total:
            continue
        text = stream.text().splitlines()
        shown = [f"    {line[:300]}" for line in text[:PROGRAM_LINES]]
        more = stream.total - sum(len(line) + 1 for line in text[:PROGRAM_LINES])
        lines.append(f"  {name}:")
        lines += shown
        if more > 0:
            lines.append(f"    ... {more:,} more bytes not shown")
    if not lines:
        return []
    return ["Program output (diagnostics):"] + lines + [""]


def _per_rule(result: CheckResult) -> list[str]:
    by_rule: dict[tuple[str, str], list[Violation]] = {}
    for v in result.violations:
        by_rule.setdefault((v.level, v.policy), []).append(v)
    lines = []
    for (level, policy), found in sorted(by_rule.items(), key=lambda item: (item[0][0] != "mandatory", item[0][1])):
        names = sorted({v.resource_name or "stack" for v in found})
        more = f" and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else ""
        lines.append(f"[{level}] {policy}: {len(found)} violation{'s' if len(found) != 1 else ''} "
                     f"({', '.join(names[:EXAMPLES])}{more})")
        lines.append(f"  e.g. {found[0].message}")
    return lines + ["", "(summary per rule; --format json or sarif lists every violation)", ""]


def _not_judged(result: CheckResult) -> list[str]:
    lines = []
    if result.unknown_invokes:
        tokens = sorted({i["token"] for i in result.unknown_invokes})
        lines.append(f"Unknown offline: the result{'s' if len(tokens) > 1 else ''} of {', '.join(tokens)} "
                     "(values built from them are unknown; give results with --invoke-results FILE).")
    if result.unjudged:
        by_rule: dict[str, set[str]] = {}
        for entry in result.unjudged:
            by_rule.setdefault(entry["policy"], set()).add(entry["resource_name"])
        parts = [f"{rule} on {', '.join(sorted(names)[:EXAMPLES])}" + (f" and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else "")
                 for rule, names in sorted(by_rule.items())]
        lines.append("Not judged (values unknown until deploy): " + "; ".join(parts) + ".")
        if result.unknowns_fail and result.undecided_mandatory:
            lines.append("With --unknowns fail, each mandatory rule above that could not decide fails the check.")
    return lines + [""] if lines else lines


def format_json(result: CheckResult) -> str:
    return json.dumps(
        {
            "pack": result.pack, "version": result.pack_version, "stack": result.stack, "source": result.source,
            "resources": result.resources, "passed": None if result.error else not result.failed,
            "unknowns": "fail" if result.unknowns_fail else "advisory",
            "mandatory": len(result.mandatory), "advisory": len(result.violations) - len(result.mandatory),
            "levels": result.levels,
            "violations": [v.__dict__ for v in result.violations],
            "unknown_invokes": result.unknown_invokes,
            "unjudged": result.unjudged,
            "program": _program_json(result),
            "error": {"message": result.error, "kind": "program", "exit_code": 2} if result.error else None,
        },
        indent=2, sort_keys=True,
    ) + "\n"

def _program_json(result: CheckResult) -> dict | None:
    run = result.program
    if run is None:
        return None
    return {
        "interpreter": run.interpreter, "confined": run.confined, "notes": run.notes, "exit_code": run.exit_code,
        "messages": [{"severity": s, "message": m} for s, m in run.messages],
        "stdout": run.stdout.text(), "stdout_bytes": run.stdout.total,
        "stderr": run.stderr.text(), "stderr_bytes": run.stderr.total,
    }


def format_json_error(error: UserError, *, stack: str = "", source: str = "") -> str:
    """The JSON document when there is no verdict (the program, stack file or command line is broken)."""
    return json.dumps(
        {"passed": None, "stack": stack, "source": source, "violations": [],
         "error": {"message": str(error), "kind": getattr(error, "kind", "input"), "exit_code": error.exit_code}},
        indent=2, sort_keys=True,
    ) + "\n"


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"mandatory": "error", "advisory": "warning", "remediate": "error", "disabled": "none"}

def format_sarif(result: CheckResult, locate=None) -> str:
    """SARIF 2.1.0 as GitHub code scanning loads it. `locate(violation) -> (uri, line)` places a
    result in a file of the repository (default: the judged source, line 1)."""
    rule_index = {p.name: i for i, p in enumerate(result.policies)}
    rules = [
        {
            "id": p.name, "name": p.name,
            "shortDescription": {"text": p.description},
            "fullDescription": {"text": p.description},
            "help": {"text": f"{p.description} See docs/policies.md#{p.name}."},
            "defaultConfiguration": {"level": _SARIF_LEVEL[result.levels.get(p.name, p.level)]},
            "properties": {"kind": p.kind, "enforcementLevel": result.levels.get(p.name, p.level)},
        }
        for p in result.policies
    ]
    results = []
    for v in result.violations:
        uri, line = locate(v) if locate else (result.source or "Pulumi.yaml", 1)
        entry = {
            "ruleId": v.policy,
            "level": _SARIF_LEVEL.get(v.level, "warning"),
            "message": {"text": v.message},
            "locations": [
                {
                    "physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(1, line)}},
                    "logicalLocations": [
                        {"name": v.resource_name or "stack", "fullyQualifiedName": v.urn or result.stack,
                         "kind": "resource"}
                    ],
                }
            ],
            "partialFingerprints": {"pulumiUrnPolicy/v1": f"{v.urn}|{v.policy}"},
        }
        if v.policy in rule_index:
            entry["ruleIndex"] = rule_index[v.policy]
        results.append(entry)
    for entry in result.unjudged:
        blocking = result.unknowns_fail and result.levels.get(entry["policy"]) == "mandatory"
        where = Violation(policy=entry["policy"], level="advisory", message="", urn=entry["urn"],
                          resource_type=entry["resource_type"], resource_name=entry["resource_name"])
        uri, line = locate(where) if locate else (result.source or "Pulumi.yaml", 1)
        results.append({
            "ruleId": entry["policy"], "level": "error" if blocking else "note",
            "message": {"text": f"Not judged: {', '.join(entry['properties'])} unknown until deploy."},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(1, line)}},
                           "logicalLocations": [{"name": entry["resource_name"] or "stack",
                                                 "fullyQualifiedName": entry["urn"], "kind": "resource"}]}],
            "partialFingerprints": {"pulumiUrnPolicy/v1": f"{entry['urn']}|{entry['policy']}|not-judged"},
            "properties": {"notJudged": True, "unknownInputs": entry.get("unknown_inputs") or {}},
            **({"ruleIndex": rule_index[entry["policy"]]} if entry["policy"] in rule_index else {}),
        })
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "pubsubguard", "semanticVersion": result.pack_version,
                                    "informationUri": "https://www.pulumi.com/docs/using-pulumi/crossguard/",
                                    "rules": rules}},
                "automationDetails": {"id": f"pubsubguard-check/{result.stack}/"},
                "invocations": [{"executionSuccessful": not result.error, "toolExecutionNotifications": [
                    {"level": "note", "message": {"text": line}} for line in _not_judged(result) if line
                ] + ([{"level": "error", "message": {"text": f"the program did not complete: {result.error}"}}]
                     if result.error else [])}],
                "results": results,
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"

def format_sarif_error(error: UserError, *, stack: str = "") -> str:
    """A SARIF run with no results and `executionSuccessful: false` when there is no verdict."""
    return json.dumps({
        "$schema": SARIF_SCHEMA, "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "pubsubguard", "rules": []}},
                  "automationDetails": {"id": f"pubsubguard-check/{stack}/"},
                  "invocations": [{"executionSuccessful": False, "exitCode": error.exit_code,
                                   "toolExecutionNotifications": [{"level": "error", "message": {"text": str(error)}}]}],
                  "results": []}],
    }, indent=2) + "\n"


def source_locator(files: list[Path], relative_to: Path, plan: dict | None = None, root: Path | None = None):
    """`locate` for SARIF: where the program constructs the resource (the source position the SDK sends
    with its registration), else the first line of `files` naming it, else line 1 of the first file."""
    records = {r["urn"]: r for r in (plan or {}).get("resources", [])}
    positions = {}
    for urn, record in records.items():
        # The user's line: where the outermost component around the resource was created (a resource made
        # inside a component's class points at the line that created the component), else its own.
        found, parent = record.get("source"), record.get("parent")
        while parent in records and records[parent]["type"] != "pulumi:pulumi:Stack":
            if records[parent].get("source") and not records[parent].get("custom"):
                found = records[parent]["source"]
            parent = records[parent].get("parent")
        if found:
            positions[urn] = found
    texts = []
    for path in files:
        try:
            texts.append((path, path.read_text().splitlines()))
        except OSError:
            continue

    def uri(path: Path) -> str:
        try:
            return path.resolve().relative_to(relative_to.resolve()).as_posix()
        except ValueError:
            return path.as_posix()

    def locate(violation: Violation) -> tuple[str, int]:
        position = positions.get(violation.urn)
        if position and root is not None:
            return uri(root / position["path"]), position["line"]
        needles, parent = [violation.resource_name], records.get(violation.urn, {}).get("parent")
        while parent in records and records[parent]["type"] != "pulumi:pulumi:Stack":
            needles.append(records[parent]["name"])  # a component's name, where the program creates it
            parent = records[parent].get("parent")
        for needle in filter(None, needles):
            for path, lines in texts:
                for number, text in enumerate(lines, 1):
                    if f'"{needle}"' in text or f"'{needle}'" in text:
                        return uri(path), number
        for path, lines in texts:
            for number, text in enumerate(lines, 1):
                if violation.resource_name and violation.resource_name in text:
                    return uri(path), number
        return (uri(texts[0][0]), 1) if texts else ("Pulumi.yaml", 1)

    return locate
