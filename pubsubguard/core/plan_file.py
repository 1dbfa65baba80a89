"""The plan file: what `pubsubguard plan` writes and every other command reads (the check, apply, verify's
declared model). Reading one needs no language host and no engine: this module imports neither.

Plan format (`format: pubsubguard-plan/1`), deterministic (sorted keys, resources sorted by URN):

    {"format": "pubsubguard-plan/1", "project": "pubsubguard", "stack": "dev",
     "gcp_project": "pubsubguard-dev", "provider_config": {"project": ..., "region": ...},
     "resources": [{"urn", "type", "name", "custom", "parent", "id", "provider", "inputs",
                    "dependencies", "property_dependencies", "source" ({path, line} where
                    the program constructs it), "external" (read with .get),
                    "unknowns" ({dotted input path: [{urn, type, name, output, via}]}: where each
                    value unknown at preview comes from: the resources its top-level property
                    depends on (the engine's record), the output property (`id`, `email`, ...)
                    and the `apply` / `all` chain it went through (reported by the program
                    side; absent where it could not tell); {config, environments, values_from}
                    for a configuration value an ESC environment sets or may set; [] for an unknown
                    invoke result or a `secure:` config value)}...],
     "outputs": {"topics": {...}, "subscriptions": {...}, "probe_isolation": true},
     "unknown_invokes": [{"token", "args"}...],
     "secrets": "redacted" (present when secret values were written as "[secret]")}

Values unknown at preview are `UNKNOWN` (the engine's sentinel string); secrets are the engine's
secret envelope `{"4dabf1…": "1b4706…", "value": …}`, whose value a plan file shows as `[secret]`
unless written with `--show-secrets` (read back, a redacted secret is unknown).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pubsubguard.core import storage
from pubsubguard.core.user_files import read_mapping
from pubsubguard.core.project import UNKNOWN, PlanError, Project
from pubsubguard.core.signatures import SECRET_SIG, SIG

PLAN_FORMAT = "pubsubguard-plan/1"


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


def _gcp_project(values: dict[str, Any]) -> str | None:
    project = values.get("gcp:project")
    return project if isinstance(project, str) and project != UNKNOWN else None


REDACTED = "[secret]"


def secret_strings(value: Any, inside: bool = False) -> set[str]:
    """Every string inside a secret envelope of `value` (to mask them wherever text is shown)."""
    found: set[str] = set()
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            return secret_strings(value.get("value"), True)
        for item in value.values():
            found |= secret_strings(item, inside)
    elif isinstance(value, list):
        for item in value:
            found |= secret_strings(item, inside)
    elif inside and isinstance(value, str) and value != UNKNOWN and len(value) >= 3:
        found.add(value)
    return found


def mask(text: str, secrets: set[str]) -> str:
    """`text` with every secret string shown as `[secret]` (longest first, so a secret that contains
    another is masked whole)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
        escaped = json.dumps(secret)[1:-1]  # as it stands inside a JSON string
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text


def _redacted(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            return {SIG: SECRET_SIG, "value": REDACTED}
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def _unredacted(value: Any) -> Any:
    """A redacted plan's secrets read back as values unknown here (the rules cannot judge them)."""
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG and value.get("value") == REDACTED:
            return {SIG: SECRET_SIG, "value": UNKNOWN}
        return {k: _unredacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unredacted(v) for v in value]
    return value


def _secret_where_held(value: Any, strings: frozenset[str]) -> Any:
    """`value` with each string that holds one of `strings` in a secret envelope."""
    if isinstance(value, str):
        return {SIG: SECRET_SIG, "value": value} if any(secret in value for secret in strings) else value
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            return value
        return {k: _secret_where_held(v, strings) for k, v in value.items()}
    if isinstance(value, list):
        return [_secret_where_held(v, strings) for v in value]
    return value


def _kept_secret(plan: dict, strings: frozenset[str]) -> dict:
    """The plan with `strings` (the stack's secret configuration values, e.g. every value `--environment-values`
    gives) secret wherever they are: a resource's input or a stack output that holds one is a secret (read
    back, unknown), a partly known string that holds one is dropped (it would read back as a known part)."""
    resources = []
    for resource in plan.get("resources") or []:
        partial = [entry for entry in resource.get("partial") or []
                   if not any(secret in str(entry.get("value")) for secret in strings)]
        resource = {**resource, "inputs": _secret_where_held(resource.get("inputs") or {}, strings)}
        resources.append({**resource, "partial": partial} if partial else
                         {k: v for k, v in resource.items() if k != "partial"})
    return {**plan, "resources": resources, "outputs": _secret_where_held(plan.get("outputs") or {}, strings)}


def dumps(plan: dict, show_secrets: bool = False, secrets: frozenset[str] = frozenset()) -> str:
    """The plan file's text. Secret values are written as `[secret]` (and the plan says
    `"secrets": "redacted"`), as Pulumi shows them, unless `show_secrets`. `secrets`: strings kept secret
    wherever they are (`StackConfig.secret_strings`): in values as secrets, anywhere else (a resource's
    name, the GCP project) as `[secret]` (read back, a GCP project or provider setting so written is unknown)."""
    text = json.dumps(plan, indent=2, sort_keys=True)
    if show_secrets or not (secret_strings(plan) or mask(text, set(secrets)) != text):
        return text + "\n"
    plan = {**_redacted(_kept_secret(plan, secrets) if secrets else plan), "secrets": "redacted"}
    return mask(json.dumps(plan, indent=2, sort_keys=True), set(secrets)) + "\n"


def load_plan(path: Path) -> dict:
    plan = read_mapping(path, PlanError, language="JSON", read=storage.read_text,
                        missing=f"{path}: no such plan file (make one with `pubsubguard plan --out {path}`)")
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise PlanError(f"{path}: format: expected {PLAN_FORMAT!r}, got {plan.get('format') if isinstance(plan, dict) else type(plan).__name__!r}")
    if plan.get("secrets") == "redacted":
        plan = _unredacted(plan)
        if plan.get("gcp_project") == REDACTED:  # a secret configuration value (`dumps`): unknown here
            plan["gcp_project"] = "unknown-project"
        if isinstance(plan.get("provider_config"), dict):
            plan["provider_config"] = {k: v for k, v in plan["provider_config"].items() if v != REDACTED}
    return plan


def retarget(plan: dict, project: str) -> dict:
    """The plan moved to another GCP project: every resource path (`projects/OLD/...`) and `gcp_project`
    name `project`; nothing else changes. Walks the plan's values (keys are property names, never paths)."""
    prefix, moved_to = f"projects/{plan.get('gcp_project')}/", f"projects/{project}/"

    def move(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(prefix, moved_to)
        if isinstance(value, dict):
            return {key: move(item) for key, item in value.items()}
        if isinstance(value, list):
            return [move(item) for item in value]
        return value

    moved = move(plan)
    moved["gcp_project"] = project
    return moved


def resources_of(plan: dict, type_: str) -> list[dict]:
    return [r for r in plan["resources"] if r["type"] == type_]
