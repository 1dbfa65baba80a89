"""The emulator sends nothing anywhere but loopback (pubsubguard/core/emulator.py): a declared push endpoint is mapped
to the local receiver beside the emulator (pubsubguard/core/push_receiver.py), which records each push and answers
204, and the emulator's log is bounded."""

from __future__ import annotations

import os
import time

import pytest


# --- the emulator sends nothing anywhere but loopback ---------------------------------------------
def test_push_endpoints_map_to_the_local_receiver(monkeypatch):
    from urllib.parse import urlsplit

    from pubsubguard.core import emulator as emu

    monkeypatch.delenv(emu.PUSH_RECEIVER_ENV, raising=False)
    declared = {"pushEndpoint": "https://orders.example.com/push?token=1", "attributes": {"x-goog-version": "v1"},
                "oidcToken": {"serviceAccountEmail": "pusher@p.iam.gserviceaccount.com"}}
    applied = emu.emulator_push_config(declared, "orders-push")
    url = urlsplit(applied["pushEndpoint"])
    assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.path == "/push/orders-push"
    assert "orders.example.com" not in url.netloc
    assert {k: v for k, v in applied.items() if k != "pushEndpoint"} == {k: v for k, v in declared.items() if k != "pushEndpoint"}
    monkeypatch.setenv(emu.PUSH_RECEIVER_ENV, "127.0.0.1:9999")
    assert emu.emulator_push_config(declared, "s")["pushEndpoint"].startswith("http://127.0.0.1:9999/push/s?endpoint=https%3A%2F%2F")


def test_the_receiver_records_each_push_and_answers_204():
    import urllib.request

    from pubsubguard.core.push_receiver import PushReceiver, local_push_endpoint

    receiver = PushReceiver().start()
    try:
        url = local_push_endpoint("https://orders.example.com/push", "orders-push", receiver.host)
        with urllib.request.urlopen(urllib.request.Request(url, data=b'{"message": {}}', method="POST"), timeout=5) as answer:
            assert answer.status == 204
        push = receiver.pushes[-1]
        assert (push.subscription, push.declared_endpoint, push.body_bytes) == ("orders-push", "https://orders.example.com/push", 15)
    finally:
        receiver.stop()


def test_the_log_is_bounded(tmp_path):
    from pubsubguard.core.emulator import BoundedLog

    log = BoundedLog(tmp_path / "emulator.log", max_bytes=4096)
    for i in range(2000):
        log.write(f"line {i}: UnknownHostException orders.example.com\n".encode())
    log.close()
    sizes = [p.stat().st_size for p in tmp_path.iterdir()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emulator.log", "emulator.log.1"]
    assert sum(sizes) <= 4096 and "line 1999:" in (tmp_path / "emulator.log").read_text()


@pytest.mark.emulator
def test_the_emulator_pushes_to_its_sidecar_receiver_only(tmp_path):
    """A push subscription applied with `emulator_push_config` is delivered to the sidecar's receiver
    on loopback (logged in the bounded log); `stop()` ends the emulator and the sidecar."""
    from google.cloud import pubsub_v1

    from pubsubguard.core import emulator as emu

    started = emu.Emulator.start(project="pubsubguard-push", state_dir=tmp_path)
    saved = {k: os.environ.get(k) for k in (emu.HOST_ENV, emu.PUSH_RECEIVER_ENV)}
    try:
        os.environ[emu.HOST_ENV], os.environ[emu.PUSH_RECEIVER_ENV] = started.host, started.push_receiver
        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        topic = "projects/pubsubguard-push/topics/orders"
        publisher.create_topic(name=topic)
        config = emu.emulator_push_config({"pushEndpoint": "https://orders.example.com/push"}, "orders-push")
        subscriber.create_subscription(request={"name": "projects/pubsubguard-push/subscriptions/orders-push",
                                                "topic": topic, "push_config": {"push_endpoint": config["pushEndpoint"]}})
        publisher.publish(topic, b"hello").result(timeout=30)
        deadline = time.monotonic() + 30
        while "push for orders-push" not in started.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        text = started.log.read_text()
        assert "push for orders-push (" in text and "declared endpoint https://orders.example.com/push" in text
        assert "UnknownHostException" not in text
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        started.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(started.pgid, 0)
    assert not emu.answers(started.push_receiver, expect=b"pubsubguard push receiver")
