"""Who the run is and what it may do: its identity, its own permissions, the twins' IAM grant.

- `identity`: the principal the run's clients act as (the credentials' service account where they
  name one; anonymous on the emulator and on loopback stand-ins), recorded in run.json and the report.
- `missing_permissions`: before probing, `testIamPermissions` on every topic the probe publishes to or
  attaches a twin to and every declared subscription the config check reads. What is missing ends the
  run (exit 2) in one line; a target that does not answer the call (the emulator: UNIMPLEMENTED) is
  said in the report, never taken as "allowed".
- `grant_subscriber` / `revoke_subscriber`: a probe twin with dead-lettering gets the Pub/Sub service
  agent (`pubsub_facts.pubsub_service_agent`, the member the plan declares on the stack's own
  dead-lettering subscriptions) as `roles/pubsub.subscriber`, as the program grants it on the
  subscription it copies: without it Pub/Sub cannot forward a twin's dead letters (docs/pubsub-facts.md).
  The grant is removed before the twin is deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pubsubguard.core.errors import UserError
from pubsubguard.policies import pubsub_facts as facts

CREDENTIALS_HINT = ("run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS "
                    "to a service account key file")
PUBLISH_PERMISSIONS = ("pubsub.topics.publish", "pubsub.topics.attachSubscription")
ATTACH_PERMISSIONS = ("pubsub.topics.attachSubscription",)
READ_PERMISSIONS = ("pubsub.subscriptions.get",)


def check_credentials() -> None:
    """`--target gcp`: Application Default Credentials exist (found, not used: nothing is contacted
    unless the metadata server of a Google Cloud machine is where they come from)."""
    import google.auth
    from google.auth import exceptions

    quiet = logging.getLogger("google.auth")  # its "metadata server unavailable" is said below, once
    saved = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        google.auth.default()
    except exceptions.DefaultCredentialsError as err:
        first = str(err).split(". ")[0].strip().rstrip(".")
        raise UserError(f"--target gcp: no Google Cloud credentials ({first}); {CREDENTIALS_HINT}") from None
    finally:
        quiet.setLevel(saved)


def identity(target: str, all_loopback: bool) -> str:
    """The principal the run acts as, as far as it is known without contacting anyone."""
    if target == "emulator":
        return "anonymous (the emulator has no identities)"
    if all_loopback:
        return "anonymous (every endpoint is mapped to a loopback stand-in; no credentials used)"
    import google.auth

    credentials, _ = google.auth.default()
    email = getattr(credentials, "service_account_email", None)
    if email and email != "default":
        return f"serviceAccount:{email}"
    kind = type(credentials).__name__
    return f"{kind} (application default credentials; the principal is not named offline)"


@dataclass
class Answer:
    """What the target answered to one IAM call."""

    resource: str
    call: str  # testIamPermissions | setIamPolicy
    result: str  # allowed | missing | error | not answered (testIamPermissions); granted | refused | revoked | not revoked
    detail: str = ""

    def as_dict(self) -> dict:
        return {"resource": self.resource, "call": self.call, "result": self.result, "detail": self.detail}


def _not_answered(err: Exception) -> bool:
    from google.api_core import exceptions

    return isinstance(err, exceptions.MethodNotImplemented)


def needed_permissions(estate, probed: list[str], twin_specs) -> dict[str, tuple[str, ...]]:
    """Resource path -> the permissions the probe uses on it."""
    needed: dict[str, tuple[str, ...]] = {}
    for name in probed:
        needed[estate.topics[estate.subscriptions[name].topic].path] = PUBLISH_PERMISSIONS
    for twin in twin_specs:
        needed.setdefault(twin.topic_path, ATTACH_PERMISSIONS)
    for sub in estate.subscriptions.values():
        needed[sub.path] = READ_PERMISSIONS
    return needed


def check_permissions(publisher, subscriber, needed: dict[str, tuple[str, ...]]) -> list[Answer]:
    """`testIamPermissions` on each resource: one Answer each (missing ones name the permissions)."""
    answers = []
    for resource, permissions in needed.items():
        client = publisher if "/topics/" in resource else subscriber
        try:
            response = client.test_iam_permissions(request={"resource": resource, "permissions": list(permissions)},
                                                   timeout=30)
        except Exception as err:  # noqa: BLE001 - the answer is the evidence
            result = "not answered" if _not_answered(err) else "error"
            answers.append(Answer(resource, "testIamPermissions", result, f"{type(err).__name__}: {err}"))
            continue
        missing = [p for p in permissions if p not in set(response.permissions)]
        answers.append(Answer(resource, "testIamPermissions", "missing" if missing else "allowed", ", ".join(missing)))
    return answers


def _update_binding(subscriber, resource: str, role: str, member: str, add: bool) -> None:
    policy = subscriber.get_iam_policy(request={"resource": resource}, timeout=30)
    binding = next((b for b in policy.bindings if b.role == role), None)
    if add:
        if binding is None:
            binding = policy.bindings.add(role=role)
        if member not in binding.members:
            binding.members.append(member)
    elif binding is not None and member in binding.members:
        binding.members.remove(member)
    subscriber.set_iam_policy(request={"resource": resource, "policy": policy}, timeout=30)


def grant_subscriber(subscriber, twin_path: str, service_agent: str) -> Answer:
    """The service agent as subscriber on a dead-lettering twin (read-modify-write of its policy)."""
    try:
        _update_binding(subscriber, twin_path, facts.SUBSCRIBER_ROLE, service_agent, add=True)
    except Exception as err:  # noqa: BLE001 - the answer is the evidence
        result = "not answered" if _not_answered(err) else "refused"
        return Answer(twin_path, "setIamPolicy", result, f"{type(err).__name__}: {err}")
    return Answer(twin_path, "setIamPolicy", "granted", f"{facts.SUBSCRIBER_ROLE} to {service_agent}")


def revoke_subscriber(subscriber, twin_path: str, service_agent: str) -> Answer:
    try:
        _update_binding(subscriber, twin_path, facts.SUBSCRIBER_ROLE, service_agent, add=False)
    except Exception as err:  # noqa: BLE001
        return Answer(twin_path, "setIamPolicy", "not revoked", f"{type(err).__name__}: {err}")
    return Answer(twin_path, "setIamPolicy", "revoked", f"{facts.SUBSCRIBER_ROLE} of {service_agent}")
