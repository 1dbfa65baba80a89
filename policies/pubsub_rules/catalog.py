"""Every rule of the pack, in report order, and the rule reference (`docs/policies.md`) made from
them: `python -m pubsub_rules.catalog > docs/policies.md` (run from `policies/`)."""

from __future__ import annotations

import sys

from pubsub_rules import resources, stack
from pubsub_rules.rule import MANDATORY, Rule

PACK_NAME = "pubsubguard-pubsub"
PACK_DESCRIPTION = (
    "Pub/Sub subscription semantics for any Pulumi program using pulumi-gcp: exactly-once, ordering, "
    "dead-lettering, ranges, names, public IAM, region pinning."
)

RULES: list[Rule] = sorted(resources.RULES + stack.RULES, key=lambda r: (r.level != MANDATORY, r.stack, r.name))
BY_NAME = {rule.name: rule for rule in RULES}
assert len(BY_NAME) == len(RULES), "rule names must be unique"

HEADER = """# Policy reference: the `{pack}` pack

Generated from `policies/pubsub_rules/` by `python -m pubsub_rules.catalog` (run in `policies/`);
a test keeps this file and the code in step. Facts are those of `shared/PUBSUB_FACTS.md`.

Every rule reads properties through `pubsub_rules.values`: a value unknown at preview time, a missing
value, or a value of the wrong type is "cannot judge" and produces no violation (the provider rejects
wrong types itself). Stack rules resolve references between resources by value
(`projects/P/topics/N` or `N` against a topic's `name`) or, when the value is unknown, by the
property's dependencies that the engine sends with `AnalyzeStack`.

**Region-pinning contract.** A topic declares the one region its publishers use with the label
`{publisher}`; a subscription declares the one region its consumers use with the label `{consumer}`
(value: a region such as `us-east1`; clients then use `REGION-pubsub.googleapis.com:443`).

**Levels.** Each rule's level is a default; override it in a policy config file, as for
`pulumi preview --policy-pack-config` or `pubsubguard check --policy-config`:
`{{"topic-kms-key": "disabled", "exactly-once-ack-deadline": {{"enforcementLevel": "mandatory", "minimumSeconds": 120}}}}`.

| rule | kind | level | types |
| --- | --- | --- | --- |
"""


def markdown() -> str:
    from pubsub_rules import facts

    text = HEADER.format(pack=PACK_NAME, publisher=facts.PUBLISHER_REGION_LABEL, consumer=facts.CONSUMER_REGION_LABEL)
    for rule in RULES:
        types = "whole stack" if rule.stack else ", ".join(f"`{t.split(':')[-1]}`" for t in rule.types)
        text += f"| [`{rule.name}`](#{rule.name}) | {'stack' if rule.stack else 'resource'} | {rule.level} | {types} |\n"
    for rule in RULES:
        text += f"\n## `{rule.name}`\n\n{rule.description}\n\n"
        text += f"- **Level:** {rule.level}\n- **Pub/Sub fact:** {rule.fact}\n- **Unknowns:** {rule.unknowns}\n"
        for key, spec in rule.config_schema.items():
            text += f"- **Config `{key}`** ({spec['type']}, default `{spec.get('default')}`): {spec.get('description', '')}\n"
    return text


if __name__ == "__main__":
    sys.stdout.write(markdown())
