"""One name per subscription field (issue 66): the twin the probe's tasks are handed is `TwinSpec`, a frozen value read
by its fields' names, not a dict built by hand with names of its own (`"ordered"` for `ordering`, a `dead_lettering`
key beside the dead-letter topic); `ack_deadline_s` is the deadline in force from the estate to the kernel (the
declared model's optional one is `declared_ack_deadline_s`; `effective_ack_deadline_s` is gone). The user-facing
names stay where they are mapped, once each: the estate's `ack_deadline_seconds` and the readback's (the config
check's) in `Subscription.settings`, the evidence's columns in `evidence/records.py`. A source line that reads a twin
by key again, or brings an old alias back, fails here, naming the file and line."""

from __future__ import annotations

import pickle
import re

from support import ROOT

SOURCES = [p for d in ("pubsubguard", "validation") for p in sorted((ROOT / d).rglob("*.py"))]

# a twin read by key (`twin["path"]`, `t.get("ordered")`, `by_path[path]["declared_name"]`), or the twin's old aliases
TWIN_BY_KEY = re.compile(r"""\b(twin|t|by_path\[\w+\]|declared\[\w+\])(\[|\.get\()["'](path|declared_name|ack_deadline_s|"""
                         r"""retry_max_backoff_s|consumer_endpoint|dead_lettering|ordered)["']""")
OLD_ALIASES = re.compile(r"""["'](ordered|dead_lettering)["']\s*[:\]]|\.get\(["'](ordered|dead_lettering)["']\)"""
                         r"""|\beffective_ack_deadline_s\b"""
                         # "drain" alone is the end phase: a dead-letter drain is never called a drain in code
                         r"""|\b(t|twin|spec)\.drain\b|\.drains\b|\bdrain=(True|False)""")


def _offending(pattern: re.Pattern) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for path in SOURCES for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_no_source_reads_a_twin_by_key():
    assert _offending(TWIN_BY_KEY) == []


def test_the_twin_fields_old_aliases_are_gone():
    assert _offending(OLD_ALIASES) == []


def test_the_scan_sees_what_it_forbids(tmp_path):
    """The patterns match the forms they were written against (a scan that matches nothing proves nothing)."""
    assert TWIN_BY_KEY.search('if twin.get("ordered"):') and TWIN_BY_KEY.search('t["declared_name"] for t in twins')
    assert OLD_ALIASES.search('{"path": t.path, "ordered": t.ordering}')
    assert OLD_ALIASES.search("int(target.effective_ack_deadline_s)") and OLD_ALIASES.search("if not t.drain and")
    assert OLD_ALIASES.search("stack.drains == {}") and not OLD_ALIASES.search("self.drain = {}")
    assert not TWIN_BY_KEY.search('t["name"] for t in self.topics') and not OLD_ALIASES.search("twin.ordering")


def test_the_twin_a_task_is_handed_is_a_frozen_value_that_survives_pickling():
    """What the driver hands a Spark task is pickled to it: the same value arrives, its derived fields with it."""
    import dataclasses

    import pytest

    from pubsubguard.validation.probe.twins import TwinSpec

    twin = TwinSpec("projects/p/subscriptions/s-probe-1", "projects/p/topics/t", "s", ordering=True,
                    dead_letter_topic_path="projects/p/topics/t-dlq", max_delivery_attempts=5)
    arrived = pickle.loads(pickle.dumps(twin))
    assert arrived == twin and arrived.ordering and arrived.dead_lettering
    assert not TwinSpec("p/d", "p/dl", "d", is_dead_letter_drain=True).dead_lettering
    with pytest.raises(dataclasses.FrozenInstanceError):
        twin.ack_deadline_s = 1  # type: ignore[misc]


def test_ack_deadline_s_is_the_deadline_in_force_and_only_a_declared_one_is_compared():
    from pubsubguard.core import declared
    from pubsubguard.policies import pubsub_facts as facts

    def subscription(deadline):
        return declared.Subscription(
            name="s", path="projects/p/subscriptions/s", project="p", topic="t", topic_path="projects/p/topics/t",
            delivery_type=declared.PULL, ordering=False, exactly_once=False, declared_ack_deadline_s=deadline,
            retention_s=None, retain_acked_messages=False, filter=None, labels={}, dead_letter_topic_path=None,
            max_delivery_attempts=None, retry_declared=False, retry_min_backoff_s=None, retry_max_backoff_s=None,
            expiration_ttl=None)

    left, set_ = subscription(None), subscription(45)
    assert (left.ack_deadline_s, set_.ack_deadline_s) == (facts.ACK_DEADLINE_DEFAULT_S, 45)
    assert "ack_deadline_seconds" not in left.settings() and set_.settings()["ack_deadline_seconds"] == 45
