"""The Pulumi engine's side of a preview, as far as a policy pack can tell: a resource monitor that
records every registration and answers the program the way `pulumi preview` does for a new stack.

- A new custom resource's id is unknown; its outputs are its inputs (known where the inputs are),
  every other output is unknown (an autonamed `name`, `id`, computed URLs), nested ones too (the
  program side reads a nested field the inputs did not set as unknown: `langhost_exec`,
  `langhost_node_exec.js`; the engine has no provider schema to name those fields); an output
  whose form is documented (a Cloud Run URL: `facts.documented_forms`) has that form, the sentinel
  where its value is not known yet.
- Inputs are recorded as the engine sends them to analyzers: unknowns as the unknown sentinel
  (a string computed from an unknown is unknown), secrets in their envelope (`pulumi.secret`,
  `secure:` config), resource references downgraded as for a provider that does not take them (a
  custom resource's id, a component's URN). References are decoded from the wire, never rehydrated,
  so nothing waits on a `getResource`.
- Invokes (data sources): results given in an invoke-results file are returned as given;
  `gcp.organizations.getIAMPolicy`, a pure function of its arguments, is evaluated here; any other
  invoke's result is unknown but for the arguments it echoes: every field of the result type (in the
  program's own provider package, filled on the program side) is unknown, so values built from it are
  unknown whatever is installed beside pubsubguard. Each such invoke is recorded.
- Resources read with `.get(...)` are recorded as external (the engine reads them from the cloud;
  offline their state is unknown).
- Calls to a component's (or a provider resource's) methods: no provider plugin runs offline, so the
  result is a given one or unknown, depending on the component and the arguments' dependencies.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pubsubguard.core import callbacks, request_reader
from pubsubguard.core.errors import read_mapping
from pubsubguard.core.project import UNKNOWN, PlanError
from pubsubguard.core.signatures import (  # noqa: F401 - re-exported: the wire's names
    BYTE_STRING_SIG, OUTPUT_SIG, RESOURCE_SIG, SECRET_SIG, SIG,
)
from pubsubguard.policies import pubsub_facts as facts

GET_IAM_POLICY = "gcp:organizations/getIAMPolicy:getIAMPolicy"
STACK_TYPE = "pulumi:pulumi:Stack"  # the root resource's type


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
        if sig == BYTE_STRING_SIG:  # judged as the text it reads as (undecodable bytes as U+FFFD)
            return _byte_string(value.get("value"))
        if sig is not None:
            return value  # assets and archives: kept as they are
        return {str(k): decode(v) for k, v in sorted(value.items()) if v is not None}
    return value


def _reference_urn(value: Any) -> str | None:
    """The URN of a resource reference on the wire (also inside an output value), else None."""
    if isinstance(value, dict) and value.get(SIG) == OUTPUT_SIG:
        value = value.get("value")
    if isinstance(value, dict) and value.get(SIG) == RESOURCE_SIG and isinstance(value.get("urn"), str):
        return value["urn"]
    return None


def _output_dependencies(value: Any):
    """The URNs the output values in a property value on the wire depend on."""
    if isinstance(value, list):
        for item in value:
            yield from _output_dependencies(item)
    elif isinstance(value, dict):
        if value.get(SIG) == OUTPUT_SIG:
            yield from (urn for urn in value.get("dependencies") or [] if isinstance(urn, str))
        for item in value.values():
            yield from _output_dependencies(item)


def _byte_string(encoded: Any) -> str:
    import base64
    import binascii

    try:
        return base64.b64decode(str(encoded or ""), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return UNKNOWN


def contains_unknown(value: Any) -> bool:
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return value == UNKNOWN


def _unknown_paths(value: Any, path: str):
    """Dotted paths of the unknown leaves of `value` (list items as `path[i]`)."""
    if value == UNKNOWN:
        yield path
    elif isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            yield from _unknown_paths(value.get("value"), path)
            return
        for key, item in value.items():
            yield from _unknown_paths(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unknown_paths(item, f"{path}[{index}]")


def partial_strings(value: Any, path: tuple = ()) -> list[dict]:
    """The strings of a property value (as on the wire, before `decode`) that are built from an unknown
    and a known part: `[{path: [key or index, ...], value: the string with the sentinel in it}]`. The
    recorded inputs keep them unknown; the pack also gets them as they are, so that a rule may judge by
    the known part alone (a URL's scheme, a service agent's form). Secrets stay wholly unknown."""
    if isinstance(value, str):
        return [{"path": list(path), "value": value}] if UNKNOWN in value and value != UNKNOWN else []
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in partial_strings(item, (*path, index))]
    if isinstance(value, dict):
        sig = value.get(SIG)
        if sig == OUTPUT_SIG and not value.get("secret"):
            return partial_strings(value.get("value"), path)
        if sig is not None:
            return []  # a secret's known part is never shown to the pack (it could end up in a message)
        return [found for key, item in sorted(value.items()) for found in partial_strings(item, (*path, str(key)))]
    return []


def _opened(value: Any) -> Any:
    return value["value"] if isinstance(value, dict) and value.get(SIG) == SECRET_SIG else value


def with_partial_strings(inputs: dict, partial: list[dict]) -> dict:
    """`inputs` (recorded, unknowns collapsed) with the partial strings put back where they were."""
    if not partial:
        return inputs
    inputs = json.loads(json.dumps(inputs))
    for entry in partial:
        *where, last = entry["path"]
        try:
            holder = inputs
            for step in where:
                holder = _opened(holder)[step]
            holder = _opened(holder)
            if isinstance(holder[last], dict) and holder[last].get(SIG) == SECRET_SIG:
                holder[last]["value"] = entry["value"]
            else:
                holder[last] = entry["value"]
        except (KeyError, IndexError, TypeError):
            continue  # a plan file edited by hand: that value stays unknown
    return inputs


def _put_where_absent(holder: Any, path: tuple, value: str) -> None:
    """Put `value` at `path` (keys and list indices) unless a value is there already."""
    *steps, last = path
    for step, following in zip(steps, path[1:]):
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(holder, dict):
            if holder.get(step) in (None, UNKNOWN):
                holder[step] = empty
        elif isinstance(holder, list) and step <= len(holder):
            if step == len(holder):
                holder.append(empty)
        else:
            return
        holder = _opened(holder[step])
    if isinstance(holder, dict) and holder.get(last) in (None, UNKNOWN):
        holder[last] = value
    elif isinstance(holder, list) and last == len(holder):
        holder.append(value)


def with_documented_forms(type_: str, inputs: dict) -> dict:
    """A new resource's outputs at preview: its inputs, and the outputs whose form is documented
    (`facts.documented_forms`) in that form, the sentinel where the value is not known yet."""
    forms = facts.documented_forms(type_, inputs)
    if not forms:
        return inputs
    outputs = json.loads(json.dumps(inputs))
    for path, form in forms.items():
        _put_where_absent(outputs, path, form.replace("{}", UNKNOWN))
    return outputs


READ_ID_FORMS = {  # what a read resource's id determines (the provider's import formats): type -> collection
    facts.TOPIC: "topics", facts.SUBSCRIPTION: "subscriptions",
}


def read_outputs(type_: str, id_: str) -> dict:
    """What the engine knows of a resource read with `.get(name, id)` offline: what its id determines (a
    topic's name and project from `projects/P/topics/N`, `P/N` or `N`); every other output is unknown
    (the SDK reads an absent output as unknown at preview)."""
    collection = READ_ID_FORMS.get(type_)
    if collection is None or not id_ or UNKNOWN in id_:
        return {}
    parts = id_.split("/")
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == collection:
        return {"project": parts[1], "name": parts[3]}
    if len(parts) == 2:
        return {"project": parts[0], "name": parts[1]}
    return {"name": id_} if len(parts) == 1 else {}


READ_INVOKES = {"gcp:pubsub/getTopic:getTopic": "topics", "gcp:pubsub/getSubscription:getSubscription": "subscriptions"}


def read_invoke_id(token: str, args: dict) -> dict:
    """The id a data source that reads one resource answers, where its arguments determine it
    (`getTopic({name, project})`: `projects/P/topics/N`), as for a resource read with `.get`."""
    collection = READ_INVOKES.get(token)
    name, project = args.get("name"), args.get("project")
    if collection is None or not isinstance(name, str) or UNKNOWN in name:
        return {}
    if name.startswith("projects/") and name.count("/") == 3:
        return {"id": name}
    if isinstance(project, str) and project and UNKNOWN not in project:
        return {"id": f"projects/{project}/{collection}/{name}"}
    return {}


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


def _fields_of(message) -> set[str]:
    return set(message.DESCRIPTOR.fields_by_name)


def _to_dict(message) -> dict:
    from google.protobuf import json_format

    return json_format.MessageToDict(message)


# --- Invokes ---------------------------------------------------------------------------------------
def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def make_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """The URN `pulumi preview` gives: a child's type is qualified by its parent's whole qualified type
    (every ancestor's), except the root stack's, which none carries (the engine's `generateURN`; the
    SDKs' mocks build another form). The program can read a URN (`.urn`, aliases, hooks), so it must be
    the engine's."""
    if parent:
        parent_type = parent.split("::")[2]  # a registered URN: no name or type holds "::"
        if parent_type != STACK_TYPE:
            type_ = f"{parent_type}${type_}"
    return f"urn:pulumi:{stack}::{project}::{type_}::{name}"


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
        data = read_mapping(path, PlanError, where=f"--invoke-results {path}", language="JSON or YAML")
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


UNKNOWN_RESULT = "pubsubguard:unknown-result"  # langhost_exec.UNKNOWN_RESULT


def unknown_result(args: dict) -> dict:
    """The answer to an invoke nobody can know offline: the arguments it was given (a data source's
    result echoes them) and the mark that every other field is unknown. The program side makes that an
    instance of the result type of the program's own provider package with those fields unknown
    (`langhost_exec`), so the answer does not depend on what is installed beside pubsubguard."""
    return {**args, UNKNOWN_RESULT: True}


# --- The engine's services ------------------------------------------------------------------------
FEATURES = (  # what the engine offers a program (`SupportsFeature`), as `pulumi preview` does: callbacks into the
    # program (transforms, hooks) are served through `callbacks`; options that matter only once a stack has a
    # state (replace_with, replacement triggers, deleted_with, aliases) are taken and recorded
    "secrets", "resourceReferences", "outputValues", "deletedWith", "aliasSpecs", "replacementTrigger", "replaceWith",
    "transforms", "invokeTransforms", "parameterization", "resourceHooks", "errorHooks", "sendsOptionsToHooks",
)
MONITOR_FEATURES = FEATURES + (  # also listed by `GetDeploymentInfo` (SDKs that ask by enum)
    "byteString", "invokeDependsOn", "invokeParent", "stateMigrations", "callOutputValues", "invokeOutputValues",
)
UNSUPPORTED_FEATURE = re.compile(r"The Pulumi CLI does not support (?P<feature>[^.]+)\. Please update the Pulumi CLI\.?")
TYPE_TOKEN = re.compile(r"^[A-Za-z0-9_.\-]+(:[A-Za-z0-9_.\-/]*)?:[A-Za-z0-9_.\-]+$")
MAX_NAME = 1024
MAX_MESSAGES = 200  # warnings and infos kept from the program's log
PROVENANCE = "pubsubguard:provenance "  # langhost_exec.PROVENANCE: the program side's report of Output origins


@dataclass(frozen=True)
class Limits:
    """What one program may do (`check --max-resources`, `--max-input-bytes`, ...)."""
    max_resources: int = 50_000
    max_input_bytes: int = 1_000_000
    timeout_s: float = 600.0
    memory_mib: int = 3072
    idle_timeout_s: float = 60.0


def unsupported_feature(found: re.Match) -> str:
    """The SDK's "update the Pulumi CLI" for a feature this engine does not offer, said as it is: the
    program is fine, `pulumi preview` runs it; pubsubguard's offline engine cannot."""
    return (f"the program uses {found['feature']}, which pubsubguard's offline engine does not offer (the program "
            "itself is fine: `pulumi preview` runs it)")


class Refused(Exception):
    """A call the engine answers with an error status (the program sees it as the RPC's error)."""
    code = "FAILED_PRECONDITION"


class Breach(Refused):
    """The program crossed a limit or sent what no SDK sends; the message names which."""


def source_position(request, root_prefix: str | None) -> dict | None:
    """Where the program constructed the resource, relative to the project (the SDK's source position).
    `root_prefix` is the project's resolved path with a trailing separator."""
    position = getattr(request, "sourcePosition", None)
    if not root_prefix or position is None or not position.uri.startswith("file://"):
        return None
    from urllib.parse import unquote

    path = unquote(position.uri[len("file://"):])
    if not path.startswith(root_prefix) or "/site-packages/" in path or "/dist-packages/" in path:
        return None  # outside the project, or an installed library (a virtualenv inside the project)
    return {"path": path[len(root_prefix):], "line": position.line}


class Recorder:
    """What the program told the engine: registrations (validated), stack outputs, invokes it asked,
    its log. Shared by the two services; every method may run on any of the server's threads."""

    def __init__(self, *, project: str, stack: str, invoke_results: InvokeResults, root: Path | None,
                 limits: Limits, on_resource=None, on_breach=None):
        self.project, self.stack, self.invoke_results, self.limits = project, stack, invoke_results, limits
        self.root_prefix = str(Path(root).resolve()).rstrip("/") + "/" if root is not None else None
        self.on_resource, self.on_breach = on_resource, on_breach
        self.lock = threading.Lock()
        self.records: dict[str, dict] = {}
        self.outputs: dict[str, Any] = {}
        self.unknown_invokes: list[dict] = []
        self.errors: list[str] = []  # error-level log lines: the program failed
        self.messages: list[tuple[str, str]] = []  # (severity, text): warnings and infos
        self.dropped_messages = 0
        self.completed = False  # the stack's outputs were registered (the SDK does it when the program ends)
        self.breach: str | None = None
        self.root_urn = ""
        self.traced: dict[tuple[str, str], dict] = {}  # (type, name) -> {input path: {from, via}} (the child's)
        self.program = callbacks.Program(None)  # the program's callbacks server (set by `Server`)
        self.stack_transforms: list = []  # Callbacks, in registration order
        self.invoke_transforms: list = []
        self.own_transforms: dict[str, list] = {}  # urn -> the resource's own transforms (for its children)
        self.hooks = callbacks.Hooks()
        self.packages: set[str] = set()  # refs given by RegisterPackage
        self.component_hooks: dict[str, tuple] = {}  # urn -> (after_create hook names, its registration)

    # -- validation --
    def fail(self, message: str):
        with self.lock:
            if self.breach is None:
                self.breach = message
        if self.on_breach is not None:
            self.on_breach()
        raise Breach(message)

    def check_registration(self, request, kind: str) -> None:
        type_, name = request.type, request.name
        # A custom resource's type names its provider package (`pkg:module:Type`); a component's is any
        # token the program chooses (`pkg:gcp:storage:Bucket`, `my-component`), as the engine takes it.
        custom = bool(getattr(request, "custom", True)) or kind == "read"
        if not (isinstance(type_, str) and 0 < len(type_) <= 256 and "::" not in type_
                and not any(ord(c) < 32 for c in type_) and (TYPE_TOKEN.match(type_) or not custom)):
            what = "a custom resource's type token is pkg:module:Type" if custom else "a type token"
            self.fail(f"the program sent a {kind} with an invalid type token {type_[:80]!r} ({what})")
        if not name or len(name) > MAX_NAME or any(ord(c) < 32 for c in name) or "::" in name:
            self.fail(f"the program sent a {kind} of {type_} with an invalid name {name[:80]!r}")
        size = request.ByteSize()
        if size > self.limits.max_input_bytes:
            self.fail(f"{type_} {name!r}: its inputs are {size:,} bytes, over the limit of "
                      f"{self.limits.max_input_bytes:,} (--max-input-bytes raises it)")
        if request.parent and request.parent not in self.records:
            self.fail(f"{type_} {name!r}: its parent {request.parent[:200]!r} was never registered")
        if len(self.records) >= self.limits.max_resources:
            self.fail(f"the program registered more than {self.limits.max_resources:,} resources "
                      "(--max-resources raises the limit)")

    def inherited_transforms(self, parent: str) -> list:
        """The transforms a child of `parent` gets after its own: its ancestors' (nearest first), then the
        stack's (the engine's order)."""
        if not self.own_transforms:
            return list(self.stack_transforms)
        found, seen = [], set()
        while parent and parent not in seen:
            seen.add(parent)
            found += self.own_transforms.get(parent, [])
            parent = (self.records.get(parent) or {}).get("parent") or ""
        return found + self.stack_transforms

    def callback(self, callback, what: str):
        """A callback the program registers, checked: the engine calls only the program's own server."""
        if not self.program.allowed(callback.target):
            self.fail(f"the program registered {what} at {callback.target[:100]!r}, where its callbacks "
                      "server does not listen in this offline engine")
        return callback

    def unresolved(self, urns) -> bool:
        """Whether a custom resource among `urns` (a component: its descendants, down to the first custom
        resource of each branch) has not been created: at preview, every new one (a read one exists)."""
        frontier, seen = list(urns), set()
        children: dict[str, list[str]] | None = None
        while frontier:
            urn = frontier.pop()
            record = self.records.get(urn)
            if record is None or urn in seen:
                continue
            seen.add(urn)
            if record["custom"]:
                if not record.get("external"):
                    return True
                continue
            if children is None:
                children = {}
                for child in self.records.values():
                    children.setdefault(child["parent"] or "", []).append(child["urn"])
            frontier += children.get(urn, [])
        return False

    # -- registrations --
    def record(self, request, urn: str, inputs: dict, *, read_id: str | None = None,
               partial: list[dict] | None = None) -> None:
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
        source = source_position(request, self.root_prefix)
        if source:
            record["source"] = source
        if partial:
            record["partial"] = partial
        unknowns = self.provenance(inputs, record["property_dependencies"], request.type, request.name)
        if unknowns:
            record["unknowns"] = unknowns
        if read_id is not None:
            record["external"] = True
        with self.lock:
            if urn in self.records:
                duplicate = True
            else:
                duplicate = False
                self.records[urn] = record
                if self.on_resource is not None:
                    self.on_resource(record)  # under the lock: in registration order
        if duplicate:
            self.fail(f"Duplicate resource URN '{urn}'; try giving it a unique name")

    def provenance(self, inputs: dict, dependencies: dict[str, list[str]], type_: str = "",
                   name: str = "") -> dict[str, list[dict]]:
        """Where each unknown input comes from: `{dotted path: [{urn, type, name, output, via}]}`, the
        resources its top-level property depends on (the SDK sends dependencies per top-level property: the
        engine's own record), with the output property and the `apply` / `Output.all` chain where the
        program side reported them (`trace`). An unknown with no dependency comes from an unknown invoke
        result or a `secure:` config value."""
        found: dict[str, list[dict]] = {}
        for key, value in inputs.items():
            paths = list(_unknown_paths(value, key))
            if not paths:
                continue
            sources = []
            for urn in dependencies.get(key, []):
                record = self.records.get(urn)
                sources.append({"urn": urn, "type": record["type"], "name": record["name"]} if record else {"urn": urn})
            for path in paths:
                found[path] = [dict(source) for source in sources]
        return found

    def invoke(self, token: str, args: dict) -> dict:
        if token == "pulumi:pulumi:getResource":
            record = self.records.get(args.get("urn"))
            if record is None:
                raise Breach(f"unknown resource {args.get('urn')}")
            return {"urn": record["urn"], "id": record["id"] or UNKNOWN, "state": record["inputs"]}
        given = self.invoke_results.lookup(token, unsecret(args))
        if given is not None:
            return given
        if token == GET_IAM_POLICY and not contains_unknown(args):
            return iam_policy_data(unsecret(args))
        with self.lock:
            self.unknown_invokes.append({"token": token, "args": args})
        return {**unknown_result(args), **read_invoke_id(token, args)}

    def call(self, token: str, args: dict) -> dict | None:
        """A method of a component (or of a provider resource), as a component's provider would answer it at
        preview: the result given with `--invoke-results`, else None (nothing offline can run the method: the
        result is unknown), recorded among the invokes whose results were unknown."""
        given = self.invoke_results.lookup(token, unsecret(args))
        if given is not None:
            return given
        with self.lock:
            self.unknown_invokes.append({"token": token, "args": args})
        return None

    def trace(self, message: str) -> None:
        """The program side's report of where a resource's Output inputs come from (`langhost_exec`):
        which resource's output property, through which `apply` / `Output.all`. Attached to the inputs the
        engine records as unknown; never used to judge (the child could say anything)."""
        try:
            batch = json.loads(message)
        except ValueError:
            return
        for data in batch if isinstance(batch, list) else []:
            try:
                key, inputs = (str(data["type"]), str(data["name"])), data["inputs"]
            except (KeyError, TypeError):
                continue
            if isinstance(inputs, dict) and len(self.traced) < self.limits.max_resources:
                with self.lock:
                    self.traced[key] = inputs

    def attach_traced(self) -> None:
        """Name each unknown input's output property and `apply` chain from the program side's reports
        (they arrive in batches, after the resources registered): called once the program ended."""
        for record in self.records.values():
            for path, sources in (record.get("unknowns") or {}).items():
                traced = self.traced_origin(record["type"], record["name"], path)
                for origin in (traced or {}).get("from") or []:
                    for source in sources:
                        if (source.get("type"), source.get("name")) == (origin.get("type"), origin.get("name")):
                            source["output"] = origin.get("output")
                            source["via"] = list((traced or {}).get("via") or [])

    def traced_origin(self, type_: str, name: str, path: str) -> dict | None:
        """The child's report for `path` (or the nearest enclosing path it reported), if any."""
        inputs = self.traced.get((type_, name)) or {}
        while path:
            if isinstance(inputs.get(path), dict):
                return inputs[path]
            path = path.rsplit(".", 1)[0] if "." in path else ""
        return None

    def log(self, severity: str, message: str) -> None:
        message = message.strip()
        if severity == "error":
            message = UNSUPPORTED_FEATURE.sub(unsupported_feature, message)
        with self.lock:
            if severity == "error":
                if len(self.errors) < MAX_MESSAGES:
                    self.errors.append(message[:4000])
            elif len(self.messages) < MAX_MESSAGES:
                self.messages.append((severity, message[:4000]))
            else:
                self.dropped_messages += 1


def services(recorder: Recorder):
    """The `ResourceMonitor` and `Engine` gRPC services the program talks to, backed by `recorder`."""
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc, resource_pb2, resource_pb2_grpc

    features = sorted(getattr(resource_pb2, name) for name in (
        "RESOURCE_MONITOR_FEATURE_" + re.sub(r"(?<!^)([A-Z])", r"_\1", f).upper() for f in MONITOR_FEATURES)
        if hasattr(resource_pb2, name))

    hooks_field = "hooks" in _fields_of(resource_pb2.RegisterResourceRequest())  # an SDK's protocol with hooks

    def guarded(method):  # the servicers' methods run inline in the server's event loop (`_asynchronous`)
        return method

    def register(request, urn: str):
        """Record a registration (after its transforms) and answer it."""
        wire = _to_dict(request.object)
        inputs = decode(wire)
        recorder.record(request, urn, inputs, partial=partial_strings(wire))
        if request.transforms:
            recorder.own_transforms[urn] = list(request.transforms)
        if request.type == STACK_TYPE:
            return resource_pb2.RegisterResourceResponse(urn=urn)
        outputs = with_documented_forms(request.type, inputs) if request.custom else inputs
        return resource_pb2.RegisterResourceResponse(urn=urn, id=request.importId or "", object=_struct(outputs))

    async def register_with_callbacks(request, urn: str, inherited: list):
        what = f"{request.type} {request.name!r}"
        try:
            request = await callbacks.transformed(recorder.program, request, request.transforms, inherited)
        except callbacks.CallbackError as err:
            raise Refused(f"{what}: a transform failed: {err}") from None
        hooks = recorder.hooks
        try:
            warnings = await hooks.run(recorder.program, hooks.bound(request, "before_create"), "before_create",
                                       urn=urn, registration=request)
            response = register(request, urn)
            after = hooks.bound(request, "after_create")
            if request.custom:
                warnings += await hooks.run(recorder.program, after, "after_create", urn=urn, registration=request,
                                            outputs=response.object)
            elif after:  # a component's run when it registers its outputs, as the engine's step does
                recorder.component_hooks[urn] = (after, request)
        except callbacks.CallbackError as err:
            raise Refused(f"{what}: {err}") from None
        for warning in warnings:
            recorder.log("warning", warning)
        return response

    class Monitor(resource_pb2_grpc.ResourceMonitorServicer):
        def GetDeploymentInfo(self, request, context):  # noqa: N802 - the protocol's names
            return resource_pb2.DeploymentInfo(project=recorder.project, stack=recorder.stack, dryRun=True,
                                               supportedFeatures=features)

        def SupportsFeature(self, request, context):  # noqa: N802
            return resource_pb2.SupportsFeatureResponse(hasSupport=request.id in FEATURES)

        @guarded
        def RegisterResource(self, request, context):  # noqa: N802
            recorder.check_registration(request, "registration")
            if request.packageRef and request.packageRef not in recorder.packages:
                recorder.fail(f"{request.type} {request.name!r}: unknown provider package {request.packageRef[:100]!r}")
            urn = make_urn(recorder.stack, recorder.project, request.parent, request.type, request.name)
            for callback in request.transforms:
                recorder.callback(callback, f"a transform of {request.type} {request.name!r}")
            inherited = recorder.inherited_transforms(request.parent)
            if request.transforms or inherited or (hooks_field and request.HasField("hooks")):
                return register_with_callbacks(request, urn, inherited)
            return register(request, urn)

        @guarded
        def ReadResource(self, request, context):  # noqa: N802
            recorder.check_registration(request, "read")
            urn = make_urn(recorder.stack, recorder.project, request.parent, request.type, request.name)
            recorder.record(request, urn, decode(_to_dict(request.properties)), read_id=request.id)
            return resource_pb2.ReadResourceResponse(urn=urn, id=request.id,  # read at preview too: its id is known
                                                     properties=_struct(read_outputs(request.type, request.id)))

        @guarded
        def RegisterResourceOutputs(self, request, context):  # noqa: N802
            if request.ByteSize() > recorder.limits.max_input_bytes:
                recorder.fail(f"the outputs of {request.urn[:200]} are {request.ByteSize():,} bytes, over the "
                              f"limit of {recorder.limits.max_input_bytes:,} (--max-input-bytes raises it)")
            parts = request.urn.split("::")
            if len(parts) > 2 and parts[2] == STACK_TYPE:
                with recorder.lock:
                    recorder.outputs.update(decode(_to_dict(request.outputs)))
                    recorder.completed = True
            if request.urn in recorder.component_hooks:
                return component_after_create(request)
            return empty_pb2.Empty()

        @guarded
        def Invoke(self, request, context):  # noqa: N802
            within_limit(request, "an invoke")
            if recorder.invoke_transforms:
                return invoke_with_callbacks(request)
            return answer_invoke(request)

        @guarded
        def Call(self, request, context):  # noqa: N802
            within_limit(request, "a call")
            return answer_call(request)

        def RegisterPackage(self, request, context):  # noqa: N802
            ref = f"{request.name}@{request.version}"
            for kind in ("parameterization", "extension"):
                if kind in _fields_of(request) and request.HasField(kind):
                    ref += f"/{kind}:{getattr(request, kind).name}@{getattr(request, kind).version}"
            recorder.packages.add(ref)
            return resource_pb2.RegisterPackageResponse(ref=ref)

        def RegisterStackTransform(self, request, context):  # noqa: N802
            recorder.stack_transforms.append(recorder.callback(request, "a stack transform"))
            return empty_pb2.Empty()

        def RegisterStackInvokeTransform(self, request, context):  # noqa: N802
            recorder.invoke_transforms.append(recorder.callback(request, "an invoke transform"))
            return empty_pb2.Empty()

        def RegisterResourceHook(self, request, context):  # noqa: N802
            recorder.callback(request.callback, f"the resource hook {request.name!r}")
            recorder.hooks.add(recorder.hooks.resource, request)
            return empty_pb2.Empty()

        def RegisterErrorHook(self, request, context):  # noqa: N802
            recorder.callback(request.callback, f"the error hook {request.name!r}")
            recorder.hooks.add(recorder.hooks.error, request)
            return empty_pb2.Empty()

        def ExistsResource(self, request, context):  # noqa: N802 - whether it exists in the cloud: unknown offline
            return resource_pb2.ExistsResourceResponse(unknown=True)

        def SignalAndWaitForShutdown(self, request, context):  # noqa: N802
            return empty_pb2.Empty()

    async def component_after_create(request):
        names, registration = recorder.component_hooks.pop(request.urn)
        try:
            warnings = await recorder.hooks.run(recorder.program, names, "after_create", urn=request.urn,
                                                registration=registration, outputs=request.outputs)
        except callbacks.CallbackError as err:
            raise Refused(f"{registration.type} {registration.name!r}: {err}") from None
        for warning in warnings:
            recorder.log("warning", warning)
        return empty_pb2.Empty()

    def within_limit(request, what: str) -> None:
        if request.ByteSize() > recorder.limits.max_input_bytes:
            recorder.fail(f"{what} of {request.tok[:100]} is {request.ByteSize():,} bytes, over the limit of "
                          f"{recorder.limits.max_input_bytes:,} (--max-input-bytes raises it)")

    def answer_call(request):
        """A method of a component (`__self__`, a resource reference) or of a provider resource. At preview the
        engine hands it to the provider of the method's package, which runs it in its own plugin with the
        arguments and their dependencies (pkg/resource/deploy/source_eval.go, `resmon.Call`). Offline no plugin
        runs: the result is the one given with `--invoke-results`, else unknown, as a provider answers for a
        value it cannot compute at preview; either way it depends on the receiver and on what the arguments
        depend on, so a value built from it is traced to them."""
        from pulumi.runtime.proto import provider_pb2

        wire = _to_dict(request.args)
        receiver = _reference_urn(wire.pop("__self__", None))
        if receiver is not None and receiver not in recorder.records:
            raise Refused(f"{request.tok}: unknown resource {receiver[:200]}")  # the engine's check of `__self__`
        if request.packageRef and request.packageRef not in recorder.packages:
            raise Refused(f"{request.tok}: unknown provider package {request.packageRef[:100]!r}")
        depends = {urn for deps in request.argDependencies.values() for urn in deps.urns}
        depends |= set(_output_dependencies(wire)) | ({receiver} if receiver else set())
        result = recorder.call(request.tok, decode(wire))
        returned = _struct(result if result is not None else {"result": UNKNOWN})
        urns = provider_pb2.CallResponse.ReturnDependencies(urns=sorted(depends))
        return provider_pb2.CallResponse(**{"return": returned},
                                         returnDependencies={key: urns for key in returned.fields} if depends else {})

    def answer_invoke(request):
        depends_on = list(request.dependsOn) if "dependsOn" in _fields_of(request) else []
        if depends_on and recorder.unresolved(depends_on):  # as the engine: pending dependencies, unknown result
            return resource_pb2.ResourceInvokeResponse(unknown=True)
        result = recorder.invoke(request.tok, decode(_to_dict(request.args)))
        return resource_pb2.ResourceInvokeResponse(**{"return": _struct(result)})

    async def invoke_with_callbacks(request):
        try:
            request = await callbacks.transformed_invoke(recorder.program, request, recorder.invoke_transforms)
        except callbacks.CallbackError as err:
            raise Refused(f"an invoke of {request.tok}: a transform failed: {err}") from None
        return answer_invoke(request)

    severities = {engine_pb2.DEBUG: "debug", engine_pb2.INFO: "info", engine_pb2.WARNING: "warning",
                  engine_pb2.ERROR: "error"}

    class Engine(engine_pb2_grpc.EngineServicer):
        def Log(self, request, context):  # noqa: N802
            severity = severities.get(request.severity, "info")
            if severity == "debug":
                if request.message.startswith(PROVENANCE):
                    recorder.trace(request.message[len(PROVENANCE):])
            else:
                recorder.log(severity, request.message)
            return empty_pb2.Empty()

        def GetRootResource(self, request, context):  # noqa: N802
            return engine_pb2.GetRootResourceResponse(urn=recorder.root_urn)

        def SetRootResource(self, request, context):  # noqa: N802
            recorder.root_urn = request.urn
            return engine_pb2.SetRootResourceResponse()

        def StartDebugging(self, request, context):  # noqa: N802
            return empty_pb2.Empty()

        def RequirePulumiVersion(self, request, context):  # noqa: N802
            return engine_pb2.RequirePulumiVersionResponse()

    return _asynchronous(Monitor)(), _asynchronous(Engine)()


def _asynchronous(cls):
    """`cls` as an asyncio servicer: each method runs inline in the server's event loop (a registration
    is a few dictionary operations; the thread hand-offs of the threaded server cost ten times that)."""
    import grpc

    def make(method):
        async def call(self, request, context):
            if isinstance(request, request_reader.Unreadable):  # the program sent what the message type cannot hold
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
            try:
                result = method(self, request, context)
                if inspect.isawaitable(result):  # a call that calls back into the program (`callbacks`)
                    result = await result
                return result
            except Refused as err:
                await context.abort(getattr(grpc.StatusCode, err.code), str(err))
            except (ValueError, TypeError, KeyError) as err:  # a message no SDK sends well-formed (e.g. a NaN
                what = " ".join(filter(None, (getattr(request, "type", ""), repr(getattr(request, "name", "")))))
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,  # number): the program's error, in its words
                                    f"the engine cannot read {what or 'the request'}: {err}")
        return call

    methods = {name: make(method) for name, method in vars(cls).items() if not name.startswith("_") and callable(method)}
    return type(cls.__name__, cls.__bases__, methods)


class Server:
    """The engine's gRPC server (grpc.aio) in a thread of its own, on two Unix sockets in a folder."""

    def __init__(self, recorder: Recorder, folder: Path):
        import asyncio

        recorder.program = callbacks.Program(folder)
        self.recorder = recorder
        self.monitor_address = f"unix:{folder / 'monitor.sock'}"
        self.engine_address = f"unix:{folder / 'engine.sock'}"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="pubsubguard-engine")
        self.thread.start()
        starting = asyncio.run_coroutine_threadsafe(self._start(recorder), self.loop)
        try:
            self.server = starting.result(30)
        except BaseException:
            # interrupted (Ctrl-C) while the loop binds the sockets: let that end before the caller removes the
            # folder under it (else gRPC's core logs its failed bind on the terminal: a second line)
            try:  # not cancelled: a cancelled future returns at once while the loop still binds
                starting.result(5)
            except BaseException:  # noqa: BLE001 - the first exception is the one that counts
                pass
            else:
                asyncio.run_coroutine_threadsafe(starting.result().stop(None), self.loop).result(5)
            raise

    async def _start(self, recorder: Recorder):
        import grpc
        from pulumi.runtime.proto import engine_pb2, resource_pb2

        size = max(64 * 1024 * 1024, 4 * recorder.limits.max_input_bytes)  # the services judge sizes themselves,
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", size),  # so a crossing is named
                                          ("grpc.max_send_message_length", size)])
        monitor, engine = services(recorder)
        request_reader.add_servicer(server, monitor, resource_pb2.DESCRIPTOR.services_by_name["ResourceMonitor"])
        request_reader.add_servicer(server, engine, engine_pb2.DESCRIPTOR.services_by_name["Engine"])
        server.add_insecure_port(self.monitor_address)
        server.add_insecure_port(self.engine_address)
        await server.start()
        return server

    def stop(self) -> None:
        import asyncio

        try:
            asyncio.run_coroutine_threadsafe(self.recorder.program.close(), self.loop).result(5)
            asyncio.run_coroutine_threadsafe(self.server.stop(None), self.loop).result(5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            if not self.thread.is_alive():
                self.loop.close()


def serve(recorder: Recorder, folder: Path) -> Server:
    """Start the engine's gRPC server (`Server`) for `recorder` on Unix sockets in `folder`."""
    return Server(recorder, folder)
