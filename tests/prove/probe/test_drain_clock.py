"""The drain clock (pubsubguard.validation.probe.drain_clock): when the drain stops waiting -- a ceiling from what is
left and the rate measured, a subscription stopped only when it makes no progress -- and what the publishers may
still send."""

from __future__ import annotations

from support.drain_evidence import S, T


# -- the drain clock (validation/probe/drain_clock.py): progress, not a clock alone ---------------------------------------
class _Tally:
    """What the clock reads of an EvidenceTally: per-subscription progress, settled and expected counts."""

    def __init__(self, published: int, settled: int, progress: dict[str, int]):
        self.published = {"t": set(range(published))}
        self._settled, self._expected, self.progress = settled, published, dict(progress)

    def done(self) -> int:
        return self._settled

    def expected(self) -> int:
        return self._expected

    def progress_of(self, name: str) -> int:
        return self.progress[name]


def test_the_ceiling_grows_with_what_is_left_and_shrinks_with_the_measured_rate():
    from pubsubguard.validation.probe.drain_clock import CEILING_FACTOR, CEILING_MAX_S, ceiling_s

    assert ceiling_s(52, 0, 500) == 52  # everything settled while publishing: the faults' timing alone
    assert ceiling_s(52, 24_438, 200) == round(52 + CEILING_FACTOR * 24_438 / 200, 1)
    assert ceiling_s(52, 24_438, 400) < ceiling_s(52, 24_438, 200)
    assert ceiling_s(52, 10_000, 0) == CEILING_MAX_S  # nothing settled yet: the bound, not an endless wait


def test_a_subscription_still_progressing_is_never_stopped_however_late_its_messages():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0, "u": 20.0}, base_s=52)
    tally = _Tally(1000, 100, {"s": 10, "u": 10})
    clock.begin(tally, now=0.0, first_publish_us=T, now_us=T + 10 * S)
    assert clock.rates["settled_per_s"] == 10.0 and clock.ceiling == round(52 + 3 * 900 / 10, 1)
    for second in range(1, 60):  # `s` delivers something new every second, `u` nothing after the start
        tally.progress["s"] += 1
        clock.observe(tally, float(second))
    assert not clock.stopped("s", 59.5)
    assert clock.stopped("u", 59.5) and not clock.stopped("u", 19.0)
    assert not clock.past_ceiling(100.0) and clock.past_ceiling(clock.ceiling + 1)


def test_past_the_ceiling_stopped_subscriptions_end_stuck_and_moving_ones_are_cut():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0, "u": 20.0}, base_s=30, floor_s=0.0)
    tally = _Tally(1000, 990, {"s": 0, "u": 0})
    clock.begin(tally, now=0.0, first_publish_us=T, now_us=T + 10 * S)
    assert clock.ceiling == 30.3  # 30 + 3 x 10 left / 99 settled per second
    unsettled = {"s": 4, "u": 6}
    # both stopped (no progress for 20 s), some messages not stuck yet: before the ceiling the drain goes on
    assert clock.end(25.0, unsettled, {"s": 4, "u": 2}) is None
    assert clock.end(25.0, unsettled, dict(unsettled)) == "stuck"  # each message stuck: no need to wait
    # past the ceiling a target that stopped on every unsettled subscription ends stuck (the final read decides)
    assert clock.end(34.0, unsettled, {"s": 4, "u": 2}) == "stuck"
    # ... while one that still makes progress is cut there
    tally.progress["u"] += 1
    clock.observe(tally, 30.0)
    assert clock.end(34.0, unsettled, {"s": 4, "u": 2}) == "ceiling"
    assert clock.end(34.0, unsettled, dict(unsettled)) == "ceiling"


def test_the_ceiling_follows_the_rate_the_drain_itself_measures():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0}, base_s=30)
    tally = _Tally(1000, 900, {"s": 0})
    clock.begin(tally, now=0.0, first_publish_us=T, now_us=T + 10 * S)
    assert clock.ceiling == 33.3  # 30 + 3 x 100 left / 90 settled per second while publishing
    tally._settled, tally.progress["s"] = 905, 5  # the tail: 5 settled in 10 s
    clock.observe(tally, 10.0)
    assert clock.ceiling == round(10 + 3 * 95 * 10 / 5, 1) and clock.extended["drain_settled_per_s"] == 0.5
    assert not clock.past_ceiling(100.0)
    tally._settled, tally.progress["s"] = 1000, 100  # it sped up: the ceiling never moves earlier
    clock.observe(tally, 20.0)
    assert clock.ceiling == round(10 + 3 * 95 * 10 / 5, 1)
    fixed = DrainClock({"s": 20.0}, base_s=30, override_s=40.0)  # --drain-timeout: never extended
    fixed.begin(_Tally(1000, 900, {"s": 0}), now=0.0, first_publish_us=T, now_us=T + 10 * S)
    fixed.observe(tally, 15.0)
    assert fixed.ceiling == 40.0 and fixed.extended is None


def test_the_publishers_allowance_counts_only_what_progressing_subscriptions_still_owe():
    from pubsubguard.validation.probe.drain_clock import DrainClock, allowed_per_task

    class Tally(_Tally):
        def __init__(self):
            super().__init__(1000, 0, {"s": 0, "u": 0})
            self.owed = {"s": 600, "u": 300}

        def unsettled_of(self, name):
            return set(range(self.owed[name]))

    tally = Tally()
    clock = DrainClock({"s": 20.0, "u": 20.0}, base_s=30)
    clock.observe(tally, 0.0)
    # 900 pairs unsettled on progressing subscriptions: (1000 expected - 900 + 2000) / 2 pairs a message / 2 tasks
    assert allowed_per_task(tally, clock, 1.0, 2.0, 2) == 525
    # 500 of `s` overdue (past their due + grace) no longer hold the publishers back
    assert allowed_per_task(tally, clock, 1.0, 2.0, 2, overdue={"s": 500}) == 650
    # `u` stopped (no progress for its window): its 300 do not either
    tally.progress["s"] += 1
    clock.observe(tally, 25.0)
    assert allowed_per_task(tally, clock, 25.0, 2.0, 2, overdue={"s": 500}) == 725


def test_drain_timeout_replaces_the_derived_ceiling():
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 20.0}, base_s=52, override_s=42.0)
    clock.begin(_Tally(1000, 0, {"s": 0}), now=5.0, first_publish_us=T, now_us=T + S)
    assert clock.ceiling == 42.0 and clock.past_ceiling(47.5) and not clock.past_ceiling(46.0)
    assert clock.record(50.0, "ceiling", _Tally(1000, 0, {"s": 0}))["ceiling_from"] == "--drain-timeout"


def test_a_stalled_subscription_is_closed_by_the_targets_quiet_not_by_the_probes_own_late_acks():
    """The streams of a stalled subscription close once the target did nothing there for its window, by the rows'
    receive times: a late ack of a delivery held before the stall (its row written one hold later) is progress the
    clock sees, but not the target's act, and keeps nothing open. Once closed, it counts as stopped."""
    from pubsubguard.validation.probe.drain_clock import DrainClock

    clock = DrainClock({"s": 17.0, "u": 17.0}, base_s=52)
    tally = _Tally(1000, 990, {"s": 100, "u": 100})
    clock.begin(tally, now=0.0, first_publish_us=T, now_us=T)
    # `s` received its last delivery at +3 s; the late acks of two deliveries held since +0.5 s settle them at +14 s
    tally.progress["s"] += 2
    clock.observe(tally, 14.0)
    assert not clock.stopped("s", 21.0) and clock.stopped("s", 31.5)  # the observed progress: 14 + 17 s
    last_activity = T + 3 * S
    assert not clock.target_quiet("s", last_activity, T + 19 * S)
    assert clock.target_quiet("s", last_activity, T + 21 * S)  # 3 + 17 s: ten seconds before `stopped`
    # closed at +21 s with its messages stuck from the close: the drain need not wait for `stopped`
    unsettled = {"s": 4}
    assert clock.end(21.0, unsettled, dict(unsettled)) is None
    assert clock.end(21.0, unsettled, dict(unsettled), closed=frozenset({"s"})) == "stuck"
    # another unsettled subscription still moving keeps the drain going, closed or not
    tally.progress["u"] += 1
    clock.observe(tally, 20.0)
    assert clock.end(21.0, {"s": 4, "u": 1}, {"s": 4, "u": 1}, closed=frozenset({"s"})) is None
