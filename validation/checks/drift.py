"""Declared vs. deployed before the probe: every difference the target holds is a `config_drift`
finding, on the declared subscription it concerns (a topic's difference on each of its subscriptions;
plumbing such as dead-letter topics and drains on its own name)."""

from __future__ import annotations

import json

from pubsubguard.core.declared import Estate, short_name
from pubsubguard.core.settings import Setting

CONFIG_DRIFT = "config_drift"
# Settings whose drift breaks a declared guarantee (error); any other drift is advisory.
GUARANTEE_OF_SETTING = {
    Setting.ORDERING: "ordering",
    Setting.EXACTLY_ONCE: "exactly_once",
    Setting.ACK_DEADLINE_S: "exactly_once",
    Setting.DEAD_LETTER_TOPIC: "dead_letter",
    Setting.MAX_DELIVERY_ATTEMPTS: "dead_letter",
    Setting.EXISTS: "completeness",
}


def config_drift(everything: Estate, estate: Estate, publisher=None, subscriber=None) -> list[dict]:
    """Every difference between the declared estate (`everything`: plumbing included) and what the
    target holds, as `config_drift` findings on the subscriptions of `estate` (as the stack declares it)."""
    from pubsubguard.core import readback

    declared = everything.settings()
    actual = readback.actual(declared, publisher, subscriber)
    subs_of_topic: dict[str, list[str]] = {}
    for target in estate.subscriptions.values():
        subs_of_topic.setdefault(target.topic_path, []).append(target.name)
    by_path = {t.path: t.name for t in estate.subscriptions.values()}
    findings = []
    for diff in readback.differences(declared, actual):
        owners = [by_path[diff.path]] if diff.path in by_path else subs_of_topic.get(diff.path, [])
        if not owners:
            owners = [short_name(diff.path)]  # plumbing (dead-letter topics and drains): reported on its own name
        guarantee = GUARANTEE_OF_SETTING.get(diff.setting, "config")
        severity = "error" if guarantee != "config" else "advisory"
        for owner in owners:
            findings.append({
                "subscription": owner, "kind": CONFIG_DRIFT, "guarantee": guarantee, "severity": severity,
                "form": diff.kind,
                "key": None, "seq": None, "message_id": None,
                "drift": {"path": diff.path, "setting": diff.setting, "declared": diff.declared, "actual": diff.actual},
                "evidence": json.dumps([{"path": diff.path, "setting": diff.setting,
                                         "declared": diff.declared, "actual": diff.actual}], default=str),
            })
    return findings


def missing_subscriptions(drift: list[dict]) -> list[str]:
    """The subscriptions the drift findings say do not exist on the target (form `missing`)."""
    return sorted({f["subscription"] for f in drift if f["form"] == "missing"})
