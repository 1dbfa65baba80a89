"""The Analyzer protocol's messages: a plan's resources as the CLI sends them (unknowns as the engine's
sentinel, secrets in their envelope, each resource's provider), the pack's answers read back (policies,
and the policy SDK's cannot-judge lines as "not judged" entries)."""

from __future__ import annotations

import re
from typing import Any

from pubsubguard.core.project import UNKNOWN
from pubsubguard.core.engine_values import with_partial_strings
from pubsubguard.judging.result import PolicyInfo
from pubsubguard.policies.pubsub_facts.levels import EnforcementLevel


def protobufs():
    from pulumi.runtime.proto import analyzer_pb2

    return analyzer_pb2


def level_of(value: int) -> EnforcementLevel:
    """The level an Analyzer message carries (the protocol's enum value)."""
    return EnforcementLevel[protobufs().EnforcementLevel.Name(value)]


def level_value(level: EnforcementLevel) -> int:
    """The protocol's enum value of a level."""
    return protobufs().EnforcementLevel.Value(EnforcementLevel(level).name)


def message_value(value: Any) -> Any:
    """A plan value as the CLI marshals it: unknowns are the engine's unknown (string) sentinel."""
    from pulumi.runtime import rpc

    if value == UNKNOWN:
        return rpc.UNKNOWN  # the SDK's marshalled unknown, the same string the plan records
    if isinstance(value, dict):
        return {k: message_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [message_value(v) for v in value]
    return value


def _struct(values: dict):
    from google.protobuf import struct_pb2

    struct = struct_pb2.Struct()
    struct.update(message_value(values))
    return struct


def _provider(resource: dict, plan: dict, by_urn: dict):
    """The provider the CLI reports for a resource: the explicit provider resource it names, else the
    default provider of its package (with the stack's `<package>:*` config). None for components."""
    if not resource.get("custom") or resource["type"].startswith("pulumi:"):
        return None
    explicit = by_urn.get(resource.get("provider") or "")
    if explicit is not None:
        return protobufs().AnalyzerProviderResource(
            type=explicit["type"], name=explicit["name"], urn=explicit["urn"],
            properties=_struct(explicit.get("inputs") or {}),
        )
    package = resource["type"].split(":", 1)[0]
    config = plan.get("provider_config") or ({"project": plan["gcp_project"]} if plan.get("gcp_project") else {})
    return protobufs().AnalyzerProviderResource(
        type=f"pulumi:providers:{package}",
        name="default",
        urn=f"urn:pulumi:{plan.get('stack')}::{plan.get('project')}::pulumi:providers:{package}::default",
        properties=_struct(config if package == "gcp" else {}),
    )


def _properties(resource: dict):
    """A resource's inputs as the pack gets them: unknowns as the sentinel, and a string built from an
    unknown and a known part as it was built (the known part can decide a rule: `engine_values.partial_string_entries`)."""
    return _struct(with_partial_strings(resource.get("inputs") or {}, resource.get("partial") or []))


def judged_resources(plan: dict) -> list[dict]:
    """What the engine sends to analyzers: every registered resource, not those only read."""
    return [r for r in plan["resources"] if not r.get("external")]


def analyze_request(resource: dict, context: dict, by_urn: dict):
    """The `Analyze` request the CLI sends for one resource."""
    pb = protobufs()
    request = pb.AnalyzeRequest(
        type=resource["type"], name=resource["name"], urn=resource["urn"],
        properties=_properties(resource),
        options=pb.AnalyzerResourceOptions(parent=resource.get("parent") or ""),
    )
    provider = _provider(resource, context, by_urn)
    if provider is not None:
        request.provider.CopyFrom(provider)
    return request


def analyze_stack_request(plan: dict):
    pb = protobufs()
    request = pb.AnalyzeStackRequest()
    by_urn = {r["urn"]: r for r in plan["resources"]}
    for resource in judged_resources(plan):
        item = request.resources.add(
            type=resource["type"], name=resource["name"], urn=resource["urn"],
            properties=_properties(resource),
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

    pb = protobufs()
    result = []
    for p in info.policies:
        schema = json_format.MessageToDict(p.configSchema) if p.HasField("configSchema") else {}
        result.append(
            PolicyInfo(
                name=p.name, description=p.description, level=level_of(p.enforcementLevel),
                kind="stack" if p.policy_type == pb.POLICY_TYPE_STACK else "resource", config_schema=schema,
                remediation=getattr(p, "remediation_steps", ""), url=getattr(p, "url", ""),
            )
        )
    return result


def plan_context(plan: dict) -> dict:
    """What a resource's Analyze request needs besides the resource: stack, project, provider config."""
    return {key: plan.get(key) for key in ("project", "stack", "gcp_project", "provider_config")}


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
        blocking = {}  # shown property -> where its unknown comes from
        for path in filter(None, paths.split(", ")):
            path, _, other = path.partition("@")  # PROPERTY@URN: a property of another resource (a grant)
            owner = by_urn.get(other, {}) if other else record
            shown = f"{path} of {owner.get('name') or other}" if other else path
            blocking[shown] = (owner.get("unknowns") or {}).get(path) or _sources_of(owner, path)
        entries.append({"urn": urn, "resource_type": record.get("type", ""), "resource_name": record.get("name", ""),
                        "policy": match.group("policy"), "properties": list(blocking),
                        "unknown_inputs": blocking})
    return entries


def _sources_of(record: dict, path: str) -> list[dict]:
    """Where an unknown input comes from, from the plan's provenance of its top-level property."""
    unknowns = record.get("unknowns") or {}
    top = path.split(".")[0].split(" ")[0]
    return next((sources for key, sources in unknowns.items() if key.split(".")[0] == top), [])


def configure_stack(stub, context: dict) -> None:
    import grpc

    pb = protobufs()
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
