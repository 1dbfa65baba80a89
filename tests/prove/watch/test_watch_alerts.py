"""`pubsubguard watch`'s metrics and alerts (issue 63, items 6 and 7), with the real parts:

- the alerting rules (validation/watch/alerts.yml) pass `promtool check rules`, and their unit tests
  (alerts_test.yml) pass `promtool test rules`; every alert has tests that fire it and tests where it stays
  silent, and the unit tests catch a rule that would fire on a counter reset;
- `WatchMetrics` serves its own registry over real HTTP on loopback, scraped and parsed with prometheus-client's
  parser: every series the contract names, findings at 0 from the start, guarantees removed when not judged,
  labels from the declared sets only, a port in use refused in one line (exit 2), the port freed by close();
- a real Prometheus server (Debian's binary, tests/prometheus_server.py) scraping a `WatchMetrics` in this process
  fires PubSubGuaranteeBroken for a subscription with an error finding within the bound the rules promise, and
  nothing for a clean subscription.

promtool and prometheus come from Debian's `prometheus` package (scripts/setup.sh): without them these tests fail.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import prometheus_client
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from support.prometheus_server import binary, listening, prometheus_server
from pubsubguard.core import __version__
from pubsubguard.core.errors import UserError
from pubsubguard.validation.checks.findings import FINDING_KINDS, GUARANTEE_STATUSES, SEVERITIES
from pubsubguard.validation.watch.metrics import WatchMetrics

from support import ROOT
ALERTS = ROOT / "validation" / "watch" / "alerts.yml"
ALERTS_TEST = ROOT / "validation" / "watch" / "alerts_test.yml"
DOC = ROOT / "docs" / "watch.md"

SUBSCRIPTIONS = {
    "orders-ordered": {"topic": "orders", "ack_deadline_s": 15, "horizon_s": 90.0,
                       "guarantees": ["ordering", "completeness"]},
    "orders-clean": {"topic": "orders", "ack_deadline_s": 10, "horizon_s": 60.0,
                     "guarantees": ["ordering", "exactly_once", "completeness"]},
}
TOPICS = ["orders"]


def promtool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([binary("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


# -- the rules -------------------------------------------------------------------------------------------------
def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules():
    result = promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout
    assert [group["name"] for group in yaml.safe_load(ALERTS.read_text())["groups"]] == ["pubsubguard"]


def test_promtool_unit_tests_of_every_alert_pass():
    result = promtool("test", "rules", str(ALERTS_TEST))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_unit_tested_firing_and_silent():
    names = {rule["alert"] for rule in rules()}
    assert names == {"PubSubGuaranteeBroken", "PubSubMessagesPastHorizon", "PubSubCanaryStalled",
                     "PubSubDeliveryLatencyOverAckDeadline", "PubSubCanaryEvidenceLate"}
    cases = [case for test in yaml.safe_load(ALERTS_TEST.read_text())["tests"] for case in test["alert_rule_test"]]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    silent = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert fired == names and silent == names
    # PubSubCanaryStalled has two rules (windows stopped; no window at all): each fires in a test
    stalled = {alert["exp_labels"].get("stalled") for case in cases if case["alertname"] == "PubSubCanaryStalled"
               for alert in case["exp_alerts"]}
    assert stalled == {"windows", "absent"}


def test_every_alert_says_what_to_look_at_and_its_bound():
    doc = DOC.read_text()
    alerts_section = doc.split("\n## Alerts", 1)[1].split("\n## ", 1)[0]
    for rule in rules():
        assert rule["for"], rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        annotations = rule["annotations"]
        assert {"summary", "description", "bound"} <= set(annotations), rule["alert"]
        assert "findings.jsonl" in annotations["description"] or "log" in annotations["description"], rule["alert"]
        assert annotations["bound"].startswith("Fires at most"), rule["alert"]
        assert rule["alert"] in alerts_section, f"docs/watch.md's Alerts section does not name {rule['alert']}"
        assert f"for: {rule['for']}" in alerts_section or f"`for` {rule['for']}" in alerts_section, rule["alert"]


def test_the_unit_tests_catch_a_rule_that_fires_on_a_restart(tmp_path):
    """A rule counting changes instead of increase() fires when a restarted watch's counters start again at 0:
    alerts_test.yml's restart case fails it."""
    text = ALERTS.read_text()
    counted = 'increase(pubsubguard_findings_total{severity="error"}[10m])'
    assert counted in text
    (tmp_path / "alerts.yml").write_text(text.replace(counted, counted.replace("increase", "changes")))
    (tmp_path / "alerts_test.yml").write_text(ALERTS_TEST.read_text())
    result = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert 'subscription="orders-restarted"' in result.stdout + result.stderr


# -- the exporter ------------------------------------------------------------------------------------------------
def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """The samples of a real scrape, parsed by prometheus-client's parser: {(name, labels): value}."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def series(samples, name: str, **labels) -> dict[frozenset, float]:
    """The samples of that name whose labels include `labels`."""
    return {key: value for (sample, key), value in samples.items()
            if sample == name and set(labels.items()) <= key}


def value(samples, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def exporter():
    metrics = WatchMetrics("dev", __version__, SUBSCRIPTIONS, TOPICS)
    metrics.start(0)
    yield metrics
    metrics.close()


def test_every_series_is_there_from_the_start(exporter):
    before = time.time()
    samples = scrape(exporter.url)
    assert exporter.url == f"http://127.0.0.1:{exporter.port}/metrics" and exporter.port > 0
    findings = series(samples, "pubsubguard_findings_total")
    # every subscription x every finding kind of the vocabulary x every severity, at 0: increase() sees the first
    expected = {frozenset({"subscription": sub, "kind": kind, "severity": severity}.items())
                for sub in SUBSCRIPTIONS for kind in FINDING_KINDS for severity in SEVERITIES}
    assert set(findings) == expected and set(findings.values()) == {0.0}
    assert {"lost", "out_of_order", "duplicate_after_ack"} <= set(FINDING_KINDS)
    assert value(samples, "pubsubguard_messages_published_total", topic="orders") == 0
    for sub, spec in SUBSCRIPTIONS.items():
        assert value(samples, "pubsubguard_messages_delivered_total", subscription=sub) == 0
        assert value(samples, "pubsubguard_ack_deadline_seconds", subscription=sub) == spec["ack_deadline_s"]
        assert value(samples, "pubsubguard_delivery_horizon_seconds", subscription=sub) == spec["horizon_s"]
        assert value(samples, "pubsubguard_delivery_latency_seconds_count", subscription=sub) == 0
    assert value(samples, "pubsubguard_watch_info", stack="dev", version=__version__) == 1
    assert before - 60 < value(samples, "pubsubguard_watch_start_time_seconds") <= time.time()
    # the buckets span Pub/Sub's latencies, and each declared ack deadline is one (exact p99 comparison)
    bounds = {float(dict(key)["le"]) for key in series(samples, "pubsubguard_delivery_latency_seconds_bucket",
                                                        subscription="orders-ordered")}
    assert min(bounds) == 0.005 and max(bounds - {math.inf}) == 600 and math.inf in bounds
    assert {10.0, 15.0} <= bounds
    # nothing is claimed before it is judged: no guarantee, no window, no unsettled count yet
    for name in ("pubsubguard_guarantee_holds", "pubsubguard_window_end_timestamp_seconds",
                 "pubsubguard_window_seconds", "pubsubguard_unsettled_messages"):
        assert not series(samples, name), name
    assert not [name for name, _ in samples if name.endswith("_created")]  # no creation-time series
    assert all(name.startswith("pubsubguard_") for name, _ in samples)


def test_what_the_watch_records_is_scraped(exporter):
    exporter.published("orders", 7)
    exporter.published("orders", 3)
    exporter.delivered("orders-ordered", 9)
    exporter.latencies("orders-ordered", [0.004, 0.2, 16.0])
    exporter.finding("orders-ordered", "out_of_order", "error")
    exporter.finding("orders-ordered", "out_of_order", "error")
    exporter.finding("orders-ordered", "late_delivery", "advisory")  # a kind the vocabulary may not have yet
    exporter.unsettled("orders-ordered", 4)
    exporter.window(1_700_000_060.5, 60)
    samples = scrape(exporter.url)
    assert value(samples, "pubsubguard_messages_published_total", topic="orders") == 10
    assert value(samples, "pubsubguard_messages_delivered_total", subscription="orders-ordered") == 9
    assert value(samples, "pubsubguard_messages_delivered_total", subscription="orders-clean") == 0
    labels = {"subscription": "orders-ordered"}
    assert value(samples, "pubsubguard_delivery_latency_seconds_count", **labels) == 3
    assert value(samples, "pubsubguard_delivery_latency_seconds_sum", **labels) == pytest.approx(16.204)
    assert value(samples, "pubsubguard_delivery_latency_seconds_bucket", le="0.005", **labels) == 1
    assert value(samples, "pubsubguard_delivery_latency_seconds_bucket", le="15.0", **labels) == 2
    assert value(samples, "pubsubguard_delivery_latency_seconds_bucket", le="20.0", **labels) == 3
    assert value(samples, "pubsubguard_findings_total", kind="out_of_order", severity="error", **labels) == 2
    assert value(samples, "pubsubguard_findings_total", kind="late_delivery", severity="advisory", **labels) == 1
    assert value(samples, "pubsubguard_findings_total", subscription="orders-clean", kind="out_of_order",
                 severity="error") == 0
    assert value(samples, "pubsubguard_unsettled_messages", **labels) == 4
    assert value(samples, "pubsubguard_window_end_timestamp_seconds") == 1_700_000_060.5
    assert value(samples, "pubsubguard_window_seconds") == 60
    exporter.window(1_700_000_120.5, 60)  # the next window replaces it
    assert value(scrape(exporter.url), "pubsubguard_window_end_timestamp_seconds") == 1_700_000_120.5


def test_a_guarantee_is_1_or_0_when_judged_and_absent_otherwise(exporter):
    assert set(GUARANTEE_STATUSES) == {"holds", "violated", "inconclusive", "not_tested"}
    name, labels = "pubsubguard_guarantee_holds", {"subscription": "orders-clean"}
    exporter.guarantee("orders-clean", "ordering", "holds")
    exporter.guarantee("orders-clean", "exactly_once", "violated")
    samples = scrape(exporter.url)
    assert value(samples, name, guarantee="ordering", **labels) == 1
    assert value(samples, name, guarantee="exactly_once", **labels) == 0
    exporter.guarantee("orders-clean", "ordering", "inconclusive")
    exporter.guarantee("orders-clean", "exactly_once", "not_tested")
    exporter.guarantee("orders-clean", "completeness", "inconclusive")  # never set: nothing to remove
    assert not series(scrape(exporter.url), name)
    exporter.guarantee("orders-clean", "ordering", "violated")
    assert value(scrape(exporter.url), name, guarantee="ordering", **labels) == 0


def test_labels_come_from_the_declared_sets_only(exporter):
    for call in (lambda: exporter.published("another-topic", 1), lambda: exporter.delivered("unknown", 1),
                 lambda: exporter.latencies("unknown", [1.0]), lambda: exporter.unsettled("unknown", 1),
                 lambda: exporter.finding("unknown", "lost", "error"),
                 lambda: exporter.finding("orders-clean", "lost", "fatal"),
                 lambda: exporter.guarantee("orders-clean", "ordering", "broken"),
                 lambda: exporter.guarantee("orders-clean", "no-such-guarantee", "holds"),
                 lambda: exporter.guarantee("unknown", "ordering", "holds")):
        with pytest.raises(ValueError, match="WatchMetrics: unknown "):
            call()
    samples = scrape(exporter.url)
    assert not [key for key in samples if {"another-topic", "unknown", "fatal", "no-such-guarantee"}
                & {label for _, label in key[1]}]


def test_each_instance_has_its_own_registry():
    """Two exporters in one process (a global registry would refuse the second's series), and nothing in
    prometheus-client's global registry."""
    with WatchMetrics("dev", __version__, SUBSCRIPTIONS, TOPICS).start(0) as one, \
            WatchMetrics("prod", __version__, {"a": {**SUBSCRIPTIONS["orders-clean"]}}, ["t"]).start(0) as two:
        one.finding("orders-clean", "lost", "error")
        assert value(scrape(one.url), "pubsubguard_findings_total", subscription="orders-clean", kind="lost",
                     severity="error") == 1
        assert value(scrape(two.url), "pubsubguard_findings_total", subscription="a", kind="lost",
                     severity="error") == 0
        assert value(scrape(two.url), "pubsubguard_watch_info", stack="prod", version=__version__) == 1
    assert not [name for name in prometheus_client.REGISTRY._names_to_collectors if name.startswith("pubsubguard")]


def test_a_port_in_use_is_one_line_and_exit_2():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        metrics = WatchMetrics("dev", __version__, SUBSCRIPTIONS, TOPICS)
        with pytest.raises(UserError) as raised:
            metrics.start(port)
    assert str(raised.value) == f"--metrics-port {port}: already in use on 127.0.0.1 (Address already in use)"
    assert raised.value.exit_code == 2 and "\n" not in str(raised.value)
    assert metrics.port is None
    metrics.close()  # nothing started: nothing to stop


def test_it_listens_on_loopback_only_and_close_frees_the_port():
    metrics = WatchMetrics("dev", __version__, SUBSCRIPTIONS, TOPICS).start(0)
    port = metrics.port
    assert ("127.0.0.1", port) in listening(os.getpid())
    assert not [address for address, p in listening(os.getpid()) if p == port and address != "127.0.0.1"]
    metrics.close()
    metrics.close()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:  # the port is free again
        again.bind(("127.0.0.1", port))
        again.listen()
    assert metrics.start(port).port == port  # and the exporter can serve on it again
    metrics.close()


# -- a real Prometheus -------------------------------------------------------------------------------------------
SHORT_FOR = 3  # seconds: PubSubGuaranteeBroken's `for:` in the end-to-end test's variant of the rules
SLACK = 2.0  # seconds on top of the bound: the scrape's and the evaluation's own duration, and this test's polling


def rules_with_short_for(tmp_path: Path) -> Path:
    """alerts.yml with PubSubGuaranteeBroken's `for:` at SHORT_FOR seconds, every other rule as shipped."""
    document = yaml.safe_load(ALERTS.read_text())
    for rule in document["groups"][0]["rules"]:
        if rule["alert"] == "PubSubGuaranteeBroken":
            rule["for"] = f"{SHORT_FOR}s"
    path = tmp_path / "alerts.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_a_real_prometheus_fires_for_the_broken_subscription_only(tmp_path):
    metrics = WatchMetrics("dev", __version__, SUBSCRIPTIONS, TOPICS).start(0)
    try:
        metrics.window(time.time(), 60)
        metrics.published("orders", 20)
        for sub in SUBSCRIPTIONS:
            metrics.delivered(sub, 10)
            metrics.latencies(sub, [0.02] * 10)
            metrics.guarantee(sub, "ordering", "holds")
        with prometheus_server([f"127.0.0.1:{metrics.port}"], [rules_with_short_for(tmp_path)]) as server:
            pid = server.process.pid
            assert listening(pid) == {("127.0.0.1", int(server.url.rsplit(":", 1)[1]))}  # loopback only
            broken = 'pubsubguard_findings_total{subscription="orders-ordered",kind="out_of_order",severity="error"}'

            def baseline_scraped():  # the 0 before the finding is in Prometheus: increase() can see the first
                return server.query(f"count_over_time({broken}[1m]) >= 2")

            server.wait_for(baseline_scraped, timeout=30)
            assert [t["health"] for t in server.targets()] == ["up"]
            recorded = time.monotonic()
            metrics.finding("orders-ordered", "out_of_order", "error")

            def broken_firing():
                return server.firing("PubSubGuaranteeBroken", subscription="orders-ordered")

            bound = SHORT_FOR + 1 + 1  # for + scrape interval + evaluation interval (tests/prometheus_server.py)
            firing = server.wait_for(broken_firing, timeout=bound + 30)
            took = time.monotonic() - recorded
            assert took <= bound + SLACK, f"fired {took:.1f} s after the finding; the rules promise {bound} s"
            assert [alert["labels"]["kind"] for alert in firing] == ["out_of_order"]
            assert firing[0]["labels"]["severity"] == "critical"
            assert "findings.jsonl" in firing[0]["annotations"]["description"]
            time.sleep(SHORT_FOR + 2)  # long enough for a clean subscription's alert to become pending and fire
            everything = server.alerts()
            assert not [alert for alert in everything if alert["labels"].get("subscription") == "orders-clean"]
            assert [(a["labels"]["alertname"], a["labels"].get("subscription"), a["labels"].get("kind"))
                    for a in everything if a["state"] == "firing"] == [
                ("PubSubGuaranteeBroken", "orders-ordered", "out_of_order")]
            # the clean subscription was scraped all along: its series are there, at 0
            clean = server.query('pubsubguard_findings_total{subscription="orders-clean"}')
            assert len(clean) == len(FINDING_KINDS) * len(SEVERITIES)
            assert {sample["value"][1] for sample in clean} == {"0"}
            process, url = server.process, server.url
        assert process.poll() is not None, "Prometheus still runs after the block"
        with pytest.raises(urllib.error.URLError):  # and its port is closed
            urllib.request.urlopen(f"{url}/-/ready", timeout=5)
    finally:
        metrics.close()
    print(f"PubSubGuaranteeBroken fired {took:.1f} s after the finding (bound {bound} s + {SLACK} s)")
