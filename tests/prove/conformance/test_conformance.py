"""`pubsubguard conform` on the real emulator: conformance.json against its schema, every scenario, the
outcomes the emulator showed in every run, the exit code rule, throwaway resources gone afterwards (also
after SIGTERM), and docs/emulator.md agreeing with the run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from pubsubguard.validation.conformance import runner, docs as conformance_docs
from pubsubguard.validation.conformance import harness

from support import ROOT
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "conformance.schema.json").read_text())
EMULATOR_DOC = ROOT / "docs" / "emulator.md"
ALL_IDS = [
    "eod-stale-ack-rejected", "eod-superseded-ack-rejected", "eod-no-redelivery-after-ack",
    "ordered-nack-redelivers-in-order", "ordered-expiry-redelivers-in-order", "dead-letter-after-max-attempts",
    "dead-letter-ordered-after-max-attempts",
    "create-rejects-push-with-exactly-once", "create-rejects-ack-deadline-out-of-range",
    "create-rejects-self-dead-letter", "create-rejects-attempts-out-of-range", "filter-enforced",
    "ordering-immutable", "retention-as-declared", "ordered-publish-failure-pauses-key",
    "ordered-eod-no-redelivery-while-outstanding", "ordered-dead-letter-keeps-delivering",
    "ordered-dead-letter-spares-other-subscriptions", "ordered-stream-reset-keeps-delivering",
    "stream-reset-keeps-delivering", "redelivery-after-repeated-expiry", "redelivery-after-late-ack",
    "dead-letter-after-late-ack",
]
# What the emulator (cloud-pubsub-emulator 0.8.20) did in every run we made; docs/emulator.md explains each.
# The timing-dependent scenarios are asserted too: on the emulator their outcome did not vary.
EMULATOR_OUTCOMES = {
    "eod-stale-ack-rejected": "violated",
    "eod-superseded-ack-rejected": "holds",
    "eod-no-redelivery-after-ack": "holds",
    "ordered-nack-redelivers-in-order": "violated",
    "ordered-expiry-redelivers-in-order": "holds",
    "dead-letter-after-max-attempts": "holds",
    "dead-letter-ordered-after-max-attempts": "violated",
    "create-rejects-push-with-exactly-once": "violated",
    "create-rejects-ack-deadline-out-of-range": "violated",
    "create-rejects-self-dead-letter": "violated",
    "create-rejects-attempts-out-of-range": "holds",
    "filter-enforced": "violated",
    "ordering-immutable": "holds",
    "retention-as-declared": "unsupported",
    "ordered-publish-failure-pauses-key": "holds",
    "ordered-eod-no-redelivery-while-outstanding": "violated",
    "ordered-dead-letter-keeps-delivering": "violated",
    "ordered-dead-letter-spares-other-subscriptions": "violated",
    "ordered-stream-reset-keeps-delivering": "violated",
    "stream-reset-keeps-delivering": "violated",
    "redelivery-after-repeated-expiry": "violated",
    "redelivery-after-late-ack": "violated",
    "dead-letter-after-late-ack": "violated",
}

pytestmark = pytest.mark.emulator


def _conform(*argv: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", "conform", *argv], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=ROOT)


def _names_with(run_id: str, project: str) -> list[str]:
    from google.cloud import pubsub_v1

    marker = f"{harness.NAME_PREFIX}-{run_id}-"
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    try:
        names = [t.name for t in publisher.list_topics(project=f"projects/{project}")]
        names += [s.name for s in subscriber.list_subscriptions(project=f"projects/{project}")]
    finally:
        subscriber.close()
    return [name for name in names if marker in name]


@pytest.fixture(scope="module")
def run(emulator, tmp_path_factory):
    report = tmp_path_factory.mktemp("conform")
    started = time.monotonic()
    done = _conform("--target", "emulator", "--report", str(report))
    elapsed = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr
    return done, json.loads((report / "conformance.json").read_text()), elapsed


def test_conformance_json_follows_the_schema_and_lists_every_scenario(run):
    _, doc, _ = run
    jsonschema.validate(doc, SCHEMA, format_checker=jsonschema.FormatChecker())
    assert doc["target"] == "emulator" and doc["endpoint"] == os.environ["PUBSUB_EMULATOR_HOST"]
    assert [s["id"] for s in doc["scenarios"]] == [s.id for s in runner.SCENARIOS]
    assert sorted(s["id"] for s in doc["scenarios"]) == sorted(ALL_IDS)
    for item in doc["scenarios"]:
        assert item["result"] in runner.RESULTS
        assert "docs/pubsub-facts.md" in item["source"] and "https://cloud.google.com/pubsub/docs/" in item["source"]
        assert any("call" in e for e in item["evidence"]), f"{item['id']}: no request recorded"
    assert doc["summary"] == {r: sum(s["result"] == r for s in doc["scenarios"]) for r in runner.RESULTS}


def test_the_emulator_outcomes(run):
    _, doc, _ = run
    assert {s["id"]: s["result"] for s in doc["scenarios"]} == EMULATOR_OUTCOMES, \
        "\n".join(f"{s['id']}: {s['result']}: {s['detail']}" for s in doc["scenarios"])


def test_the_evidence_shows_what_the_target_answered(run):
    _, doc, _ = run
    by_id = {s["id"]: s for s in doc["scenarios"]}
    # the stale ack: one Acknowledge, more than the deadline after the Pull that delivered it, answered OK
    stale = by_id["eod-stale-ack-rejected"]["evidence"]
    pull = next(e for e in stale if e.get("call") == "Pull" and e["response"]["received_messages"])
    ack = next(e for e in stale if e.get("call") == "Acknowledge")
    assert ack["request"]["ack_ids"] == [pull["response"]["received_messages"][0]["ack_id"]]
    assert ack["at_s"] - pull["at_s"] > harness.ACK_DEADLINE_S and "error" not in ack
    # the superseded ack: the first ack id is refused with the exactly-once reason
    superseded = [e for e in by_id["eod-superseded-ack-rejected"]["evidence"] if e.get("call") == "Acknowledge"]
    assert superseded[0]["error"]["code"] == "INVALID_ARGUMENT"
    assert "PERMANENT_FAILURE_INVALID_ACK_ID" in json.dumps(superseded[0]["error"])
    assert "error" not in superseded[1]
    # dead-lettering: delivery_attempt 1..5 on the source, then the forwarded copy with its attributes
    dead = by_id["dead-letter-after-max-attempts"]
    assert "[1, 2, 3, 4, 5]" in dead["detail"] and "CloudPubSubDeadLetterSourceDeliveryCount" in dead["detail"]
    # the filter: the emulator delivered the two messages that do not match
    assert "['a', 'b', 'none']" in by_id["filter-enforced"]["detail"]
    # the publisher: the empty message refused, the next publish on A paused, then 2, 3, 4 in order
    paused = by_id["ordered-publish-failure-pauses-key"]["detail"]
    assert "PublishToPausedOrderingKeyException" in paused and "['2', '3', '4']" in paused
    # ordered + dead-letter: key B delivered before A's 5th nack (the control), nothing delivered after it
    stalled = by_id["ordered-dead-letter-keeps-delivering"]
    delivered = [m["data"] for e in stalled["evidence"] if e.get("call") == "Pull" and "response" in e
                 for m in e["response"]["received_messages"]]
    assert "B0" in str(delivered) and "B1" not in str(delivered), delivered
    assert "5th nack" in stalled["detail"] and "stopped delivering" in stalled["detail"]


def test_exit_code_follows_the_rule(run):
    done, doc, _ = run
    assert done.returncode == (1 if doc["summary"]["violated"] else 0)
    assert done.returncode == 1  # the emulator violates several documented behaviours
    assert "Traceback" not in done.stderr
    # the client library's own warnings (a stalled subscription's stream thread ending when its channel closes)
    # go to a file and are counted, never to the terminal
    assert "Exception in" not in done.stderr and "Background thread" not in done.stderr, done.stderr
    log = doc["client_log"]
    assert log["records"] == 0 or (log["file"] and Path(log["file"]).is_file()
                                   and f"logged {log['records']} warning{'s/errors' if log['records'] != 1 else '/error'}"
                                   in done.stdout)
    for scenario_id in ALL_IDS:
        assert scenario_id in done.stdout  # the table


def test_the_whole_command_stays_short(run):
    _, doc, elapsed = run
    # the disturbing scenario runs after the others (~11 s more)
    assert elapsed < 75 and doc["duration_s"] < 60, (elapsed, doc["duration_s"])


def test_throwaway_resources_are_gone(run):
    _, doc, _ = run
    assert doc["cleanup"]["failed"] == []
    assert len(doc["cleanup"]["deleted"]) >= 2 * len(ALL_IDS)
    assert all(f"{harness.NAME_PREFIX}-{doc['run_id']}-" in name for name in doc["cleanup"]["deleted"])
    assert _names_with(doc["run_id"], doc["project"]) == []


def test_docs_emulator_md_agrees_with_the_run(run):
    _, doc, _ = run
    documented = conformance_docs.documented_results(EMULATOR_DOC.read_text())
    assert documented == {s["id"]: s["result"] for s in doc["scenarios"]}, (
        "docs/emulator.md disagrees with this run; regenerate its conformance section with "
        "`python -m pubsubguard.validation.conformance --update-doc docs/emulator.md out/conform/conformance.json`")


def test_sigterm_stops_the_scenarios_and_deletes_their_resources(emulator, tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "pubsubguard", "conform", "--target", "emulator", "--report", str(tmp_path),
         "--scenario", "eod-stale-ack-rejected", "--scenario", "ordered-expiry-redelivers-in-order"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    first = process.stdout.readline()
    run_id = re.search(r"run ([0-9a-f]{8})", first).group(1)
    deadline = time.monotonic() + 20
    while len(_names_with(run_id, conformance_project())) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(_names_with(run_id, conformance_project())) >= 4  # both scenarios are in their waits
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "pubsubguard conform: interrupted"
    assert _names_with(run_id, conformance_project()) == []
    assert not (tmp_path / "conformance.json").exists()


def conformance_project() -> str:
    from pubsubguard.commands.conform import DEFAULT_EMULATOR_PROJECT

    return DEFAULT_EMULATOR_PROJECT


def test_without_an_emulator_host_it_starts_and_stops_its_own(tmp_path):
    from pubsubguard.core.emulator import answers

    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "conform", "--target", "emulator", "--report",
                           str(tmp_path), "--scenario", "ordering-immutable"],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "conformance.json").read_text())
    assert [s["result"] for s in doc["scenarios"]] == ["holds"]
    assert doc["endpoint"] and not answers(doc["endpoint"])  # stopped after the run


@pytest.mark.parametrize("argv, env, expected", [
    (["--target", "gcp"], {}, "--target gcp needs --project"),
    (["--target", "gcp", "--project", "p"], {"PUBSUB_EMULATOR_HOST": "127.0.0.1:1"}, "PUBSUB_EMULATOR_HOST is set"),
    (["--scenario", "no-such-scenario"], {}, "--scenario no-such-scenario: unknown"),
    (["--target", "emulator", "--region", "us-east1"], {}, "--region: only with --target gcp"),
    (["--target", "emulator"], {"PUBSUB_EMULATOR_HOST": "127.0.0.1:1"}, "no Pub/Sub emulator answers there"),
])
def test_usage_and_environment_errors_are_one_line_exit_2(argv, env, expected, tmp_path):
    done = _conform(*argv, "--report", str(tmp_path), env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert done.stderr.startswith("pubsubguard conform: ")


def test_the_markdown_section_round_trips(tmp_path):
    run = {"target": "emulator", "endpoint": "127.0.0.1:1", "project": "p", "run_id": "0123abcd",
           "started": runner.utc_now().isoformat(timespec="seconds")}
    doc = runner.document(run,
                               [{"id": "filter-enforced", "result": "violated", "detail": "delivered a | b"},
                                {"id": "ordering-immutable", "result": "holds", "detail": "refused"}],
                               {"deleted": [], "failed": []}, 1.0)
    page = tmp_path / "emulator.md"
    page.write_text(f"# doc\n\n{conformance_docs.DOC_BEGIN}\nSTALE-ROW\n{conformance_docs.DOC_END}\n\nafter\n")
    conformance_docs.update_doc(page, doc)
    text = page.read_text()
    assert conformance_docs.documented_results(text) == {"filter-enforced": "violated", "ordering-immutable": "holds"}
    assert text.startswith("# doc\n\n") and text.endswith("\n\nafter\n") and "delivered a \\| b" in text
    assert "STALE-ROW" not in text
