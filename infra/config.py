"""Read the stack's config once and validate it into the estate model."""

from __future__ import annotations

import json

import pulumi
import pulumi_gcp as gcp
from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.infra.estate import SECRET_MESSAGE, EstateSpec, EstateError, is_secret, load_spec

NAMESPACE = "pubsubguard"


def read_estate() -> EstateSpec:
    """The stack's estate, or a pulumi.RunError (no traceback) naming the stack file and field."""
    source = f"Pulumi.{pulumi.get_stack()}.yaml"
    config = pulumi.Config(NAMESPACE)
    try:
        raw = config.get_object("estate")
    except Exception as err:  # the config value is not JSON/YAML-shaped
        raise pulumi.RunError(f"{source}: {NAMESPACE}:estate: expected a mapping with 'topics' ({err})") from None
    if raw is None:
        raise pulumi.RunError(f"{source}: {NAMESPACE}:estate: required config key is missing (see README, 'The estate')")
    if is_secret(raw):
        raise pulumi.RunError(f"{source}: {NAMESPACE}:estate: {SECRET_MESSAGE}")
    try:
        estate = load_spec(raw, source, prefix=f"{NAMESPACE}:estate")
    except EstateError as err:
        raise pulumi.RunError(str(err)) from None
    if not estate.topics:
        pulumi.log.warn(f"{source}: {NAMESPACE}:estate.topics: the estate declares no topics; nothing is created")
    return estate


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def service_agent() -> pulumi.Input[str]:
    """The Pub/Sub service agent: from `pubsubguard:projectNumber`, else the getProject invoke."""
    number = pulumi.Config(NAMESPACE).get("projectNumber")
    if number and is_secret(_json(number) if number.startswith("{") else number):
        raise pulumi.RunError(f"Pulumi.{pulumi.get_stack()}.yaml: {NAMESPACE}:projectNumber: {SECRET_MESSAGE}")
    if number:
        if not number.isdigit():
            raise pulumi.RunError(
                f"Pulumi.{pulumi.get_stack()}.yaml: {NAMESPACE}:projectNumber: expected digits, got {number!r}"
            )
        return facts.pubsub_service_agent(number)
    return gcp.organizations.get_project_output().number.apply(facts.pubsub_service_agent)
