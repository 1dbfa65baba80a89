"""The observation a drain that ended unsettled leaves (validation/draining.py `DrainSteps._end_text`): why it
ended -- provably stuck, stopped when the ceiling passed, or the ceiling passed while some still moved -- with its
unsettled messages per subscription."""

from __future__ import annotations

from pubsubguard.validation.draining import STUCK_GRACE_S, DrainSteps


class _Tally:
    """What the sentence reads of an EvidenceTally: settled count and how unsettled deliveries ended."""

    def done(self) -> int:
        return 7

    def unsettled_outcomes(self, name: str) -> dict[str, int]:
        return {"ack: invalid_ack_id": 2} if name == "a" else {"no row yet": 1}


class _Clock:
    """What the sentence reads of a DrainClock: the ceiling and which subscriptions stopped."""

    ceiling = 120.0

    def stopped(self, name: str, now: float) -> bool:
        return name != "a"


UNSETTLED = {"a": 2, "b": 1}


def test_a_drain_provably_stuck_says_so_and_which_were_closed():
    text = DrainSteps()._end_text(_Tally(), _Clock(), "stuck", 0.0, 10, UNSETTLED, dict(UNSETTLED), {"b": 1})
    assert text.startswith("drain ended: 3 of 10 published messages not settled"), text
    assert f"+ {STUCK_GRACE_S:.0f}s since their last recorded event (on b: since the drain closed its streams)" in text
    assert text.endswith("a 2 (ack: invalid_ack_id 2); b 1 (no row yet 1)"), text
    assert "ceiling" not in text


def test_a_drain_stuck_at_its_ceiling_says_its_subscriptions_stopped():
    text = DrainSteps()._end_text(_Tally(), _Clock(), "stuck", 0.0, 10, UNSETTLED, {"b": 1}, {})
    assert "their subscriptions stopped" in text and "when the ceiling (120s) passed" in text, text
    assert "provably stuck" not in text and "drain closed" not in text


def test_a_drain_cut_at_its_ceiling_names_what_still_moved():
    text = DrainSteps()._end_text(_Tally(), _Clock(), "ceiling", 0.0, 10, UNSETTLED, {}, {})
    assert text.startswith("drain ceiling (120s) passed with 3 of 10 published messages not settled"), text
    assert "still making progress: a;" in text and "not lost (no final read proved them lost)" in text
