"""One `Rule` per policy: its name, level, the Pub/Sub fact it enforces, what it does with unknowns,
and a check over plain data. `Rule.policy()` turns it into the SDK's Resource- or
StackValidationPolicy; the checks themselves never see the SDK, so they are plain functions to test.

A resource check is `check(resource, config) -> iterable of messages`; a stack check is
`check(stack, config) -> iterable of (urn, message)`. `config` holds the rule's configured properties
with the schema's defaults filled in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from pubsub_rules.model import Resource, Stack, from_policy_resource, provider_project, reads_unknown
from pubsub_rules.values import plain_props

MANDATORY = "mandatory"
ADVISORY = "advisory"


@dataclass(frozen=True)
class Rule:
    name: str
    description: str  # "Requires…" / "Prohibits…"
    level: str  # MANDATORY or ADVISORY: the default, overridable by the pack's config
    fact: str  # the Pub/Sub fact the rule enforces (docs/pubsub-facts.md)
    unknowns: str  # what the rule does with values unknown at preview time
    check: Callable[..., Iterable[Any]]
    types: tuple[str, ...] = ()  # the type tokens judged (for stack rules: whose properties it reads)
    stack: bool = False
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reads: tuple[str, ...] = ()  # dotted properties of `types` the judgement depends on

    def defaults(self) -> dict[str, Any]:
        return {key: spec["default"] for key, spec in self.config_schema.items() if "default" in spec}

    def settings(self, configured: Mapping[str, Any] | None) -> dict[str, Any]:
        return {**self.defaults(), **dict(configured or {})}

    def run_resource(self, resource: Resource, configured: Mapping[str, Any] | None = None) -> list[str]:
        if resource.type not in self.types:
            return []
        return list(self.check(resource, self.settings(configured)))

    def run_stack(self, resources: list[Resource], configured: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
        return list(self.check(Stack(resources), self.settings(configured)))

    def unjudged(self, resource: Resource) -> list[str]:
        """The properties this rule reads that are unknown on `resource` (it could not judge them)."""
        if resource.type not in self.types:
            return []
        return [path for path in self.reads if reads_unknown(resource.props, path)]

    def policy(self):
        """The SDK policy object (imports pulumi_policy: only the pack's virtualenv has it)."""
        from pulumi_policy import (
            EnforcementLevel,
            PolicyConfigSchema,
            ResourceValidationPolicy,
            StackValidationPolicy,
        )

        level = EnforcementLevel(self.level)
        schema = PolicyConfigSchema(properties=dict(self.config_schema)) if self.config_schema else None
        if self.stack:

            def validate_stack(args, report_violation) -> None:
                resources = [from_policy_resource(r) for r in args.resources]
                for urn, message in self.run_stack(resources, args.get_config()):
                    report_violation(message, urn)

            return StackValidationPolicy(
                name=self.name, description=self.description, validate=validate_stack,
                enforcement_level=level, config_schema=schema,
            )

        def validate_resource(args, report_violation) -> None:
            if args.resource_type not in self.types:
                return
            resource = Resource(args.resource_type, args.name, args.urn, plain_props(args.props),
                                provider_project=provider_project(getattr(args, "provider", None)))
            for message in self.run_resource(resource, args.get_config()):
                report_violation(message, None)

        return ResourceValidationPolicy(
            name=self.name, description=self.description, validate=validate_resource,
            enforcement_level=level, config_schema=schema,
        )
