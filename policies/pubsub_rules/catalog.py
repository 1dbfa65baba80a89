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
a test keeps this file and the code in step. Facts are those of `docs/pubsub-facts.md`.

{counts}

The pack judges raw pulumi-gcp resources, so it works on any organisation's Pulumi program, in
`pulumi preview --policy-pack policies` and offline with `pubsubguard check`.

**Values unknown at preview.** A value the engine does not know before deploying (an autonamed
resource's `name`, a new resource's `id`, outputs of other resources such as a Cloud Run URL, results of
`apply`, stack references, data sources without a given result) reaches the pack as the engine's
unknown sentinel. Every rule reads properties through `pubsub_rules.values`: an unknown, a missing value
or a value of the wrong type is never judged as a violation (the provider rejects wrong types itself).
Where the value's **provenance** decides (the resources a property depends on, which the engine sends
with `AnalyzeStack`), rules use it: two references to two different Topic resources are two topics; a
member computed only from service accounts the stack creates is never the Pub/Sub service agent; a push
endpoint computed only from Cloud Run services' URLs is HTTPS by the provider's contract
(`https://SERVICE-HASH-REGION.a.run.app`, https://cloud.google.com/run/docs/triggering/https-request).
**Cannot judge** is exact: a rule that applies to a resource but cannot decide says so the way Pulumi's
policy SDK does for any policy that meets an unknown during preview, as an advisory "can't run policy
'<rule>' … during preview: string value at .<properties> can't be known during preview" (a stack rule
names each resource: `<urn>: <properties>`), so the real CLI shows the same. `pubsubguard check` turns
those lines into its "Not judged" list (a row per rule and resource in the text format, JSON `unjudged` and
SARIF `note` results, each with the unknown inputs that blocked it and where they come from); a rule that
fired or does not apply is never listed.
By default, as in Pulumi, not judged is advisory; `pubsubguard check --unknowns fail` fails the check on
every mandatory rule that could not decide (a closed gate). Secrets (`pulumi.secret`, `secure:` config)
reach the pack as the engine passes them: their value where the offline plan knows it, unknown where it
cannot decrypt it.

**References.** Stack rules resolve references between resources by value (`projects/P/topics/N`, or `N`
in the referring resource's project) or, when the value is unknown, by the property's dependencies that
the engine sends with `AnalyzeStack`. Identity is (project, name) as Google sees it, the project being the
resource's `project` or, when it sets none, its provider's (`gcp:project` for the default provider). A
dead-letter topic outside the stack (a path into another project or stack) is "cannot judge" unless
`dead-letter-topic-has-subscription` is configured with `allowExternalTopics: false`.

**Data sources (invokes) offline.** `pubsubguard check` runs the program with no cloud access: an invoke's
result is unknown (and so is everything built from it) unless given with `--invoke-results FILE`
(`[{{"token": "gcp:organizations/getProject:getProject", "args": {{}}, "result": {{"number": "123"}}}}]`,
JSON or YAML; `args` omitted matches any arguments). `gcp.organizations.getIAMPolicy`, a pure function of
its arguments, is evaluated locally. A call to a component's method (`Call`) is answered the same way: its
result is unknown unless given there under the method's token. The output names every invoke and call whose
result was unknown. Given
`getProject` numbers also tell `dead-letter-service-agent-iam` which service agent belongs to which project.

**Exit codes of `pubsubguard check`.** 0 passed (advisories may be printed), 1 rejected by a mandatory
rule, 2 the program, the stack file, the plan or the command line is broken: one line with the program's
own error and its file and line (`the program failed: __main__.py:9: ValueError: …`), never a traceback;
with `--format json` the document then holds `"passed": null` and an `error` object.

**Region-pinning contract (advisory by default).** A topic declares the one region its publishers use
with the label `{publisher}`; a subscription declares the one region its consumers use with the label
`{consumer}` (value: a region such as `us-east1`; clients then use `REGION-pubsub.googleapis.com:443`).
Programs that do not adopt these labels get an advisory ("cannot verify region pinning: declare label
…"), never a rejection; the mandatory rules fire only where the labels declare a violation (a value that
is not one region, or a region the topic's storage policy excludes).

**Levels.** Each rule's level is a default; override it in a policy config file, as for
`pulumi preview --policy-pack-config` or `pubsubguard check --policy-config`:
`{{"topic-kms-key": "disabled", "exactly-once-ack-deadline": {{"enforcementLevel": "mandatory", "minimumSeconds": 120}}}}`.

| rule | kind | level | types |
| --- | --- | --- | --- |
"""


def counts() -> str:
    """The pack's rules counted, the one place a count of them is written (the READMEs point here)."""
    mandatory = [rule for rule in RULES if rule.level == MANDATORY]
    stack = sum(1 for rule in mandatory if rule.stack)
    return (f"**{len(RULES)} rules**: {len(mandatory)} mandatory ({len(mandatory) - stack} per resource, {stack} over "
            f"the whole stack) and {len(RULES) - len(mandatory)} advisory.")


def markdown() -> str:
    import pubsub_facts as facts

    text = HEADER.format(pack=PACK_NAME, publisher=facts.PUBLISHER_REGION_LABEL, consumer=facts.CONSUMER_REGION_LABEL,
                         counts=counts())
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
