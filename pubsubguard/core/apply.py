"""Apply a plan's topics, subscriptions and IAM members to a Pub/Sub target through the admin API.

The target is whatever `PublisherClient` / `SubscriberClient` talk to: the emulator when
PUBSUB_EMULATOR_HOST is set, Google Cloud otherwise; there is no other switch. Order: dead-letter
topics, other topics, subscriptions on dead-letter topics (drains), other subscriptions, IAM members.

Idempotent: a resource that exists is compared with the plan (`pubsubguard.core.readback`); matching
settings are left alone, mutable differences are updated with a field mask, immutable ones
(ordering, filter, topic) are reported, never silently replaced. Every plan resource ends with one or more
`ResourceAction`s (what was done to it, then to a setting of it): nothing is dropped, and when creation stops
midway the outcomes say what exists and what does not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import declared, emulator, readback
from pubsubguard.core.errors import UserError
from pubsubguard.core.settings import FIXED_AT_CREATION, SUBSCRIPTION_UPDATE_FIELDS, TOPIC_UPDATE_FIELDS

CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"
NOT_APPLIED = "not applied"  # the target does not support it, or it cannot change in place
FAILED = "failed"  # the target refused to create it
NOT_ATTEMPTED = "not attempted"  # skipped: a dependency failed or the target went away
CHANGES = (CREATED, UPDATED)
PROBLEMS = (FAILED, NOT_ATTEMPTED)

# Provider inputs that name the resource rather than set it.
_IDENTITY_KEYS = ("name", "project")
# Proto fields holding durations; the plan writes them as "600s".
_DURATION_FIELDS = {"message_retention_duration", "ttl", "minimum_backoff", "maximum_backoff", "max_duration"}


@dataclass(frozen=True)
class ResourceAction:
    """One thing apply did to a resource, or to one of its settings (created, then a setting not applied, ...);
    the command groups a resource's actions into its `ResourceOutcome`."""

    path: str  # resource path; for IAM "path role member"
    kind: str  # "topic" | "subscription" | "iam" | plan type token
    action: str
    detail: str = ""


@dataclass
class ApplyResult:
    target: str
    outcomes: list[ResourceAction] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for o in self.outcomes if o.action == action)

    @property
    def changed(self) -> bool:
        return any(o.action in CHANGES for o in self.outcomes)

    @property
    def complete(self) -> bool:
        """Every topic and subscription of the plan exists on the target."""
        return not any(o.action in PROBLEMS for o in self.outcomes)


# --- Plan inputs -> API requests -----------------------------------------------------------------
def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _wire(value: Any, key: str = "") -> Any:
    """Plan camelCase inputs as the proto-plus mapping the admin API takes (durations as Duration)."""
    if isinstance(value, dict):
        return {_snake(k): _wire(v, _snake(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    if key in _DURATION_FIELDS and isinstance(value, str):
        seconds = facts.parse_api_duration(value)
        if seconds is None:
            raise UserError(f"plan input {key}: expected an API duration like '600s', got {value!r}")
        return _duration(seconds)
    return value


def _build(message_type, inputs: dict, overrides: dict) -> tuple[Any, list[str]]:
    """(message, [unsupported input keys with the reason]): each input is tried on its own, so one
    field the API does not know never drops the others unseen."""
    fields: dict[str, Any] = {}
    unsupported: list[str] = []
    for key, value in inputs.items():
        if key in _IDENTITY_KEYS:
            continue
        name = _snake(key)
        wired = overrides[name] if name in overrides else _wire(value, name)
        try:
            message_type(**{name: wired})
        except (ValueError, TypeError, KeyError) as err:
            unsupported.append(f"{key} ({err})")
            continue
        fields[name] = wired
    return message_type(**fields), unsupported


def topic_request(topic: declared.Topic):
    from google.pubsub_v1 import types

    message, unsupported = _build(types.Topic, topic.inputs, {})
    message.name = topic.path
    return message, unsupported


def _duration(seconds: float | int) -> dict:
    return {"seconds": int(seconds), "nanos": int(round((seconds - int(seconds)) * 1e9))}


def subscription_request(subscription: declared.Subscription):
    """The API request of a declared subscription: the model's resolved paths and expiration, every
    other plan input as the API names it."""
    from google.pubsub_v1 import types

    overrides: dict[str, Any] = {"topic": subscription.topic_path}
    if subscription.expiration_ttl is not None:  # "never": an empty policy
        ttl = subscription.expiration_ttl
        overrides["expiration_policy"] = {} if ttl == "never" else {"ttl": _duration(ttl)}
    if subscription.inputs.get("pushConfig") and os.environ.get(emulator.HOST_ENV):
        # The emulator pushes to a loopback receiver, never to the stack's real endpoints.
        overrides["push_config"] = _wire(emulator.emulator_push_config(subscription.inputs["pushConfig"], subscription.name))
    if subscription.dead_letter_topic_path:
        overrides["dead_letter_policy"] = {
            **_wire(subscription.inputs["deadLetterPolicy"]), "dead_letter_topic": subscription.dead_letter_topic_path
        }
    message, unsupported = _build(types.Subscription, subscription.inputs, overrides)
    message.name = subscription.path
    return message, unsupported


# --- Applying -------------------------------------------------------------------------------------
def _unknowns(value: Any, where: str) -> list[str]:
    from pubsubguard.core.project import UNKNOWN

    if value == UNKNOWN:
        return [where]
    if isinstance(value, dict):
        return [w for k, v in value.items() for w in _unknowns(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [w for i, v in enumerate(value) for w in _unknowns(v, f"{where}[{i}]")]
    return []


def require_known(plan: dict) -> None:
    """UserError unless every value apply sends is known (checked before anything is created)."""
    for key in ("gcp_project", "resources"):
        if key not in plan:
            raise UserError(f"plan: missing {key!r} (make a plan with `pubsubguard plan --out FILE`)")
    unknown = [w for r in plan["resources"] if r.get("custom") for w in _unknowns(r.get("inputs", {}), f"{r['name']}.inputs")]
    unnamed = [f"{r['name']}.inputs.name" for r in plan["resources"]
               if r["type"] in (facts.TOPIC, facts.SUBSCRIPTION) and r.get("custom") and not r["inputs"].get("name")]
    if unknown or unnamed:
        raise UserError(f"plan: values unknown until deploy cannot be applied: {', '.join(unknown + unnamed)}")


def _ordered(plan: dict, estate: declared.Estate):
    """Topics (dead-letter topics first), subscriptions (drains first), IAM and other resources."""
    dead_letter_topics = {s.dead_letter_topic_path for s in estate.subscriptions.values() if s.dead_letter_topic_path}
    topics = sorted(estate.topics.values(), key=lambda t: (t.path not in dead_letter_topics, t.path))
    subscriptions = sorted(
        estate.subscriptions.values(), key=lambda s: (s.topic_path not in dead_letter_topics, s.name)
    )
    iam = [r for r in plan["resources"] if r["type"] in facts.IAM_TYPES]
    handled = {facts.TOPIC, facts.SUBSCRIPTION, *facts.IAM_TYPES}
    others = [r for r in plan["resources"] if r.get("custom") and r["type"] not in handled]
    return topics, subscriptions, iam, others


def is_unavailable(err: Exception) -> bool:
    """The target did not answer the call (unreachable, not in time, or the client's retries ran out), as opposed
    to answering it with an error."""
    from google.api_core import exceptions

    return isinstance(err, (exceptions.ServiceUnavailable, exceptions.DeadlineExceeded, exceptions.RetryError))


def _error_text(err: Exception) -> str:
    message = getattr(err, "message", None) or str(err)
    return f"{type(err).__name__}: {message}".strip()


def apply_plan(plan: dict, publisher=None, subscriber=None, target: str = "") -> ApplyResult:
    """Create or update the plan's resources on the target the clients talk to; see module doc."""
    from google.cloud import pubsub_v1

    require_known(plan)
    publisher = publisher or pubsub_v1.PublisherClient()
    subscriber = subscriber or pubsub_v1.SubscriberClient()
    result = ApplyResult(target=target)
    project = plan["gcp_project"]
    topics, subscriptions, iam, others = _ordered(plan, declared.estate(plan))
    steps = [("topic", t, t.path) for t in topics] + [("subscription", s, s.path) for s in subscriptions]
    unavailable: Exception | None = None
    broken: set[str] = set()  # paths that do not exist after their step
    for kind, resource, path in steps:
        if unavailable is not None:
            result.outcomes.append(ResourceAction(path, kind, NOT_ATTEMPTED, f"the target stopped answering ({_error_text(unavailable)})"))
            continue
        if kind == "subscription":
            needs = {resource.topic_path, resource.dead_letter_topic_path} - {None}
            missing = sorted(needs & broken)
            if missing:
                broken.add(path)
                result.outcomes.append(ResourceAction(path, kind, NOT_ATTEMPTED, f"needs {', '.join(missing)}, which does not exist"))
                continue
        try:
            outcomes = _apply_one(kind, resource, publisher, subscriber)
        except Exception as err:  # noqa: BLE001 - every API error becomes an outcome, none escapes unreported
            if is_unavailable(err):
                unavailable = err
                result.outcomes.append(ResourceAction(path, kind, NOT_ATTEMPTED, f"the target stopped answering ({_error_text(err)})"))
            else:
                result.outcomes.append(ResourceAction(path, kind, FAILED, _error_text(err)))
            broken.add(path)
            continue
        result.outcomes.extend(outcomes)
    for resource in iam:
        path = _iam_resource_path(resource, project)
        label = f"{path} {resource['inputs'].get('role')} {_iam_members(resource)}"
        if unavailable is not None:
            result.outcomes.append(ResourceAction(label, "iam", NOT_ATTEMPTED, f"the target stopped answering ({_error_text(unavailable)})"))
            continue
        result.outcomes.append(_apply_iam(resource, path, label, publisher, subscriber, path in broken))
    for resource in others:
        result.outcomes.append(
            ResourceAction(resource.get("id") or resource["name"], resource["type"], NOT_APPLIED,
                    f"resource type {resource['type']} is not handled by pubsubguard apply")
        )
    return result


def _apply_one(kind: str, resource: declared.Topic | declared.Subscription, publisher, subscriber) -> list[ResourceAction]:
    from google.api_core import exceptions
    from google.protobuf import field_mask_pb2

    path = resource.path
    declared_settings = resource.settings()
    if kind == "topic":
        request, unsupported = topic_request(resource)
        get = lambda: publisher.get_topic(topic=path)  # noqa: E731
        create = lambda message: publisher.create_topic(request=message)  # noqa: E731
        normalise, update_fields = readback.actual_topic, TOPIC_UPDATE_FIELDS
        update = lambda mask: publisher.update_topic(request={"topic": request, "update_mask": mask})  # noqa: E731
    else:
        request, unsupported = subscription_request(resource)
        get = lambda: subscriber.get_subscription(subscription=path)  # noqa: E731
        create = lambda message: subscriber.create_subscription(request=message)  # noqa: E731
        normalise, update_fields = readback.actual_subscription, SUBSCRIPTION_UPDATE_FIELDS
        update = lambda mask: subscriber.update_subscription(request={"subscription": request, "update_mask": mask})  # noqa: E731
    outcomes = [ResourceAction(path, kind, NOT_APPLIED, f"plan input {item} is not an API field of {kind}s") for item in unsupported]
    try:
        existing = get()
    except exceptions.NotFound:
        try:
            refused = _create_without_refused(create, request)
        except exceptions.AlreadyExists:  # created between our get and create: compare below
            existing = get()
        else:
            outcomes += [
                ResourceAction(path, kind, NOT_APPLIED, f"the target refused {name}; created without it ({reason})")
                for name, reason in refused
            ]
            return [ResourceAction(path, kind, CREATED), *outcomes]
    diffs = readback.differences({path: declared_settings}, {path: normalise(existing)})
    if not diffs:
        return [ResourceAction(path, kind, UNCHANGED), *outcomes]
    fixed = [d for d in diffs if d.setting in FIXED_AT_CREATION]
    for d in fixed:
        outcomes.append(ResourceAction(path, kind, NOT_APPLIED,
                                f"{d.setting} is fixed at creation (declared {d.declared!r}, exists as {d.actual!r}); "
                                "delete and re-create the resource to change it"))
    mask_paths = sorted({f for d in diffs if d.setting in update_fields for f in update_fields[d.setting]})
    settings = ", ".join(sorted({d.setting for d in diffs if d.setting in update_fields}))
    if mask_paths:
        try:
            update(field_mask_pb2.FieldMask(paths=mask_paths))
        except (exceptions.InvalidArgument, exceptions.FailedPrecondition, exceptions.MethodNotImplemented):
            # One field at a time, so one the target refuses does not block the others.
            applied, refused = [], []
            for mask_path in mask_paths:
                try:
                    update(field_mask_pb2.FieldMask(paths=[mask_path]))
                    applied.append(mask_path)
                except (exceptions.InvalidArgument, exceptions.FailedPrecondition, exceptions.MethodNotImplemented) as one:
                    refused.append(f"{mask_path} ({_error_text(one)})")
            if applied:
                outcomes.insert(0, ResourceAction(path, kind, UPDATED, ", ".join(applied)))
            if refused:
                outcomes.append(ResourceAction(path, kind, NOT_APPLIED, "the target refused the update of " + "; ".join(refused)))
        else:
            outcomes.insert(0, ResourceAction(path, kind, UPDATED, settings))
    if not any(o.action == UPDATED for o in outcomes):
        outcomes.insert(0, ResourceAction(path, kind, UNCHANGED, "exists; differs from the plan (see not applied)"))
    return outcomes


def _create_without_refused(create, request) -> list[tuple[str, str]]:
    """Create; when the target refuses one set field by name (InvalidArgument naming it), create
    without that field and return [(field, the target's message)], so the caller reports it."""
    from google.api_core import exceptions

    message = type(request)(request)
    refused: list[tuple[str, str]] = []
    while True:
        try:
            create(message)
            return refused
        except exceptions.InvalidArgument as err:
            raw = type(message).pb(message)
            named = [f.name for f, _ in raw.ListFields() if f.name not in ("name", "topic") and re.search(rf"\b{f.name}\b", str(err.message))]
            if len(named) != 1:
                raise
            raw.ClearField(named[0])
            refused.append((named[0], _error_text(err)))


# --- IAM --------------------------------------------------------------------------------------------
def _iam_resource_path(resource: dict, project: str) -> str:
    inputs = resource["inputs"]
    if resource["type"] in facts.TOPIC_IAM_TYPES:
        return readback.topic_path(inputs.get("project") or project, inputs["topic"])
    return readback.subscription_path(inputs.get("project") or project, inputs["subscription"])


def _iam_members(resource: dict) -> str:
    inputs = resource["inputs"]
    return inputs.get("member") or ",".join(inputs.get("members") or []) or "(policy)"


def _apply_iam(resource: dict, path: str, label: str, publisher, subscriber, resource_missing: bool) -> ResourceAction:
    from google.api_core import exceptions

    if resource_missing:
        return ResourceAction(label, "iam", NOT_ATTEMPTED, f"{path} does not exist")
    inputs = resource["inputs"]
    if resource["type"] in (facts.TOPIC_IAM_POLICY, facts.SUBSCRIPTION_IAM_POLICY):
        return ResourceAction(label, "iam", NOT_APPLIED, "authoritative IAM policies are left to `pulumi up`")
    members = [inputs["member"]] if "member" in inputs else list(inputs.get("members") or [])
    role = inputs["role"]
    client = publisher if resource["type"] in facts.TOPIC_IAM_TYPES else subscriber
    try:
        policy = client.get_iam_policy(request={"resource": path})
        binding = next((b for b in policy.bindings if b.role == role and not b.condition.expression), None)
        if binding is not None and set(members) <= set(binding.members):
            return ResourceAction(label, "iam", UNCHANGED)
        if binding is None:
            binding = policy.bindings.add(role=role)
        binding.members.extend(m for m in members if m not in binding.members)
        client.set_iam_policy(request={"resource": path, "policy": policy})
    except exceptions.MethodNotImplemented as err:
        return ResourceAction(label, "iam", NOT_APPLIED, f"the target has no IAM ({_error_text(err)})")
    except exceptions.GoogleAPICallError as err:
        return ResourceAction(label, "iam", FAILED, _error_text(err))
    return ResourceAction(label, "iam", CREATED)
