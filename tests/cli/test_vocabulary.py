"""One name per subscription field (issue 66): the twin the probe's tasks are handed is `TwinSpec`, a frozen value read
by its fields' names, not a dict built by hand with names of its own (`"ordered"` for `ordering`, a `dead_lettering`
key beside the dead-letter topic); `ack_deadline_s` is the deadline in force from the estate to the kernel (the
declared model's optional one is `declared_ack_deadline_s`; `effective_ack_deadline_s` is gone). The user-facing
names stay where they are mapped, once each: the settings compared between a plan and a target (`ack_deadline_seconds`,
`retention_seconds`, ...: the readback's, a drift finding's, the report's) in `pubsubguard/core/settings.py`, the
evidence's columns in `evidence/records.py`. A source line that reads a twin by key again, brings an old alias back, or
spells a setting by hand outside its one module fails here, naming the file and line."""

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


def _offending(pattern: re.Pattern, sources=SOURCES) -> list[str]:
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}: {line.strip()}"
            for path in sources for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


# a task's spec read by key: the modules that build or read a subscriber task's `SubscriberSpec` (the publisher's spec
# is a dict of its own, read in probe/publisher.py)
SPEC_BY_KEY = re.compile(r"""\bspec(\[|\.get\()""")
SUBSCRIBER_SPEC_MODULES = [ROOT / "validation" / name for name in
                           ("probe/subscriber.py", "probe/push.py", "driver.py", "watch/runner.py")]


def _settings():
    from pubsubguard.core import settings

    return settings


def _setting_literal() -> re.Pattern:
    """A setting's name as a string literal, for the settings only the readback vocabulary spells: the others are
    words of other vocabularies too (a resource kind, the admin API's fields in a request and in the evidence, a
    guarantee's name), which a scan of lines cannot tell apart; `test_every_settings_table_uses_the_one_vocabulary`
    holds those."""
    setting = _settings().Setting
    shared = {setting.KIND, setting.TOPIC, setting.LABELS, setting.FILTER, setting.DELIVERY, setting.EXISTS,
              setting.ORDERING, setting.EXACTLY_ONCE, setting.ACK_DEADLINE_S, setting.RETAIN_ACKED_MESSAGES,
              setting.DEAD_LETTER_TOPIC, setting.MAX_DELIVERY_ATTEMPTS, setting.PUSH_ENDPOINT}
    only_ours = sorted(set(_settings().SUBSCRIPTION_SETTINGS + _settings().TOPIC_SETTINGS) - shared)
    return re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, only_ours)))


def test_no_source_reads_a_twin_by_key():
    assert _offending(TWIN_BY_KEY) == []


def test_the_twin_fields_old_aliases_are_gone():
    assert _offending(OLD_ALIASES) == []


def test_no_source_spells_a_setting_outside_its_one_module():
    assert _offending(_setting_literal(), [p for p in SOURCES if p != ROOT / "pubsubguard/core/settings.py"]) == []


def test_every_settings_table_uses_the_one_vocabulary():
    """What a plan declares, what a target holds, what apply updates, what drift grades and what a scenario explains
    are keyed by the names of `pubsubguard.core.settings`, and by nothing else: a new alias anywhere fails here."""
    from google.pubsub_v1 import types

    from pubsubguard.core import declared, readback
    from pubsubguard.validation.checks.drift import GUARANTEE_OF_SETTING
    from pubsubguard.validation.conformance.explains import EXPLAINS

    settings = _settings()
    topics, subscriptions = set(settings.TOPIC_SETTINGS), set(settings.SUBSCRIPTION_SETTINGS)
    assert set(readback.actual_topic(types.Topic(message_storage_policy={"allowed_persistence_regions": ["x"]}))) == topics
    assert set(readback.actual_subscription(types.Subscription())) == subscriptions
    topic = declared.Topic("t", "projects/p/topics/t", "p", {}, 60, ("europe-west1",), True, None)
    subscription = declared.Subscription(
        name="s", path="projects/p/subscriptions/s", project="p", topic="t", topic_path="projects/p/topics/t",
        delivery_type=declared.PUSH, ordering=True, exactly_once=True, declared_ack_deadline_s=30, retention_s=600,
        retain_acked_messages=True, filter="x", labels={}, dead_letter_topic_path="projects/p/topics/d",
        max_delivery_attempts=5, retry_declared=True, retry_min_backoff_s=1, retry_max_backoff_s=9,
        expiration_ttl="never", export_configs=(declared.BIGQUERY, declared.CLOUD_STORAGE))
    assert set(topic.settings()) == topics and set(subscription.settings()) == subscriptions
    assert set(settings.TOPIC_UPDATE_FIELDS) <= topics and set(settings.SUBSCRIPTION_UPDATE_FIELDS) <= subscriptions
    assert settings.FIXED_AT_CREATION <= subscriptions
    assert set(GUARANTEE_OF_SETTING) <= subscriptions | {settings.Setting.EXISTS}
    drift_forms = {form for governs in EXPLAINS.values() for kind, form in governs if kind == "config_drift"}
    assert drift_forms and drift_forms <= topics | subscriptions


def test_no_module_reads_a_subscriber_spec_by_key():
    assert _offending(SPEC_BY_KEY, SUBSCRIBER_SPEC_MODULES) == []


def test_the_spec_a_subscriber_task_is_handed_is_a_frozen_value_that_survives_pickling():
    """What the driver hands a subscriber task is pickled to it: the same value arrives, its twins and faults typed."""
    import dataclasses

    import pytest

    from pubsubguard.validation.probe.faults import Faults
    from pubsubguard.validation.probe.subscriber import SubscriberSpec
    from pubsubguard.validation.probe.twins import TwinSpec

    twin = TwinSpec("projects/p/subscriptions/s-probe-1", "projects/p/topics/t", "s", ordering=True)
    spec = SubscriberSpec("run", "sub-0", "/evidence", (twin,), {"s-probe-1": "s"}, Faults(expire=0.5, crash=1),
                          crash_after=2, end_time=1.0, endpoints={"pubsub.googleapis.com:443": "localhost:1"})
    arrived = pickle.loads(pickle.dumps(spec))
    assert arrived == spec and arrived.twins[0].ordering and arrived.faults.expire == 0.5 and arrived.crash_after == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.crash_after = None  # type: ignore[misc]


def test_the_scan_sees_what_it_forbids(tmp_path):
    """The patterns match the forms they were written against (a scan that matches nothing proves nothing)."""
    assert TWIN_BY_KEY.search('if twin.get("ordered"):') and TWIN_BY_KEY.search('t["declared_name"] for t in twins')
    assert OLD_ALIASES.search('{"path": t.path, "ordered": t.ordering}')
    assert OLD_ALIASES.search("int(target.effective_ack_deadline_s)") and OLD_ALIASES.search("if not t.drain and")
    assert OLD_ALIASES.search("stack.drains == {}") and not OLD_ALIASES.search("self.drain = {}")
    assert not TWIN_BY_KEY.search('t["name"] for t in self.topics') and not OLD_ALIASES.search("twin.ordering")
    setting = _setting_literal()
    assert setting.search('    "retention_seconds": ("message_retention_duration",),')
    assert setting.search("settings['kms_key'] = self.kms_key") and setting.search('("retry_max_backoff_s", 1)')
    assert not setting.search("Setting.RETENTION_S: self.retention_s") and not setting.search("twin.retry_max_backoff_s")
    assert SPEC_BY_KEY.search('batch = self.spec.get("crash_prefetch", 1)') and SPEC_BY_KEY.search('spec["twins"]')
    assert not SPEC_BY_KEY.search("self.spec.twins") and not SPEC_BY_KEY.search('twin_specs["x"]')
    planted = tmp_path / "planted.py"
    planted.write_text('x = 1\nGRADE = {"expiration_ttl": "config"}\n')
    assert _offending(setting, [planted]) == [f'{planted}:2: GRADE = {{"expiration_ttl": "config"}}']


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
