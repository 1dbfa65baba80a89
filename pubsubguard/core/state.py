"""What `pulumi up` deployed: a stack's state (`pulumi stack export`, deployment version 3) read into
the plan format, so the one declared model (`pubsubguard.core.declared`) is read from it as from a plan.

A state holds, per resource, the inputs the program gave and the outputs the provider returned after
deploy. The declared side of a verification is the **outputs**: the deployed names (autonames such as
`orders-6a1f3c2` included), ids, the project (from the resource, else its provider), the topic a
subscription is attached to as the service holds it, the service's defaults filled in. So
`plan_of_state` makes a plan (`format: pubsubguard-plan/1`) whose resources' `inputs` are those
outputs (camelCase, as pulumi-gcp names them), and whose `state` field says where it came from:

    {"kind": "state", "location": "state.json", "stack": "dev", "project": "team-orders",
     "deployed_at": <the manifest's time>, "pulumi_version": ..., "secrets_skipped": ["<resource>.<key>"]}

Read as pulumi-gcp writes them: `effectiveLabels` (every label the resource carries, provider defaults
included) are its labels; provider-only fields (`pulumiLabels`, `deletionPolicy`, `__`-prefixed
bookkeeping) and nulls are dropped; a resource reference becomes the referenced resource's id.
Resources pending deletion (`delete: true`, the old half of a replacement) and providers are left out.
Secret values (`{"4dabf1…": "1b4706…", "ciphertext": …}`) are never needed: they are dropped, only their
place is recorded (`secrets_skipped`), and no message prints a value from a state.

Where a state comes from: `--state FILE|URI` (`pubsubguard.core.storage`: a path, gs://, s3://, …; gzip is
read as the file backend writes it with PULUMI_SELF_MANAGED_STATE_GZIP), or, with `--state` and a stack,
the checkpoint a self-managed backend keeps (`pulumi login file://DIR`, gs://BUCKET, s3://BUCKET): the
backend from PULUMI_BACKEND_URL or `backend.url` in Pulumi.yaml, the checkpoint
`<backend>/.pulumi/stacks/<project>/<stack>.json` (or the older `<backend>/.pulumi/stacks/<stack>.json`).
A checkpoint is `{"version": 3, "checkpoint": {"stack", "config", "latest": <deployment>}}`; an export
is `{"version": 3, "deployment": <deployment>}`; both are read.

The other way (a rehearsal's deployment written as an export) is `pubsubguard.core.rehearsal.state_document`.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
from pathlib import Path
from typing import Any

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import storage
from pubsubguard.core.recorder import STACK_TYPE
from pubsubguard.core.signatures import RESOURCE_SIG, SECRET_SIG, SIG
from pubsubguard.core.errors import UserError
from pubsubguard.core.user_files import json_problem

DEPLOYMENT_VERSION = 3
EXPORT_HINT = "expected the file `pulumi stack export --file state.json` writes"
PUBSUB_TYPES = (facts.TOPIC, facts.SUBSCRIPTION)
PROVIDER_PREFIX = "pulumi:providers:"
# Outputs that describe the provider's bookkeeping, not the resource on the service.
_PROVIDER_ONLY = {"id", "urn", "pulumiLabels", "effectiveLabels", "deletionPolicy", "etag"}


class StateError(UserError):
    """A state that cannot be read as a Pub/Sub deployment: one line naming the file and what was expected."""


# --- Finding and reading a state ---------------------------------------------------------------------
def backend_url(root: Path) -> str | None:
    """The self-managed backend of a project: PULUMI_BACKEND_URL, else `backend.url` in Pulumi.yaml."""
    if os.environ.get("PULUMI_BACKEND_URL"):
        return os.environ["PULUMI_BACKEND_URL"]
    from pubsubguard.core.project import load_project_yaml

    path = Path(root) / "Pulumi.yaml"
    data = load_project_yaml(path, "a Pulumi project has a Pulumi.yaml; run in the project folder or pass --cwd") if path.exists() else {}
    backend = data.get("backend") if isinstance(data, dict) else None
    url = backend.get("url") if isinstance(backend, dict) else None
    return url if isinstance(url, str) and url else None


def checkpoint_location(root: Path, stack: str) -> str:
    """Where a self-managed backend keeps `stack`'s checkpoint (see module doc); StateError otherwise."""
    from pubsubguard.core.project import read_project

    url = backend_url(root)
    hint = "or pass --state FILE (`pulumi stack export --file FILE`)"
    if url is None:
        raise StateError(f"--state with --stack {stack}: no backend known (set PULUMI_BACKEND_URL=file://DIR as "
                         f"`pulumi login file://DIR` uses it, or backend.url in Pulumi.yaml), {hint}")
    if url.startswith("file://"):
        base: str | Path = Path(os.path.expanduser(url[len("file://"):] or "~"))
        if not Path(base).is_absolute():
            base = Path(root) / base
    elif storage.scheme(url) in storage.SCHEMES:
        base = url
    else:
        raise StateError(f"--state with --stack {stack}: backend {url.split('?')[0]} keeps no checkpoint file this "
                         f"tool can read (file://, gs://, s3:// can), {hint}")
    project = read_project(Path(root)).name
    name = stack.rsplit("/", 1)[-1]  # organization/project/stack on self-managed backends: the last part
    candidates = [storage.join(base, ".pulumi", "stacks", project, f"{name}.json"),
                  storage.join(base, ".pulumi", "stacks", project, f"{name}.json.gz"),
                  storage.join(base, ".pulumi", "stacks", f"{name}.json")]
    for candidate in candidates:
        if storage.exists(candidate):
            return candidate
    raise StateError(f"--state with --stack {stack}: no checkpoint at {candidates[0]} (backend {url}; has "
                     f"`pulumi up` run for stack {name!r} of project {project!r}?), {hint}")


def read_deployment(location: str | Path) -> dict:
    """The deployment (manifest, resources) of an export or a checkpoint; StateError otherwise."""
    try:
        raw = storage.read_bytes(location)
    except FileNotFoundError:
        raise StateError(f"--state {location}: no such file ({EXPORT_HINT})") from None
    except IsADirectoryError:
        raise StateError(f"--state {location}: is a directory ({EXPORT_HINT})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise StateError(f"--state {location}: a damaged gzip file ({err})") from None
    try:
        document = json.loads(raw)
    except UnicodeDecodeError:
        raise StateError(f"--state {location}: not text ({EXPORT_HINT})") from None
    except json.JSONDecodeError as err:
        raise StateError(f"--state {location}: {json_problem(raw, err)}; {EXPORT_HINT}") from None
    if not isinstance(document, dict) or "version" not in document:
        raise StateError(f"--state {location}: expected a JSON object with \"version\" and \"deployment\"; {EXPORT_HINT}")
    if document["version"] != DEPLOYMENT_VERSION:
        raise StateError(f"--state {location}: version: expected {DEPLOYMENT_VERSION} (the deployment format of "
                         f"Pulumi 3.x), got {document['version']!r}; export it again with this Pulumi CLI")
    deployment = document.get("deployment")
    if deployment is None and isinstance(document.get("checkpoint"), dict):
        deployment = document["checkpoint"].get("latest") or {}  # a file backend's checkpoint
    if not isinstance(deployment, dict) or not isinstance(deployment.get("resources", []), list):
        raise StateError(f"--state {location}: deployment: expected an object with \"manifest\" and \"resources\"; "
                         f"{EXPORT_HINT}")
    return deployment


# --- A state as a plan ---------------------------------------------------------------------------------
def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SIG) == SECRET_SIG


def _clean(value: Any, where: str, secrets: list[str], ids: dict[str, str]) -> Any:
    """The value without nulls and secrets (their places appended to `secrets`), references as ids."""
    if isinstance(value, dict):
        if _is_secret(value):
            secrets.append(where)
            return None
        if value.get(SIG) == RESOURCE_SIG:
            return value.get("id") or ids.get(value.get("urn", "")) or None
        if SIG in value:
            return None  # assets and archives: nothing Pub/Sub reads
        cleaned = {}
        for key, item in value.items():
            item = _clean(item, f"{where}.{key}", secrets, ids)
            if item is not None and item != "" and not key.startswith("__"):  # "": unset, as the provider writes it
                cleaned[key] = item
        return cleaned
    if isinstance(value, list):
        items = [_clean(item, f"{where}[{i}]", secrets, ids) for i, item in enumerate(value)]
        return [item for item in items if item is not None]
    return value


def _name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _stack_of(urn: str) -> tuple[str, str]:
    """(stack, project) of a URN `urn:pulumi:<stack>::<project>::<type>::<name>`."""
    parts = urn.split("::")
    return parts[0].removeprefix("urn:pulumi:"), (parts[1] if len(parts) > 1 else "")


def plan_of_state(deployment: dict, location: str | Path, stack: str | None = None) -> dict:
    """The deployment as a plan (module doc); `stack`, when given, must be the state's stack."""
    resources = [r for r in deployment.get("resources") or [] if isinstance(r, dict) and r.get("urn") and r.get("type")]
    live = [r for r in resources if not r.get("delete")]
    ids = {r["urn"]: r["id"] for r in live if r.get("id")}
    providers = {r["urn"]: r for r in live if r["type"].startswith(PROVIDER_PREFIX)}
    pubsub = [r for r in live if r["type"] in PUBSUB_TYPES and r.get("custom")]
    if not pubsub:
        types = collections.Counter(r["type"] for r in live if r.get("custom") and not r["type"].startswith(PROVIDER_PREFIX))
        held = ", ".join(f"{t} ×{n}" for t, n in types.most_common(3)) or "no resources"
        raise StateError(f"--state {location}: no Pub/Sub topic or subscription in this deployment ({held}); "
                         "export the stack that deploys them")
    state_stack, project_name = _stack_of(pubsub[0]["urn"])
    if stack is not None and stack.rsplit("/", 1)[-1] != state_stack:
        raise StateError(f"--state {location}: holds stack {state_stack!r}, not --stack {stack!r}")

    secrets: list[str] = []
    records = [_record_of(resource, providers, ids, secrets) for resource in live
               if not resource["type"].startswith(PROVIDER_PREFIX) and resource["type"] != STACK_TYPE]
    projects = collections.Counter(r["inputs"].get("project") for r in records if r["type"] in PUBSUB_TYPES)
    projects.pop(None, None)
    stack_resource = next((r for r in live if r["type"] == STACK_TYPE), None)
    stack_outputs = _clean((stack_resource or {}).get("outputs") or {}, "stack outputs", secrets, ids)
    manifest = deployment.get("manifest") or {}
    gcp_project = sorted(projects.items(), key=lambda item: (-item[1], item[0]))[0][0] if projects else "unknown-project"
    return {
        "format": "pubsubguard-plan/1",
        "project": project_name,
        "stack": state_stack,
        "gcp_project": gcp_project,
        "provider_config": {"project": gcp_project},
        "resources": sorted(records, key=lambda r: r["urn"]),
        "outputs": stack_outputs if isinstance(stack_outputs, dict) else {},
        "unknown_invokes": [],
        "state": {
            "kind": "state",
            "location": str(location),
            "stack": state_stack,
            "project": project_name,
            "deployed_at": manifest.get("time"),
            "pulumi_version": manifest.get("version"),
            "projects": sorted(projects),
            "pending_operations": len(deployment.get("pending_operations") or []),
            "secrets_skipped": secrets,
        },
    }


def _record_of(resource: dict, providers: dict, ids: dict, secrets: list) -> dict:
    """A resource of the state as the plan's record: its outputs as its inputs (secrets skipped, named in
    `secrets`); a Pub/Sub resource's name, labels and project filled from its id and provider."""
    name = _name_of(resource["urn"])
    outputs = _clean(resource.get("outputs") or {}, name, secrets, ids) if resource.get("custom") else {}
    inputs = {key: value for key, value in outputs.items() if key not in _PROVIDER_ONLY}
    if resource["type"] in PUBSUB_TYPES:
        labels = outputs.get("effectiveLabels", outputs.get("labels"))
        if labels is not None:
            inputs["labels"] = labels
        if not inputs.get("name") and resource.get("id"):
            inputs["name"] = str(resource["id"]).rsplit("/", 1)[-1]
        if not inputs.get("project"):
            project = _provider_project(resource, providers) or _project_of_id(resource.get("id"))
            if project:
                inputs["project"] = project
    return {
        "urn": resource["urn"],
        "type": resource["type"],
        "name": name,
        "custom": bool(resource.get("custom")),
        "parent": resource.get("parent"),
        "id": resource.get("id"),
        "provider": str(resource.get("provider") or "").rsplit("::", 1)[0] or None,
        "inputs": inputs,
        "dependencies": list(resource.get("dependencies") or []),
        "property_dependencies": dict(resource.get("propertyDependencies") or {}),
        "source": None,
        "external": bool(resource.get("external")),
    }


def _provider_project(resource: dict, providers: dict) -> str | None:
    """The project its provider resource was configured with (outputs, else inputs), if any."""
    provider = providers.get(str(resource.get("provider") or "").rsplit("::", 1)[0])
    if provider is None:
        return None
    for side in ("outputs", "inputs"):
        value = (provider.get(side) or {}).get("project")
        if isinstance(value, str) and value:
            return value
    return None


def _project_of_id(resource_id: Any) -> str | None:
    parts = str(resource_id or "").split("/")
    return parts[1] if len(parts) >= 4 and parts[0] == "projects" else None


def load(location: str | Path | None, stack: str | None, root: Path) -> dict:
    """The plan of `--state LOCATION`, or (LOCATION None) of `--stack`'s checkpoint in its backend."""
    if location is None:
        if stack is None:
            raise StateError("--state: give a FILE or URI, or --stack NAME to read that stack's checkpoint from "
                             "a self-managed backend (PULUMI_BACKEND_URL)")
        location = checkpoint_location(root, stack)
        stack = None  # the checkpoint of that stack: its URNs name it
    return plan_of_state(read_deployment(location), location, stack)


def stood_in_caveat(stood_in: list[str]) -> str:
    """The sentence for push settings unknown until deploy that stood in on the emulator (core.rehearsal)."""
    return (f"values unknown until deploy stood in on the emulator: {', '.join(stood_in)} (push endpoint: the "
            "loopback receiver received the pushes in its place, the probe's during a verify; OIDC service account: "
            "a stand-in, no token was checked); what the deployed endpoint and its token do was not exercised")


def caveats(source: dict | None) -> list[str]:
    """What a reader of a verification against this state (or plan) should know (one sentence each)."""
    if source and source.get("stood_in"):
        return [stood_in_caveat(source["stood_in"])]
    if not source or source.get("kind") != "state":
        return []
    said = []
    if source.get("pending_operations"):
        said.append(f"the state {source['location']} records {source['pending_operations']} operation(s) pending: a "
                    "`pulumi up` was interrupted, so it may not say what is deployed (`pulumi refresh`, then export again)")
    if source.get("secrets_skipped"):
        said.append(f"{len(source['secrets_skipped'])} secret value(s) of the state were left unread "
                    f"({', '.join(source['secrets_skipped'])}): nothing judged here depends on them")
    return said


def describe(source: dict | None) -> str:
    """One line: what a verification judged against (`Estate.source`)."""
    if not source:
        return "plan"
    if source.get("kind") == "state":
        return (f"state {source.get('location')} (stack {source.get('stack')}, deployed "
                f"{source.get('deployed_at') or 'at an unrecorded time'})")
    names = f", deployed names from {source['names_from']}" if source.get("names_from") else ""
    return f"plan {source.get('location')}{names}"
