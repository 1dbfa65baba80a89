"""The SDK policies of the pack (needs pulumi_policy: runs in the pack's own virtualenv)."""

from __future__ import annotations

from pubsub_rules.catalog import PACK_DESCRIPTION, PACK_NAME, RULES


def policies():
    return [rule.policy() for rule in RULES]


def build_pack():
    """Start the pack's Analyzer server: prints its port and blocks (what the Pulumi CLI runs)."""
    from pulumi_policy import EnforcementLevel, PolicyPack

    return PolicyPack(
        name=PACK_NAME,
        description=PACK_DESCRIPTION,
        enforcement_level=EnforcementLevel.ADVISORY,
        policies=policies(),
    )
