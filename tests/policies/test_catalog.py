"""The rule reference in docs/policies.md is generated from the rules; it must not drift."""

from __future__ import annotations

from pathlib import Path

from pubsub_rules import catalog, pack

DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"


def test_docs_match_the_rules():
    assert DOC.read_text() == catalog.markdown(), (
        "docs/policies.md is stale: run `cd policies && venv/bin/python -m pubsub_rules.catalog > ../docs/policies.md`"
    )


def test_pack_policies_carry_levels_and_schemas():
    from pulumi_policy import EnforcementLevel, StackValidationPolicy

    built = {p.name: p for p in pack.policies()}
    assert list(built) == [r.name for r in catalog.RULES]
    for rule in catalog.RULES:
        policy = built[rule.name]
        assert policy.enforcement_level == EnforcementLevel(rule.level)
        assert isinstance(policy, StackValidationPolicy) == rule.stack
        if rule.config_schema:
            assert policy.config_schema.properties == dict(rule.config_schema)
