"""A scenario that disturbs the target for other subscriptions (`Scenario.disturbs`) runs after all the
others have ended, in `conform` and beside the probe (only once the probe's drain ended)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from pubsubguard.validation.conformance import runner
from pubsubguard.validation.conformance.harness import HOLDS, SCENARIOS, Scenario


def test_disturbing_scenarios_start_after_the_others_ended():
    events: list[tuple[str, str, float]] = []
    lock = threading.Lock()

    def body(name: str, seconds: float):
        def run(probe):
            with lock:
                events.append((name, "start", time.monotonic()))
            time.sleep(seconds)
            with lock:
                events.append((name, "end", time.monotonic()))
            return HOLDS, name
        return run

    scenarios = [Scenario("slow", "", "", body("slow", 0.3)), Scenario("disturbing", "", "", body("disturbing", 0.01), True),
                 Scenario("quick", "", "", body("quick", 0.05))]
    session = SimpleNamespace(publisher=None, subscriber=None, stop=threading.Event())
    results = runner.run_scenarios(session, scenarios)
    assert [r["id"] for r in results] == ["slow", "disturbing", "quick"]  # reported in the given order
    at = {(name, what): t for name, what, t in events}
    assert at[("disturbing", "start")] >= max(at[("slow", "end")], at[("quick", "end")])
    assert at[("quick", "start")] < at[("slow", "end")]  # the others still run side by side


def test_the_one_that_stalls_an_ordered_dead_lettering_subscription_with_a_stream_disturbs():
    by_id = {s.id: s for s in SCENARIOS}
    assert by_id["ordered-dead-letter-spares-other-subscriptions"].disturbs
    # the unary-Pull ones that stall their own ordered subscription did not slow others (measured): beside
    assert not by_id["ordered-dead-letter-keeps-delivering"].disturbs
    assert not by_id["dead-letter-ordered-after-max-attempts"].disturbs
