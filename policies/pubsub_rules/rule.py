"""One `Rule` per policy: its name, level, the Pub/Sub fact it enforces, what it does with unknowns,
and a check over plain data. `Rule.policy()` turns it into the SDK's Resource- or
StackValidationPolicy; the checks themselves never see the SDK, so they are plain functions to test.

A resource check is `check(resource, config) -> iterable of messages`; a stack check is
`check(stack, config) -> iterable of (urn, message)`. `config` holds the rule's configured properties
with the schema's defaults filled in.

**Cannot judge.** A check may also yield `Undecided(paths)` (a stack check: `(urn, Undecided(paths))`)
where the rule applies to a resource but values unknown until deploy keep it from deciding. A rule with
`exact_unknowns=False` (the default) is treated as undecided on a resource of its types that it did not
report and one of whose `reads` is unknown. The pack reports them the way the policy SDK reports a
policy that meets an unknown during preview, so the same text reaches the Pulumi CLI: the SDK's
`UnknownValueError`, an advisory "can't run policy '<rule>' from policy pack '<pack>' during preview:
string value at .<what> can't be known during preview", where <what> lists the properties (for a stack
rule, `<urn>: <properties>` per resource, separated by `; `). `pubsubguard check` reads those lines back
into its exact "not judged" list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from pubsub_facts.levels import EnforcementLevel
from pubsub_rules.model import Resource, Stack, from_policy_resource, provider_project, reads_unknown
from pubsub_rules.values import once_in_request, partial_props, plain_props

# the two levels a rule is declared with, as `@rule(..., MANDATORY, ...)` names them
MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY
UNDECIDED_SEPARATOR = "; "


@dataclass(frozen=True)
class Undecided:
    """The rule applies but cannot decide: `paths` are the unknown properties that blocked it."""
    paths: tuple[str, ...]


def undecided_text(entries: list[tuple[str, tuple[str, ...]]]) -> str:
    """What a cannot-judge line carries: `<properties>` (resource rule, urn "") or `<urn>: <properties>`."""
    return UNDECIDED_SEPARATOR.join(f"{urn}: {', '.join(paths)}" if urn else ", ".join(paths) for urn, paths in entries)


@dataclass(frozen=True)
class Rule:
    name: str
    description: str  # "Requires…" / "Prohibits…"
    level: EnforcementLevel  # MANDATORY or ADVISORY: the default, overridable by the pack's config
    fact: str  # the Pub/Sub fact the rule enforces (docs/pubsub-facts.md)
    unknowns: str  # what the rule does with values unknown at preview time
    check: Callable[..., Iterable[Any]]
    types: tuple[str, ...] = ()  # the type tokens judged (for stack rules: whose properties it reads)
    stack: bool = False
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reads: tuple[str, ...] = ()  # dotted properties of `types` the judgement depends on
    exact_unknowns: bool = False  # the check yields Undecided itself (else: `reads` unknown and not reported)

    def defaults(self) -> dict[str, Any]:
        return {key: spec["default"] for key, spec in self.config_schema.items() if "default" in spec}

    def settings(self, configured: Mapping[str, Any] | None) -> dict[str, Any]:
        return {**self.defaults(), **dict(configured or {})}

    def judge_resource(self, resource: Resource, configured: Mapping[str, Any] | None = None
                       ) -> tuple[list[str], tuple[str, ...]]:
        """(messages, the unknown properties that kept the rule from deciding: empty when it decided)."""
        if resource.type not in self.types:
            return [], ()
        messages, undecided = [], []
        for item in self.check(resource, self.settings(configured)):
            if isinstance(item, Undecided):
                undecided += [p for p in item.paths if p not in undecided]
            else:
                messages.append(item)
        if not messages and not undecided and not self.exact_unknowns:
            undecided = self.unjudged(resource)
        return messages, tuple(undecided) if not messages else ()

    def judge_stack(self, resources: list[Resource] | Stack, configured: Mapping[str, Any] | None = None
                    ) -> tuple[list[tuple[str, str]], list[tuple[str, tuple[str, ...]]]]:
        """(violations as (urn, message), undecided as (urn, unknown properties)). `resources` may be a
        `Stack` already (the stack policies of one request share one; rules only read it)."""
        stack = resources if isinstance(resources, Stack) else Stack(resources)
        resources = stack.resources
        violations, undecided = [], {}
        for urn, item in self.check(stack, self.settings(configured)):
            if isinstance(item, Undecided):
                undecided.setdefault(urn, [])
                undecided[urn] += [p for p in item.paths if p not in undecided[urn]]
            else:
                violations.append((urn, item))
        reported = {urn for urn, _ in violations}
        if not self.exact_unknowns:
            for resource in resources:
                paths = self.unjudged(resource)
                if paths and resource.urn not in reported and resource.urn not in undecided:
                    undecided[resource.urn] = paths
        return violations, [(urn, tuple(paths)) for urn, paths in undecided.items() if urn not in reported]

    def unjudged(self, resource: Resource) -> list[str]:
        """The properties this rule reads that are unknown on `resource`."""
        if resource.type not in self.types:
            return []
        return [path for path in self.reads if reads_unknown(resource.props, path)]

    @property
    def remediation(self) -> str:
        """The fix and the fact behind it, as the pack tells a tool that shows the rule (code scanning's
        rule help): the rule's own words, so they hold wherever the report is read."""
        return f"{self.description} Pub/Sub fact: {self.fact}"

    def policy(self):
        """The SDK policy object (imports pulumi_policy: only the pack's virtualenv has it)."""
        from pulumi_policy import (
            EnforcementLevel as SdkEnforcementLevel,
            PolicyConfigSchema,
            ResourceValidationPolicy,
            StackValidationPolicy,
        )

        level = SdkEnforcementLevel(EnforcementLevel(self.level).value)
        schema = PolicyConfigSchema(properties=dict(self.config_schema)) if self.config_schema else None
        if self.stack:

            def validate_stack(args, report_violation) -> None:
                stack = once_in_request("stack", lambda: Stack([from_policy_resource(r) for r in args.resources]))
                violations, undecided = self.judge_stack(stack, args.get_config())
                for urn, message in violations:
                    report_violation(message, urn)
                if undecided:
                    _cannot_judge(undecided)

            return StackValidationPolicy(
                name=self.name, description=self.description, validate=validate_stack,
                enforcement_level=level, config_schema=schema, remediation_steps=self.remediation,
            )

        def validate_resource(args, report_violation) -> None:
            if args.resource_type not in self.types:
                return
            resource = Resource(args.resource_type, args.name, args.urn, plain_props(args.props),
                                provider_project=provider_project(getattr(args, "provider", None)),
                                partial=partial_props(args.props))
            messages, undecided = self.judge_resource(resource, args.get_config())
            for message in messages:
                report_violation(message, None)
            if undecided:
                _cannot_judge([("", undecided)])

        return ResourceValidationPolicy(
            name=self.name, description=self.description, validate=validate_resource,
            enforcement_level=level, config_schema=schema, remediation_steps=self.remediation,
        )


class Rules:
    """A rule module's rules, each registered where its check is written: `@rule("name", "Requires…",
    MANDATORY, "the fact", reads=(...))` above `def _check(...)` makes the `Rule` of that check (the
    module's defaults, such as `types`, filled in) and leaves the function as it is. The module exports
    `RULES = rule.all`; the catalog (`pubsub_rules.catalog`) collects every module's."""

    def __init__(self, **defaults: Any):
        self.defaults = defaults
        self.all: list[Rule] = []

    def __call__(self, name: str, description: str, level: EnforcementLevel, fact: str, **fields: Any):
        def register(check: Callable[..., Iterable[Any]]) -> Callable[..., Iterable[Any]]:
            self.all.append(Rule(name=name, description=description, level=level, fact=fact, check=check,
                                 **{**self.defaults, **fields}))
            return check

        return register


def _cannot_judge(entries: list[tuple[str, tuple[str, ...]]]):
    """Raise the policy SDK's own unknown-value error: the SDK turns it into the advisory "can't run
    policy ... during preview" line it gives any policy that meets an unknown (see module doc)."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

    raise UnknownValueError(UNKNOWN_STRING_VALUE, [undecided_text(entries)])
