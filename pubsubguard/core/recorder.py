"""What a program told the engine, validated as the engine validates it: its registrations, stack outputs,
the invokes it asked, its log; the limits one program may not cross; the URNs the engine gives."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pubsubguard.core import callbacks
from pubsubguard.core.invokes import GET_IAM_POLICY, InvokeResults, iam_policy_data, read_invoke_id, unknown_result
from pubsubguard.core.project import UNKNOWN
from pubsubguard.core.engine_values import contains_unknown, unknown_paths, unsecret

STACK_TYPE = "pulumi:pulumi:Stack"  # the root resource's type
UNSUPPORTED_FEATURE = re.compile(r"The Pulumi CLI does not support (?P<feature>[^.]+)\. Please update the Pulumi CLI\.?")
TYPE_TOKEN = re.compile(r"^[A-Za-z0-9_.\-]+(:[A-Za-z0-9_.\-/]*)?:[A-Za-z0-9_.\-]+$")
MAX_NAME = 1024
MAX_MESSAGES = 200  # warnings and infos kept from the program's log


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
                 limits: Limits, on_resource=None, on_breach=None, environments: tuple[str, ...] = (),
                 environment_values: str = ""):
        self.project, self.stack, self.invoke_results, self.limits = project, stack, invoke_results, limits
        # the ESC environments the stack imports, and the file their values came from ("" unread): where a
        # configuration value the program read as unknown comes from (`config_reads`)
        self.environments, self.environment_values = tuple(environments), environment_values
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
               partial: list[dict] | None = None, config_reads: dict[str, list[str]] | None = None) -> None:
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
        unknowns = self.provenance(inputs, record["property_dependencies"], config_reads or {})
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

    def provenance(self, inputs: dict, dependencies: dict[str, list[str]],
                   config_reads: dict[str, list[str]]) -> dict[str, list[dict]]:
        """Where each unknown input comes from: `{dotted path: [{urn, type, name, output, via}]}`, the
        resources its top-level property depends on (the SDK sends dependencies per top-level property: the
        engine's own record), with the output property and the `apply` / `Output.all` chain where the
        program side reported them (`trace`); and `{config, environments, values_from}` for each
        configuration value an ESC environment sets or may set that the path was built from (`config_reads`,
        the keys the program side marked its sentinel with). An unknown with neither comes from an unknown
        invoke result or a `secure:` config value."""
        found: dict[str, list[dict]] = {}
        for key, value in inputs.items():
            paths = list(unknown_paths(value, key))
            if not paths:
                continue
            sources = []
            for urn in dependencies.get(key, []):
                record = self.records.get(urn)
                sources.append({"urn": urn, "type": record["type"], "name": record["name"]} if record else {"urn": urn})
            for path in paths:
                found[path] = [dict(source) for source in sources] + [
                    {"config": key, "environments": list(self.environments), "values_from": self.environment_values
                     or None} for key in config_reads.get(path, [])]
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
