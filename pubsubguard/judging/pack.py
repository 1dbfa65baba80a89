"""The policy pack's process, started as the Pulumi CLI starts a Python pack (its own virtualenv,
`python -u -m pulumi.policy ENGINE PACK_DIR`, the port it prints), and the policy config as
`pulumi preview --policy-pack-config` takes it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from pubsubguard.core.user_files import read_mapping, read_yaml_mapping
from pubsubguard.judging.result import CheckError, PolicyInfo
from pubsubguard.policies.pubsub_facts.levels import EnforcementLevel


STARTUP_TIMEOUT_S = 60.0


ENGINE_ADDRESS = "127.0.0.1:0"  # the pack logs nothing to the engine; the CLI passes its own address


def default_pack_dir() -> Path:
    """The checkout's `policies/`, else the installed pack's folder in the cache (pubsubguard.judging.packenv)."""
    import pubsubguard.judging.packenv as packenv

    return packenv.default_pack_dir()


def pack_python(pack_dir: Path) -> Path:
    """The pack's interpreter: PulumiPolicy.yaml's `runtime.options.virtualenv` (as the CLI), else the
    virtualenv made in the cache for its requirements (pubsubguard.judging.packenv)."""
    import pubsubguard.judging.packenv as packenv

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
            self.on_close(peak_mib(self.process.pid) or 0.0)
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


def read_policy_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    return read_mapping(path, CheckError, where=f"--policy-config {path}", language="JSON",
                        expected="a JSON object of policy name to level or settings")


_JSON_TYPES = {
    "boolean": (bool,), "string": (str,), "array": (list,), "object": (dict,),
    "integer": (int,), "number": (int, float),
}


FROM_INVOKES = "x-pubsubguard-from-invokes"  # in a setting's schema: filled from given invoke results


def from_invokes(spec: dict, invoke_results, gcp_project: str | None) -> dict[str, Any]:
    """A setting a rule declares in its schema as filled from the program's given data-source results
    (`--invoke-results`): `{FROM_INVOKES: {"token", "key", "value"}}` maps each given result of `token` to
    `{args[key] (else the stack's gcp:project): result[value]}` (dead-letter-service-agent-iam's
    projectNumbers: getProject's projectId to its number). {} when none is given."""
    how = spec.get(FROM_INVOKES) if isinstance(spec, dict) else None
    if not isinstance(how, dict) or invoke_results is None:
        return {}
    token = how.get("token")
    entries = [(args, result) for (given, args), result in invoke_results.exact.items() if given == token]
    entries += [("{}", invoke_results.any_args[token])] if token in invoke_results.any_args else []
    filled = {}
    for args, result in entries:
        key = json.loads(args).get(how.get("key")) or gcp_project
        if isinstance(result.get(how.get("value")), (str, int)) and key:
            filled[str(key)] = str(result[how["value"]])
    return filled


def reconcile_config(policies: list[PolicyInfo], initial: dict[str, dict], user: dict[str, Any],
                     source: str = "policy config", *, invoke_results=None,
                     gcp_project: str | None = None) -> dict[str, tuple[EnforcementLevel, dict]]:
    """Every policy's (level, properties), as the CLI computes them before `Configure`.

    Precedence: the user's entry for the policy, then the user's "all" level, then the pack's initial
    config, then the policy's own default; properties start from the schema defaults. A policy the user
    does not configure gets the settings its schema fills from given invoke results (`from_invokes`).
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
        if policy.name not in user:
            for key, spec in (policy.config_schema.get("properties") or {}).items():
                filled = from_invokes(spec, invoke_results, gcp_project)
                if filled:
                    props[key] = filled
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
            raise CheckError(f"{where}: expected a level ({', '.join(EnforcementLevel)}) or an object, got {json.dumps(entry)}")
        result[policy.name] = (level, props)
    return result


def _level(value: Any, where: str) -> EnforcementLevel:
    if value not in tuple(EnforcementLevel):
        raise CheckError(f"{where}: expected one of {', '.join(EnforcementLevel)}, got {json.dumps(value)}")
    return EnforcementLevel(value)


def peak_mib(pid: int) -> float | None:
    """A running process's peak resident memory (Linux's VmHWM), in MiB; None where unknown."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024
    except (OSError, StopIteration, ValueError):
        return None
