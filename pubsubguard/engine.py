"""The Pulumi engine's side of a preview, as far as a policy pack can tell: a resource monitor that
records every registration and answers the program the way `pulumi preview` does for a new stack.

- A new custom resource's id is unknown; its outputs are its inputs (known where the inputs are),
  every other output is unknown (an autonamed `name`, `id`, computed URLs).
- Inputs are recorded as the engine sends them to analyzers: unknowns as the unknown sentinel
  (a string computed from an unknown is unknown), secrets in their envelope (`pulumi.secret`,
  `secure:` config), resource references downgraded as for a provider that does not take them (a
  custom resource's id, a component's URN). References are decoded from the wire, never rehydrated,
  so nothing waits on a `getResource`.
- Invokes (data sources): results given in an invoke-results file are returned as given;
  `gcp.organizations.getIAMPolicy`, a pure function of its arguments, is evaluated here; any other
  invoke's result is unknown: string fields carry the sentinel (so values built from them are unknown)
  and other fields are empty. Each such invoke is recorded.
- Resources read with `.get(...)` are recorded as external (the engine reads them from the cloud;
  offline their state is unknown).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from pubsubguard.project import UNKNOWN, PlanError

SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"

GET_IAM_POLICY = "gcp:organizations/getIAMPolicy:getIAMPolicy"


# --- Values on the wire ----------------------------------------------------------------------------
def decode(value: Any) -> Any:
    """Plain JSON data from a property value as `json_format.MessageToDict` gives it (see module doc)."""
    if isinstance(value, str):
        return UNKNOWN if UNKNOWN in value else value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        sig = value.get(SIG)
        if sig == SECRET_SIG:
            return {SIG: SECRET_SIG, "value": decode(value.get("value"))}
        if sig == RESOURCE_SIG:
            if "id" in value:  # a custom resource: providers that take no references get its id
                ref_id = value.get("id")
                return ref_id if isinstance(ref_id, str) and ref_id and UNKNOWN not in ref_id else UNKNOWN
            return value.get("urn", UNKNOWN)
        if sig == OUTPUT_SIG:
            if "value" not in value:
                return UNKNOWN
            inner = decode(value["value"])
            return {SIG: SECRET_SIG, "value": inner} if value.get("secret") else inner
        if sig is not None:
            return value  # assets and archives: kept as they are
        return {str(k): decode(v) for k, v in sorted(value.items()) if v is not None}
    return value


def contains_unknown(value: Any) -> bool:
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return value == UNKNOWN


def unsecret(value: Any) -> Any:
    """The value with secret envelopes opened (for evaluating invokes)."""
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            return unsecret(value.get("value"))
        return {k: unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsecret(v) for v in value]
    return value


def _struct(values: dict):
    from google.protobuf import struct_pb2

    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def _to_dict(message) -> dict:
    from google.protobuf import json_format

    return json_format.MessageToDict(message)


# --- Invokes ---------------------------------------------------------------------------------------
def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class InvokeResults:
    """Given results of invokes: `[{token, args (optional: any args), result}, ...]` from a JSON or
    YAML file (`--invoke-results FILE`)."""

    def __init__(self, entries: list[dict] | None = None, source: str = ""):
        self.source = source
        self.exact: dict[tuple[str, str], dict] = {}
        self.any_args: dict[str, dict] = {}
        for entry in entries or []:
            if entry.get("args") is None:
                self.any_args[entry["token"]] = entry["result"]
            else:
                self.exact[(entry["token"], canonical(entry["args"]))] = entry["result"]

    @classmethod
    def load(cls, path: Path | None) -> "InvokeResults":
        if path is None:
            return cls()
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text())
        except FileNotFoundError:
            raise PlanError(f"--invoke-results {path}: no such file") from None
        except (OSError, UnicodeDecodeError) as err:
            raise PlanError(f"--invoke-results {path}: cannot be read ({err.__class__.__name__})") from None
        except yaml.YAMLError as err:
            raise PlanError(f"--invoke-results {path}: not valid JSON or YAML ({str(err).splitlines()[0]})") from None
        if isinstance(data, dict) and isinstance(data.get("invokes"), list):
            data = data["invokes"]
        if not isinstance(data, list):
            raise PlanError(f"--invoke-results {path}: expected a list of {{token, args, result}} entries")
        for index, entry in enumerate(data):
            if not (isinstance(entry, dict) and isinstance(entry.get("token"), str)
                    and isinstance(entry.get("result"), dict)
                    and (entry.get("args") is None or isinstance(entry.get("args"), dict))):
                raise PlanError(
                    f"--invoke-results {path}: entry {index}: expected {{token: 'pkg:module/fn:fn', "
                    "args: {...} (optional), result: {...}}"
                )
        return cls(data, str(path))

    def lookup(self, token: str, args: dict) -> dict | None:
        found = self.exact.get((token, canonical(args)))
        return found if found is not None else self.any_args.get(token)


def iam_policy_data(args: dict) -> dict:
    """`gcp.organizations.getIAMPolicy` evaluated: the policy JSON its bindings and audit configs make."""
    bindings = []
    for binding in args.get("bindings") or []:
        entry = {"members": sorted(binding.get("members") or []), "role": binding.get("role")}
        if binding.get("condition"):
            entry["condition"] = binding["condition"]
        bindings.append(entry)
    policy: dict[str, Any] = {}
    if args.get("auditConfigs"):
        policy["auditConfigs"] = [
            {"auditLogConfigs": [{k: v for k, v in c.items()} for c in a.get("auditLogConfigs") or []],
             "service": a.get("service")}
            for a in args["auditConfigs"]
        ]
    if bindings:
        policy["bindings"] = bindings
    data = json.dumps(policy, sort_keys=True, separators=(",", ":"))
    return {
        "policyData": data,
        "id": str(int(hashlib.sha256(data.encode()).hexdigest()[:8], 16)),
        "bindings": args.get("bindings") or [],
        "auditConfigs": args.get("auditConfigs") or [],
    }


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def unknown_result(token: str, args: dict) -> dict:
    """A result whose fields are unknown: string fields carry the sentinel, others are absent.

    The field names and types come from the package's result class (e.g. `pulumi_gcp.organizations.
    GetProjectResult`); arguments echoed by the result keep their given values.
    """
    package, _, rest = token.partition(":")
    module, _, function = rest.partition(":")
    module = module.split("/")[0]
    result: dict[str, Any] = {}
    try:
        mod = importlib.import_module(f"pulumi_{package.replace('-', '_')}.{module}" if module not in ("", "index")
                                      else f"pulumi_{package.replace('-', '_')}")
        cls = getattr(mod, function[:1].upper() + function[1:] + "Result", None)
    except ImportError:
        cls = None
    if cls is not None:
        for name, member in inspect.getmembers(cls, lambda m: isinstance(m, property)):
            key = _camel(name)
            annotation = str(inspect.signature(member.fget).return_annotation)
            if key in args:
                result[key] = args[key]
            elif re.search(r"\bstr\b", annotation) and not re.search(r"Sequence|Mapping|List|Dict", annotation):
                result[key] = f"{UNKNOWN}:{key}"
    return result


# --- The monitor -----------------------------------------------------------------------------------
def _monitor_base():
    from pulumi.runtime import mocks

    class _NoMocks(mocks.Mocks):
        def call(self, args):  # pragma: no cover - the recording monitor answers invokes itself
            return {}

        def new_resource(self, args):  # pragma: no cover
            return "", {}

    return mocks.MockMonitor, _NoMocks


def source_position(request, root_prefix: str | None) -> dict | None:
    """Where the program constructed the resource, relative to the project (the SDK's source position).
    `root_prefix` is the project's resolved path with a trailing separator (string work only: this runs
    once per resource)."""
    position = getattr(request, "sourcePosition", None)
    if not root_prefix or position is None or not position.uri.startswith("file://"):
        return None
    from urllib.parse import unquote

    path = unquote(position.uri[len("file://"):])
    if not path.startswith(root_prefix):
        return None
    return {"path": path[len(root_prefix):], "line": position.line}


def make_monitor(invoke_results: InvokeResults, root: Path | None = None, on_resource=None):
    """The recording monitor (a class made here: the Pulumi SDK is imported only when a plan is made)."""
    from pulumi.runtime.proto import resource_pb2

    base, no_mocks = _monitor_base()
    root_prefix = str(Path(root).resolve()).rstrip("/") + "/" if root is not None else None

    class Monitor(base):
        def __init__(self):
            super().__init__(no_mocks())
            self.records: dict[str, dict] = {}
            self.outputs: dict[str, Any] = {}
            self.unknown_invokes: list[dict] = []
            self.providers: dict[str, dict] = {}
            self.lock = threading.Lock()
            self.last_activity = time.monotonic()
            self.started: dict[tuple[str, str], int] = {}  # (type, name) -> registrations started
            self.finished: dict[tuple[str, str], int] = {}

        def touch(self) -> None:
            self.last_activity = time.monotonic()

        def _record(self, request, urn: str, inputs: dict, *, read_id: str | None = None) -> None:
            provider = request.provider.rsplit("::", 1)[0] if request.provider else None
            record = {
                "urn": urn,
                "type": request.type,
                "name": request.name,
                "custom": bool(getattr(request, "custom", True)) if read_id is None else True,
                "parent": request.parent or None,
                "id": read_id,
                "provider": provider,
                "dependencies": sorted(getattr(request, "dependencies", [])),
                "property_dependencies": {
                    key: sorted(value.urns)
                    for key, value in sorted(getattr(request, "propertyDependencies", {}).items())
                    if value.urns
                },
                "inputs": inputs,
            }
            source = source_position(request, root_prefix)
            if source:
                record["source"] = source
            if read_id is not None:
                record["external"] = True
            with self.lock:
                self.records[urn] = record
                key = (request.type, request.name)
                self.finished[key] = self.finished.get(key, 0) + 1
                if on_resource is not None:
                    on_resource(record)  # under the lock: in registration order
            self.touch()

        def RegisterResource(self, request):
            urn = self.make_urn(request.parent, request.type, request.name)
            inputs = decode(_to_dict(request.object))
            self._record(request, urn, inputs)
            if request.type == "pulumi:pulumi:Stack":
                return resource_pb2.RegisterResourceResponse(urn=urn)
            known_id = request.importId or ""
            return resource_pb2.RegisterResourceResponse(urn=urn, id=known_id, object=_struct(inputs))

        def ReadResource(self, request):
            urn = self.make_urn(request.parent, request.type, request.name)
            inputs = decode(_to_dict(request.properties))
            self._record(request, urn, inputs, read_id=request.id)
            return resource_pb2.ReadResourceResponse(urn=urn, properties=_struct({}))

        def RegisterResourceOutputs(self, request):
            if request.urn.split("::")[2] == "pulumi:pulumi:Stack":
                self.outputs.update(decode(_to_dict(request.outputs)))
            self.touch()
            return super().RegisterResourceOutputs(request)

        def Invoke(self, request):
            self.touch()
            args = decode(_to_dict(request.args))
            token = request.tok
            if token == "pulumi:pulumi:getResource":
                record = self.records.get(args.get("urn"))
                if record is None:
                    raise Exception(f"unknown resource {args.get('urn')}")
                result = {"urn": record["urn"], "id": record["id"] or UNKNOWN, "state": record["inputs"]}
            else:
                given = invoke_results.lookup(token, unsecret(args))
                if given is not None:
                    result = given
                elif token == GET_IAM_POLICY and not contains_unknown(args):
                    result = iam_policy_data(unsecret(args))
                else:
                    with self.lock:
                        self.unknown_invokes.append({"token": token, "args": args})
                    result = unknown_result(token, args)
            return resource_pb2.ResourceInvokeResponse(**{"return": _struct(result)})

    return Monitor()
