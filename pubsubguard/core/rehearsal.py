"""Rehearse any team's program on the emulator: resolve a plan's values unknown until deploy the way
`pulumi up` resolves them, when they refer to resources of the same plan.

A plan made offline (`pubsubguard plan`) holds what a preview knows. Two things a deploy decides:
- an **autoname**: a topic or subscription declared without `name` gets its logical name, `-` and 7
  random hex characters (`orders-6a1f3c2`), as Pulumi's autonaming does;
- a **reference**: an input computed from another resource's output (`topic=topic.id`,
  `dead_letter_policy.dead_letter_topic=dlq.id`, an IAM member's `topic=dlq.name`) is the unknown
  sentinel; the plan's `property_dependencies` name the resource it came from. A topic field becomes that
  topic's id (`projects/{project}/topics/{name}`), a subscription field the subscription's id: the API
  and the provider accept the id wherever they accept the name.

Only a reference with exactly one Pub/Sub resource of the expected kind behind it is resolved; any
other unknown stays unknown (apply then names it), but for a push subscription's endpoint and its OIDC
token's service account (a Cloud Run service's URL, an account created beside it: the commonest push
set-up): on the emulator push goes to a loopback receiver whatever the endpoint (the probe's, during a
verify), so `stand_in_push` puts a stand-in there (`STAND_INS`), and the apply and the verify report say so. `apply --emulator` assigns the names and records the
rehearsal as the state a deploy would have left (`state_document`), in
`<project>/.pubsubguard/rehearsal/<stack>.json`: applying again keeps the names (as Pulumi keeps a
resource's autoname across updates), `verify --plan` on the emulator finds them there, and the file is
a `pulumi stack export` document `--state` reads too.
"""

from __future__ import annotations

import copy
import datetime
import json
import secrets
from pathlib import Path
from typing import Any

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import state
from pubsubguard.core.declared import PlanValueError, subscription_path, topic_path
from pubsubguard.core.project import UNKNOWN

AUTONAME_HEX = 7
_REFERENCE_KINDS = {"topic": facts.TOPIC, "deadLetterTopic": facts.TOPIC, "subscription": facts.SUBSCRIPTION}
_NAMED = (facts.TOPIC, facts.SUBSCRIPTION)


# What stands in on the emulator for a push setting unknown until deploy (RFC 2606 `.invalid`: never dialled;
# the emulator pushes to its loopback receiver, emulator.emulator_push_config, the probe's twins to the probe's).
STAND_INS = {
    ("pushConfig", "pushEndpoint"): "https://unknown-until-deploy.invalid/push",
    ("pushConfig", "oidcToken", "serviceAccountEmail"): "unknown-until-deploy@stand-in.iam.gserviceaccount.com",
}


def stand_in_push(plan: dict) -> list[str]:
    """Put `STAND_INS` in place of a subscription's push endpoint and OIDC service account left unknown
    (after `resolve`); where it did (`name.inputs.pushConfig.pushEndpoint`, …). For the emulator only."""
    stood = []
    for resource in plan["resources"]:
        if resource["type"] != facts.SUBSCRIPTION or not resource.get("custom"):
            continue
        for path, stand_in in STAND_INS.items():
            holder = resource.get("inputs") or {}
            for key in path[:-1]:
                holder = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(holder, dict) and holder.get(path[-1]) == UNKNOWN:
                holder[path[-1]] = stand_in
                stood.append(f"{resource['name']}.inputs.{'.'.join(path)}")
    return stood


def record_path(root: Path, stack: str) -> Path:
    return Path(root) / ".pubsubguard" / "rehearsal" / f"{stack}.json"


def autoname(logical_name: str) -> str:
    return f"{logical_name}-{secrets.token_hex(4)[:AUTONAME_HEX]}"


def autonamed(plan: dict) -> list[dict]:
    """The plan's topics and subscriptions whose name is chosen at deploy."""
    return [r for r in plan["resources"] if r["type"] in _NAMED and r.get("custom") and not r.get("external")
            and r["inputs"].get("name") in (None, "")]


def needs_deploy(plan: dict) -> bool:
    """Whether the plan has names or references a deploy would decide (nothing to resolve otherwise)."""
    from pubsubguard.core.engine_values import contains_unknown

    return "state" not in plan and (bool(autonamed(plan)) or any(
        contains_unknown(r.get("inputs", {})) for r in plan["resources"] if r["type"] in (*_NAMED, *facts.IAM_TYPES)))


def resolve(plan: dict, names: dict[str, str], assign: bool) -> tuple[dict, dict[str, str]]:
    """(the plan with autonames and same-plan references resolved, urn -> deployed name of each autonamed
    resource). `names` are names already chosen (a recorded rehearsal); `assign` chooses new ones for the
    others, else they stay unnamed."""
    plan = copy.deepcopy(plan)
    chosen: dict[str, str] = {}
    for resource in autonamed(plan):
        name = names.get(resource["urn"]) or (autoname(resource["name"]) if assign else None)
        if name is not None:
            resource["inputs"]["name"] = chosen[resource["urn"]] = name
    by_urn = {r["urn"]: r for r in plan["resources"]}
    project = plan["gcp_project"]

    def reference(key: str, dependencies: list[str]) -> str | None:
        kind = _REFERENCE_KINDS.get(key)
        behind = [by_urn[urn] for urn in dependencies if urn in by_urn and by_urn[urn]["type"] == kind]
        if kind is None or len(behind) != 1:
            return None
        name = behind[0]["inputs"].get("name")
        if not isinstance(name, str) or not name or name == UNKNOWN:
            return None
        where = behind[0]["inputs"].get("project")
        where = where if isinstance(where, str) and where != UNKNOWN else project
        return (topic_path if kind == facts.TOPIC else subscription_path)(where, name)

    def substitute(value: Any, key: str, dependencies: list[str]) -> Any:
        if value == UNKNOWN:
            return reference(key, dependencies) or UNKNOWN
        if isinstance(value, dict):
            return {k: substitute(v, k, dependencies) for k, v in value.items()}
        if isinstance(value, list):
            return [substitute(v, key, dependencies) for v in value]
        return value

    for resource in plan["resources"]:
        dependencies = resource.get("property_dependencies") or {}
        for key, value in list(resource.get("inputs", {}).items()):
            if key in dependencies:
                resource["inputs"][key] = substitute(value, key, dependencies[key])
    return plan, chosen


def recorded_names(root: Path, stack: str) -> dict[str, str]:
    """urn -> name of the autonamed resources of the last rehearsal of `stack` (empty: none recorded)."""
    path = record_path(root, stack)
    try:
        document = json.loads(path.read_text())
        resources = document["deployment"]["resources"]
        urns = _engine_urns(resources)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise PlanValueError(f"{path}: not a rehearsal record (delete it; `pubsubguard apply --emulator` writes it again)") from None
    return {urns[r["urn"]]: r["outputs"]["name"] for r in resources
            if r.get("type") in _NAMED and isinstance(r.get("outputs"), dict) and r["outputs"].get("name")}


def _engine_urns(resources: list[dict]) -> dict[str, str]:
    """urn -> the engine's URN of each recorded resource. A record written before the plan gave the engine's
    URNs holds the SDK mocks' form (`pulumi:pulumi:Stack$` before a top-level type, only the parent's last
    type before a child's); rebuilt from the record's parents, its names stay the resources' names."""
    from pubsubguard.core.recorder import make_urn

    if not any(f"::{state.STACK_TYPE}$" in r["urn"] for r in resources):  # the engine's form never has it
        return {r["urn"]: r["urn"] for r in resources}
    by_urn = {r["urn"]: r for r in resources}
    rebuilt: dict[str, str] = {}

    def engine_urn(urn: str) -> str:
        if urn not in rebuilt:
            resource = by_urn.get(urn)
            if resource is None or resource["type"] == state.STACK_TYPE:
                rebuilt[urn] = urn
            else:
                rebuilt[urn] = ""  # a parent cycle (a record edited by hand) ends as a top-level resource
                stack, project, _, name = urn.removeprefix("urn:pulumi:").split("::", 3)
                rebuilt[urn] = make_urn(stack, project, engine_urn(resource.get("parent") or ""), resource["type"], name)
        return rebuilt[urn]

    return {urn: engine_urn(urn) for urn in by_urn}


def for_apply(plan: dict, root: Path) -> tuple[dict, dict[str, str], list[str]]:
    """The plan as the emulator rehearsal deploys it: recorded names kept, new autonames chosen, push
    settings unknown until deploy stood in (`stand_in_push`: where, the third item)."""
    if not needs_deploy(plan):
        return plan, {}, []
    resolved, chosen = resolve(plan, recorded_names(root, plan["stack"]), assign=True)
    return resolved, chosen, stand_in_push(resolved)


# --- The rehearsal's record ----------------------------------------------------------------------------
def state_document(plan: dict, time: str) -> dict:
    """The export `pulumi stack export` would write after deploying `plan` (names and references resolved):
    each custom resource's outputs are its inputs with its id, project and name."""
    project = plan["gcp_project"]
    resources = []
    stack_urn = f"urn:pulumi:{plan['stack']}::{plan['project']}::{state.STACK_TYPE}::{plan['project']}-{plan['stack']}"
    for record in plan["resources"]:
        if record["type"] == state.STACK_TYPE:
            stack_urn = record["urn"]
    resources.append({"urn": stack_urn, "custom": False, "type": state.STACK_TYPE, "outputs": {}})
    for record in plan["resources"]:
        if record["type"] == state.STACK_TYPE:
            continue
        entry = {"urn": record["urn"], "custom": bool(record.get("custom")), "type": record["type"],
                 "parent": record.get("parent") or stack_urn, "dependencies": record.get("dependencies") or [],
                 "propertyDependencies": record.get("property_dependencies") or {}}
        if record.get("custom"):
            inputs = dict(record.get("inputs") or {})
            outputs = dict(inputs)
            if record["type"] in _NAMED:
                outputs.setdefault("project", project)
                path = (topic_path if record["type"] == facts.TOPIC else subscription_path)(outputs["project"], inputs["name"])
                outputs.update(id=path, effectiveLabels=dict(inputs.get("labels") or {}))
                entry["id"] = path
            else:
                entry["id"] = record.get("id") or record["urn"].rsplit("::", 1)[-1]
            entry.update(inputs=inputs, outputs=outputs)
        resources.append(entry)
    return {"version": state.DEPLOYMENT_VERSION,
            "deployment": {"manifest": {"time": time, "magic": "", "version": "pubsubguard rehearsal"},
                           "secrets_providers": {"type": "passphrase"}, "resources": resources}}


def record(plan: dict, root: Path) -> Path:
    """Write the rehearsal of `plan` (names resolved) as the state a deploy would have left."""
    path = record_path(root, plan["stack"])
    path.parent.mkdir(parents=True, exist_ok=True)
    time = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(json.dumps(state_document(plan, time), indent=4, sort_keys=True) + "\n")
    staged.replace(path)
    return path


def for_verify(plan: dict, root: Path, target: str, where: str) -> tuple[dict, str | None, list[str]]:
    """(the plan with the names the emulator rehearsal recorded, the record's path or None, where push
    settings unknown until deploy were stood in: on the emulator only, as `for_apply` stood them in). A plan
    whose names a deploy decides cannot be verified without them: PlanValueError naming what to do."""
    if not needs_deploy(plan):
        return plan, None, []
    path = record_path(root, plan["stack"])
    names = recorded_names(root, plan["stack"]) if target == "emulator" else {}
    resolved, _ = resolve(plan, names, assign=False)
    stood = stand_in_push(resolved) if target == "emulator" else []
    missing = [r["name"] for r in autonamed(resolved)]
    if missing:
        how = ("rehearse it first (`pubsubguard apply --emulator` with the same plan or stack records the "
               f"names in {path}), or verify" if target == "emulator" else "verify")
        raise PlanValueError(
            f"{where}: {', '.join(sorted(missing))}: name chosen at deploy (autonamed); {how} the deployed stack "
            "with --state (`pulumi stack export --file state.json`)")
    return resolved, str(path) if names else None, stood
