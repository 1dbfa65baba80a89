"""The probe's driver around the drain (validation/driver.py, run_setup.py, footprint.py): the default drain timeout,
the driver's footprint, the twins each subscriber task reads, and when the subscriber tasks start."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from pubsubguard.core.errors import VerifyError
from pubsubguard.validation.driver import ProbeDriver
from pubsubguard.validation.probe.clients import PUBLISHING_PREFIX


def test_default_drain_timeout_waits_for_the_fault_deadline_not_the_declared_one():
    from pubsubguard.validation.run_setup import default_drain_timeout
    from pubsubguard.validation.probe.twins import TwinSpec

    eod = TwinSpec("p/s1", "p/t", "s1", exactly_once=True, ack_deadline_s=60, retry_max_backoff_s=10)
    push = TwinSpec("p/s2", "p/t", "s2", ack_deadline_s=20, push_endpoint="http://127.0.0.1:1/push")
    drain = TwinSpec("p/d", "p/dl", "d", ack_deadline_s=600, is_dead_letter_drain=True)  # not probed: no say
    # held 10 s (fault deadline) + 2 s margin + 10 s backoff + 30 s slack
    assert default_drain_timeout([eod, drain]) == 52
    # a push twin's held answer waits its own deadline (no ack id to modify)
    assert default_drain_timeout([eod, push, drain]) == 20 + 2 + 10 + 30
    # --fault-deadline declared: the subscription's own
    assert default_drain_timeout([eod, drain], None) == 60 + 2 + 10 + 30


def test_the_driver_footprint_is_sampled_from_start_to_end_and_said_in_one_line():
    import time as clock

    from pubsubguard.validation.footprint import Footprint, sentence

    samples = Footprint(interval_s=0.1).start()
    held = [b"x" * (8 * 1024 * 1024)]  # 8 MiB more (written, so resident) while it samples
    clock.sleep(0.35)
    samples = samples.stop()
    assert len(samples) >= 4 and samples[0]["t_s"] == 0.0 and samples[-1]["t_s"] >= 0.35
    assert all(s["rss_mib"] > 0 and s["threads"] >= 1 and s["open_files"] > 0 for s in samples)
    assert max(s["rss_mib"] for s in samples) >= samples[0]["rss_mib"] + 7
    said = sentence(samples)
    assert said.startswith("the driver while probing: resident memory ") and f"{len(samples)} samples" in said
    assert sentence(samples[:1]) is None
    del held


def test_subscriber_tasks_share_every_twin_up_to_the_bound_and_split_them_beyond():
    """Up to STREAMS_PER_TASK twins every subscriber task streams all of them (competing clients on every
    subscription, the main job's shape); beyond, each twin is read by exactly one task, the shares differing
    by one at most, and a replacement task is given the share of the task it replaces (driver)."""
    from pubsubguard.validation.driver import STREAMS_PER_TASK, twins_of_task

    few = [{"path": f"t{i}"} for i in range(STREAMS_PER_TASK)]
    assert all(twins_of_task(few, index, 2) == few for index in range(2))
    many = [{"path": f"t{i}"} for i in range(300)]
    shares = [twins_of_task(many, index, 2) for index in range(2)]
    paths = [[t["path"] for t in share] for share in shares]
    assert sorted(paths[0] + paths[1]) == sorted(t["path"] for t in many)  # every twin read, none twice
    assert not set(paths[0]) & set(paths[1]) and {len(p) for p in paths} == {150}
    three = [len(twins_of_task(many[:100], index, 3)) for index in range(3)]
    assert sum(three) == 100 and max(three) - min(three) <= 1
    assert twins_of_task(many, 0, 1) == many  # one task reads everything


def test_the_subscribers_wait_for_the_publishers_marker_not_for_sparks_status_store(tmp_path):
    """The driver submits the subscriber tasks once a publisher task says it runs (`_publishing-<task>`), as soon
    as it does: Spark's status tracker showed a task that started at once up to an executor heartbeat (10 s) late.
    No Spark context is given: a wait that asked the tracker fails here."""
    state = SimpleNamespace(evidence_dir=tmp_path, publish_done=threading.Event(),
                            sc=SimpleNamespace(master="local[3]", defaultParallelism=3))
    marker = tmp_path / f"{PUBLISHING_PREFIX}pub-key-000-1"
    threading.Timer(0.3, marker.touch).start()
    started = time.monotonic()
    ProbeDriver._wait_for_publisher_slot(state, timeout_s=30)
    assert marker.exists() and time.monotonic() - started < 5

    marker.unlink()
    with pytest.raises(VerifyError, match="got no Spark slot within"):
        ProbeDriver._wait_for_publisher_slot(state, timeout_s=0.2)
    state.publish_done.set()  # the publisher ended (or failed) before any marker: nothing to wait for
    ProbeDriver._wait_for_publisher_slot(state, timeout_s=0.2)
