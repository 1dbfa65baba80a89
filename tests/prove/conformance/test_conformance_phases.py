"""A scenario that disturbs the target for other subscriptions (`Scenario.disturbs`) runs after all the
others have ended, in `conform` and beside the probe (only once the probe's drain ended), or, on a second
emulator given for it (`pubsubguard run`), at once, beside the others."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from pubsubguard.validation.conformance import runner
from pubsubguard.validation.conformance.harness import HOLDS, SCENARIOS, Scenario


def _timed_scenarios() -> tuple[list, list[tuple[str, str, float]], dict[str, object]]:
    """Three scenarios (slow, disturbing, quick) that record when each starts and ends and the session it ran on."""
    events: list[tuple[str, str, float]] = []
    sessions: dict[str, object] = {}
    lock = threading.Lock()

    def body(name: str, seconds: float):
        def run(probe):
            with lock:
                events.append((name, "start", time.monotonic()))
                sessions[name] = getattr(probe, "session", None)
            time.sleep(seconds)
            with lock:
                events.append((name, "end", time.monotonic()))
            return HOLDS, name
        return run

    scenarios = [Scenario("slow", "", "", body("slow", 0.3)), Scenario("disturbing", "", "", body("disturbing", 0.01), True),
                 Scenario("quick", "", "", body("quick", 0.05))]
    return scenarios, events, sessions


def test_disturbing_scenarios_start_after_the_others_ended():
    scenarios, events, _ = _timed_scenarios()
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


def test_with_a_second_target_the_disturbing_scenarios_run_there_beside_the_others():
    """`apart` (a second emulator, `pubsubguard run`): the disturbing scenario starts at once, beside the others, and
    every scenario runs on the session of the target it belongs to."""
    scenarios, events, sessions = _timed_scenarios()
    stop = threading.Event()
    target = SimpleNamespace(publisher=None, subscriber=None, stop=stop)
    second = SimpleNamespace(publisher=None, subscriber=None, stop=stop)
    results = runner.run_scenarios(target, scenarios, apart=second)
    assert [r["id"] for r in results] == ["slow", "disturbing", "quick"]
    assert sessions == {"slow": target, "disturbing": second, "quick": target}
    at = {(name, what): t for name, what, t in events}
    assert at[("disturbing", "start")] < at[("slow", "end")]  # beside, not after


def test_the_probe_sends_the_disturbing_scenarios_to_the_second_emulator_when_given(monkeypatch, tmp_path):
    from pubsubguard.validation.conformance import beside

    calls = []

    def conform(target, project, **kwargs):
        calls.append({"scenarios": [s.id for s in kwargs["scenarios"]], "apart": kwargs.get("apart")})
        doc = {"target": target, "endpoint": kwargs["endpoint"], "project": project, "run_id": "r1", "started": "t",
               "duration_s": 1.0, "summary": {}, "scenarios": [], "cleanup": {"deleted": [], "failed": []},
               "client_log": {"records": 0, "commonest": [], "file": None}}
        return doc

    monkeypatch.setattr(runner, "conform", conform)
    estate = SimpleNamespace(project="p")
    disturbing = [s.id for s in SCENARIOS if s.disturbs]
    assert disturbing

    apart = beside.ConformanceBeside("emulator", estate, "127.0.0.1:1", tmp_path / "a", apart="127.0.0.1:2")
    apart.result()
    assert calls == [{"scenarios": [s.id for s in SCENARIOS], "apart": "127.0.0.1:2"}]  # one run, nothing after

    calls.clear()
    after = beside.ConformanceBeside("emulator", estate, "127.0.0.1:1", tmp_path / "b")
    after.result()
    assert calls == [{"scenarios": [s.id for s in SCENARIOS if not s.disturbs], "apart": None},
                     {"scenarios": disturbing, "apart": None}]  # without one: after the drain, on the target

    calls.clear()  # on Google Cloud there is no second emulator: after the drain
    beside.ConformanceBeside("gcp", estate, None, tmp_path / "c", apart="127.0.0.1:2").result()
    assert [c["apart"] for c in calls] == [None, None]
