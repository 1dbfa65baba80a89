"""The streaming checks judge keys by bucket (issue 65): one call of `judge.judge_bucket` per bucket, the bucket's
state holding each key's. A key must still be judged exactly when Spark would have called it alone -- when it has
new rows, or when the watermark passed its own timeout (timeout < watermark) -- never because another key of its
bucket was called; a call holding the driver's clock row judges at the watermark Spark's next window will have (the
clock less the query's delay), not past it; its state must come back from the bucket's whole; and a watch's --out
of the per-key format is refused in one line."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pubsubguard.core.errors import UserError
from pubsubguard.validation.checks import chunk
from pubsubguard.validation.watch import judge, outdir
from support.watch_judge import COLUMNS, CONFIG, HORIZON_US, FakeState, S


def key_rows(key: str, h: int, h2: int, seq: int, published_us: int, delivered_us: int | None) -> list[dict]:
    """One message of `key` on subscription 0, published with an id and, if `delivered_us`, delivered and acked."""
    id_bits = (seq + 1) << chunk.ID_SHIFT
    rows = [{"key": key, "sub_id": 0, "h": h, "h2": h2, "meta": (h2 << 32) | (1 << 4) | chunk.PUBLISH, "seq": seq,
             "t": published_us, "ack_t": judge.NULL, "att": id_bits}]
    if delivered_us is not None:
        meta = (h2 << 32) | (11 << chunk.DEADLINE_SHIFT) | (1 << 4) | (chunk.ACT_ACK << 2) | chunk.DELIVERY
        rows.append({"key": key, "sub_id": 0, "h": h, "h2": h2, "meta": meta, "seq": seq, "t": delivered_us,
                     "ack_t": delivered_us + 1000, "att": id_bits | (2 << 2)})
    return rows


def call(state: FakeState, rows: list[dict], config: judge.JudgeConfig = CONFIG) -> list[dict]:
    columns = ["key", "sub_id", "h", "meta", "seq", "t", "ack_t", "att"]  # h2 is meta's high half
    frames = [pd.DataFrame(rows, columns=columns)] if rows else []
    out = list(judge.judge_bucket(config, (0,), iter(frames), state))
    return [r for frame in out for r in frame[COLUMNS].to_dict("records")]


A = ("key-a", 11, 7)  # (name, h, h2): two keys of one bucket
B = ("key-b", 23, -5)


def test_a_key_is_judged_only_when_it_has_rows_or_its_own_timeout_passed():
    # window 0 (watermark 0): A's message published at 1 s and delivered; B's published at 5 s, never delivered
    first = FakeState()
    said = call(first, key_rows(*A, seq=1, published_us=1 * S, delivered_us=int(1.1 * S))
                + key_rows(*B, seq=1, published_us=5 * S, delivered_us=None))
    assert sorted(r["key"] for r in said if r["rtype"] == "stats") == ["key-a", "key-b"]
    assert first.timeout_ms == (1 * S + HORIZON_US) // 1000  # A's, the earlier: 11 s
    # the watermark passed A's timeout (11 s < 12 s) but not B's (15 s): A alone is judged, B as it was
    second = first.next_call(12_000)
    said = call(second, [])
    assert [(r["rtype"], r["key"], r["decided"]) for r in said] == [("stats", "key-a", 1)]
    keys = judge.decode(second.value)
    assert keys[(B[1], B[2])].timeout_ms == 15_000 and keys[(B[1], B[2])].decided_through == judge.NULL
    assert second.timeout_ms == 15_000  # B's now (A's next is its eviction, at 21 s)
    # a window where B has new rows (its seq 2) and A none, A's timeout not passed: B alone is judged, and its seq 1
    # is not lost yet (its horizon has not passed the watermark: 15 s > 14 s)
    third = second.next_call(14_000)
    said = call(third, key_rows(*B, seq=2, published_us=13 * S, delivered_us=int(13.2 * S)))
    assert [(r["rtype"], r["key"]) for r in said] == [("stats", "key-b")]
    assert said[0]["decided"] == 0 and said[0]["delivered"] == 1
    # past B's horizon: its seq 1 is lost (past_horizon), said once; A's rows stay until 21 s
    fourth = third.next_call(16_000)
    said = call(fourth, [])
    lost = [r for r in said if r["rtype"] == "finding"]
    assert [(r["key"], r["kind"], r["form"], r["seq"]) for r in lost] == [("key-b", "lost", "past_horizon", 1)]
    assert json.loads(lost[0]["facts"])["horizon_s"] == 10
    assert [r["key"] for r in said if r["rtype"] == "stats"] == ["key-b"]
    assert len(judge.decode(fourth.value)[(A[1], A[2])].rows["seq"]) == 2
    # far past every horizon: both keys judged, every row leaves the state; what stays (the closed seqs, the lost
    # seq) waits for new rows, with no timeout
    fifth = fourth.next_call(60_000)
    said = call(fifth, [])
    assert sorted(r["key"] for r in said if r["rtype"] == "stats") == ["key-a", "key-b"]
    kept = judge.decode(fifth.value)
    assert [k.rows["seq"].size for k in kept.values()] == [0, 0] and kept[(B[1], B[2])].lost == [1]
    assert fifth.timeout_ms is None


def test_a_late_delivery_of_a_lost_message_is_said_against_its_own_key():
    state = FakeState()
    call(state, key_rows(*B, seq=1, published_us=5 * S, delivered_us=None) + key_rows(*A, seq=1, published_us=5 * S,
                                                                                     delivered_us=int(5.1 * S)))
    state = state.next_call(16_000)
    assert [(r["key"], r["kind"]) for r in call(state, []) if r["rtype"] == "finding"] == [("key-b", "lost")]
    late = key_rows(*B, seq=1, published_us=5 * S, delivered_us=17 * S)[1:]
    said = call(state.next_call(18_000), late)
    assert [(r["key"], r["kind"], r["form"]) for r in said if r["rtype"] == "finding"] == \
        [("key-b", "late_delivery", "after_lost")]


def clock(t_us: int) -> dict:
    """The driver's clock row as the query hands it to every bucket (stream.bucketed)."""
    return {"key": None, "sub_id": judge.CLOCK_SUB, "h": 0, "h2": 0, "meta": 0, "seq": judge.NULL, "t": t_us,
            "ack_t": judge.NULL, "att": judge.NULL}


@pytest.mark.parametrize("clock_us, b_lost", [(17 * S, True), (17 * S - 1, False)])
def test_a_call_with_the_clock_judges_at_the_watermark_the_next_window_will_have(clock_us, b_lost):
    """With the query's delay (2 s here), a call that holds the clock row judges at clock - delay in ms (Spark's
    rule for the next window's watermark), though Spark's own is still 0: A's message (horizon at 11 s) is decided
    at once, B's (horizon at 15 s) exactly when the clock is 17 s, and not 1 us before."""
    config = replace(CONFIG, delay_ms=2000)
    state = FakeState()
    rows = key_rows(*A, seq=1, published_us=1 * S, delivered_us=int(1.1 * S)) + \
        key_rows(*B, seq=1, published_us=5 * S, delivered_us=None) + [clock(clock_us)]
    said = call(state, rows, config)
    assert {r["key"]: r["decided"] for r in said if r["rtype"] == "stats"} == {"key-a": 1, "key-b": int(b_lost)}
    lost = [(r["key"], r["kind"], r["form"]) for r in said if r["rtype"] == "finding"]
    assert lost == ([("key-b", "lost", "past_horizon")] if b_lost else [])
    # B undecided: its timeout is its horizon (15 s), past the call's watermark (14.999 s)
    assert state.timeout_ms == (15_000 if not b_lost else 21_000)
    # the same call without the delay: the clock moves nothing, nothing is decided
    plain = FakeState()
    assert {r["key"]: r["decided"] for r in call(plain, rows) if r["rtype"] == "stats"} == {"key-a": 0, "key-b": 0}
    # a call with nothing but the clock judges the keys whose own timeout it passed, as a timed-out call would
    later = FakeState(plain.value)
    said = call(later, [clock(13_500_000)], config)  # watermark 11.5 s: A's horizon (11 s) passed, B's not
    assert [(r["rtype"], r["key"], r["decided"]) for r in said] == [("stats", "key-a", 1)]


def test_a_buckets_state_gives_back_each_keys_state():
    keys = {}
    for i, (h, h2) in enumerate([(5, -1), (-9, 3), (5, 2)]):
        keep = judge.KeyState(h, h2, f"key-{i}", i % 2)
        keep.rows = {name: np.arange(i + 2, dtype=np.int64) * (j + 1) + h for j, name in enumerate(judge._ROWS)}
        keep.emitted, keep.emitted_seq = [f"fid{i}a", f"fid{i}b"], [i, i + 1]
        keep.lost = list(range(judge.MAX_LOST_KEPT + 5)) if i == 1 else [i]
        keep.decided_through, keep.closed_through = 100 + i, judge.NULL if i == 0 else i
        keep.timeout_ms = None if i == 2 else 1000 + i
        keys[(h, h2)] = keep
    back = judge.decode(judge.encode(keys))
    assert list(back) == sorted(keys)
    for k, keep in keys.items():
        got = back[k]
        assert (got.h, got.h2, got.key, got.sub_id) == (keep.h, keep.h2, keep.key, keep.sub_id)
        assert all(np.array_equal(got.rows[name], keep.rows[name]) for name in judge._ROWS)
        assert (got.emitted, got.emitted_seq) == (keep.emitted, keep.emitted_seq)
        assert got.lost == keep.lost[-judge.MAX_LOST_KEPT:]
        assert (got.decided_through, got.closed_through, got.timeout_ms) == \
            (keep.decided_through, keep.closed_through, keep.timeout_ms)


def test_an_out_of_the_per_key_format_is_refused_in_one_line(tmp_path):
    out = tmp_path / "w"
    out.mkdir()
    (out / "watch.json").write_text(json.dumps({"format": 1, "pubsubguard": "0.1.0", "stack": "watch", "project": "p",
                                                "run_id": "r"}))
    assert outdir.FORMAT == 2
    with pytest.raises(UserError) as refused:
        outdir.WatchDir.open(out, "watch", "p")
    said = str(refused.value)
    assert "\n" not in said and said.startswith(f"--out {out.absolute()}: its checkpoint was written by pubsubguard")
    assert "in watch format 1;" in said and "reads format 2 only: use another --out" in said
    # another stack's directory is said to be another stack's, whatever its format
    (out / "watch.json").write_text(json.dumps({"format": 1, "pubsubguard": "0.1.0", "stack": "prod", "project": "p",
                                                "run_id": "r"}))
    with pytest.raises(UserError, match="holds the watch of stack 'prod'"):
        outdir.WatchDir.open(out, "watch", "p")
    # a format-2 directory of the same stack opens (resumed)
    (out / "watch.json").write_text(json.dumps({"format": 2, "pubsubguard": "0.1.0", "stack": "watch", "project": "p",
                                                "run_id": "r"}))
    assert outdir.WatchDir.open(out, "watch", "p").resumed
