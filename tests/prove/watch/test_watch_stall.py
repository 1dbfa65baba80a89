"""A finding on one subscription while an ordered dead-lettering one may be stalled (issue 63: a 2-hour watch on the
emulator; after a `kill_stream` of orders-ordered its messages, sent to the dead stream, expired until their 5th
attempt, and from then on the emulator served every other subscription only every 10 s: the dead-letter drain, whose
ack deadline is 10 s, fell behind and 132 of its messages were called lost, unexplained).

The scenario that measures it disturbs the target, so a watch runs it once, at its first start, before its probe
begins, and keeps its result for its life (conformance-start.json); here on the real emulator."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.emulator

STALL = "ordered-dead-letter-spares-other-subscriptions"


def test_a_stall_begins_when_a_reset_ordered_subscriptions_messages_reach_their_last_attempt():
    from pubsubguard.validation.watch.conformance import stall_onsets

    assert stall_onsets({"ordered-dl": 150.0, "other-dl": 60.0}, {"ordered-dl": [2_000_000, 1_000_000], "other-dl": []}) \
        == {"ordered-dl": 151_000_000}


def test_a_findings_causes_are_its_own_streams_resets_and_another_subscriptions_stall():
    """FindingCauses hands the scenarios' explainer what the watch knows: a reset of the finding's own subscription
    (a crashed watch's twins, or a kill_stream/partition the schedule applied) and whether another ordered
    dead-lettering subscription's stall had begun when the finding was decided."""
    from types import SimpleNamespace

    from pubsubguard.validation.watch.conformance import FindingCauses

    class Asked:  # the explainer's answer is what it was asked: (reset, stalled)
        def explain(self, finding, reset, stalled=False):
            return [(reset, stalled)]

    def sub(name, ordering, dead_lettering):
        return SimpleNamespace(name=name, ordering=ordering, dead_lettering=dead_lettering, max_delivery_attempts=5,
                               ack_deadline_s=10.0)

    subs = [sub("ordered-dl", True, True), sub("plain", False, False)]
    planted: list[dict] = []
    causes = FindingCauses(Asked(), lambda: planted, subs, started_us=0)
    plain, ordered = {"subscription": "plain"}, {"subscription": "ordered-dl"}
    assert causes(plain) == [(False, False)]  # nothing reset: no stall either
    planted.append({"kind": "kill_stream", "subscription": "ordered-dl", "time_us": 0, "detail": "applied"})
    assert causes(plain) == [(False, True)]  # 5 x 10 s after the reset at 0: long past
    assert causes(ordered) == [(True, False)]  # its own reset; its own stall is not another's
    planted[0] = {"kind": "kill_stream", "subscription": "ordered-dl", "time_us": 2 ** 62, "detail": "applied"}
    assert causes(plain) == [(False, False)]  # the stall's onset is still to come
    planted.clear()
    causes.reset.add("plain")  # a crashed watch's twin of plain, reused
    assert causes(plain) == [(True, False)]
    assert FindingCauses(None, lambda: planted, subs, started_us=0)(plain) == []  # no scenarios: no explanation


def test_the_stall_scenario_runs_once_before_the_probe_and_explains_other_subscriptions(emulator, tmp_path):
    from pubsubguard.validation.watch.conformance import WatchConformance

    lines: list[str] = []

    def watch_conformance():
        return WatchConformance("emulator", "pubsubguard-dev", None, emulator.host, tmp_path, None,
                                frozenset({"ordered-dl"}), show=lines.append, stall_possible=True)

    first = watch_conformance().start(None)
    try:
        assert first.first_done.wait(300), lines
    finally:
        first.stop()
    kept = json.loads((tmp_path / "conformance-start.json").read_text())
    assert [s["id"] for s in kept["scenarios"]] == [STALL]
    assert kept["scenarios"][0]["result"] == "violated", kept  # this emulator's documented deviation (docs/emulator.md)
    said = "\n".join(lines)
    assert f"{STALL} runs once now, before the probe begins" in said and "not beside a watch" not in said, said

    lost = {"subscription": "plain", "kind": "lost", "form": "past_horizon", "severity": "error"}
    late = {**lost, "kind": "late_delivery", "form": "after_lost", "severity": "advisory"}
    assert first.explain(lost, reset=False, stalled=True) == [STALL]
    assert first.explain(late, reset=False, stalled=True) == [STALL]
    assert first.explain(lost, reset=False, stalled=False) == []  # no stall: nothing explains it
    # a reset of its own stream and a stall elsewhere: both causes said
    assert STALL in first.explain(lost, reset=True, stalled=True) and len(first.explain(lost, reset=True, stalled=True)) > 1
    # a kind the stall cannot cause
    assert STALL not in first.explain({**lost, "kind": "duplicate_after_ack", "form": None}, reset=False, stalled=True)

    # a restart on the same --out: the first start's result stands, nothing disturbs the target again
    lines.clear()
    again = watch_conformance()
    again._at_start()
    assert again.at_start == {STALL: "violated"}
    assert any("at this --out's first start" in line for line in lines) and not any("runs once now" in l for l in lines)
