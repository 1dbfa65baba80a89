"""The fault layer's schedule (validation/wire/nemesis.py): parsing, one-line errors naming entry and field, the
JSON Schema agreeing with the loader, and the judge of planted anomalies. The layer on the wire is
proven on the emulator in tests/test_nemesis_e2e.py."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from pubsubguard.validation.wire.schedule import PLANTED, ScheduleError, load_schedule, parse_schedule
from pubsubguard.validation.checks import applied_faults
from pubsubguard.validation.evidence.records import DeclaredSubscription
from support import ROOT

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "nemesis.schema.json").read_text())

GOOD = [
    {"kind": "drop_delivery", "subscription": "s", "key": "key-002", "seq": 3},
    {"kind": "duplicate_after_ack", "subscription": "s", "rate": 0.1},
    {"kind": "ack_lie", "subscription": "s", "key": "key-000", "seq": 0},
    {"kind": "swap", "subscription": "s", "key": "key-001", "seq": 4},
    {"kind": "strip_dead_letter_attributes", "subscription": "drain", "rate": 1},
    {"kind": "kill_stream", "subscription": "s", "after_s": 5, "every_s": 10},
    {"kind": "lose_response", "rpc": "acknowledge", "subscription": "s", "rate": 0.2},
    {"kind": "lose_response", "rpc": "modify_ack_deadline", "subscription": "s", "after_s": 1, "for_s": 3},
    {"kind": "delay", "rpc": "publish", "topic": "t", "ms": 200, "rate": 0.5},
    {"kind": "lose_response", "rpc": "publish", "topic": "t", "rate": 0.3},
    {"kind": "lose_response", "rpc": "publish", "topic": "t", "key": "key-001", "seq": 2},
    {"kind": "partition", "subscription": "s", "task": "sub-1", "after_s": 4, "for_s": 15},
    {"kind": "netem", "delay_ms": 80, "loss": 0.05, "reorder": 0.2, "after_s": 3, "for_s": 10},
    {"kind": "netem", "loss": 0.1, "after_s": 1, "every_s": 10, "for_s": 2},
]

BAD = [  # (entry, the field the one line names, a word of the reason)
    ({"kind": "explode", "subscription": "s", "rate": 1}, "faults[0].kind", "expected one of"),
    ({"kind": "drop_delivery", "subscription": "s", "key": "key-000"}, "faults[0].seq", "together"),
    ({"kind": "drop_delivery", "subscription": "s", "rate": 1.5}, "faults[0].rate", "0 to 1"),
    ({"kind": "drop_delivery", "subscription": "s", "after_s": 3}, "faults[0].after_s", "selects messages"),
    ({"kind": "drop_delivery", "subscription": "s", "key": "k", "seq": 1, "rate": 0.1}, "faults[0].rate", "one selector"),
    ({"kind": "drop_delivery", "rate": 0.1}, "faults[0].subscription", "names a subscription"),
    ({"kind": "swap", "subscription": "s", "rate": 0.1}, "faults[0].rate", "key + seq"),
    ({"kind": "kill_stream", "subscription": "s"}, "faults[0].after_s", "timed"),
    ({"kind": "kill_stream", "subscription": "s", "after_s": 1, "for_s": 2}, "faults[0].for_s", "instant"),
    ({"kind": "partition", "subscription": "s", "after_s": 1}, "faults[0].for_s", "for_s"),
    ({"kind": "lose_response", "subscription": "s", "rate": 0.1}, "faults[0].rpc", "expected one of"),
    ({"kind": "lose_response", "rpc": "publish", "subscription": "s", "rate": 0.1}, "faults[0].topic", "topic"),
    ({"kind": "delay", "rpc": "acknowledge", "subscription": "s", "rate": 0.1}, "faults[0].ms", "ms"),
    ({"kind": "delay", "rpc": "publish", "subscription": "s", "ms": 5, "rate": 0.1}, "faults[0].topic", "topic"),
    ({"kind": "drop_delivery", "subscription": "s", "rate": 1, "task": "sub-0"}, "faults[0].task", "only partition"),
    ({"kind": "drop_delivery", "subscription": "s", "rate": 1, "colour": "red"}, "faults[0].colour", "unknown field"),
    ({"kind": "kill_stream", "subscription": "s", "after_s": 1, "every_s": 0}, "faults[0].every_s", "positive"),
    ({"kind": "netem", "subscription": "s", "loss": 0.1, "after_s": 1, "for_s": 2}, "faults[0].subscription", "every packet"),
    ({"kind": "netem", "loss": 0.1, "after_s": 1}, "faults[0].for_s", "for_s"),
    ({"kind": "netem", "loss": 0.1, "for_s": 1}, "faults[0].after_s", "timed"),
    ({"kind": "netem", "after_s": 1, "for_s": 2}, "faults[0].delay_ms", "delay_ms or loss"),
    ({"kind": "netem", "loss": 2, "after_s": 1, "for_s": 2}, "faults[0].loss", "0 to 1"),
    ({"kind": "netem", "loss": 0.1, "reorder": 0.5, "after_s": 1, "for_s": 2}, "faults[0].reorder", "needs delay_ms"),
    ({"kind": "delay", "rpc": "publish", "topic": "t", "ms": 5, "rate": 0.1, "loss": 0.1}, "faults[0].loss", "only netem"),
]


def test_good_schedule_parses_and_the_schema_accepts_it():
    schedule = parse_schedule({"seed": 7, "faults": GOOD}, "s.yaml")
    assert [e.kind for e in schedule.entries] == [g["kind"] for g in GOOD]
    assert schedule.seed == "7"
    jsonschema.validate({"seed": 7, "faults": GOOD}, SCHEMA)


@pytest.mark.parametrize("entry,field,reason", BAD, ids=[f"{b[0]['kind']}-{b[1]}" for b in BAD])
def test_bad_entry_is_one_line_naming_entry_and_field(entry, field, reason):
    with pytest.raises(ScheduleError) as err:
        parse_schedule({"faults": [entry]}, "s.yaml")
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"--nemesis s.yaml: {field}:") and reason in line, line
    # the schema refuses every one of them too: it documents what the loader enforces
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"faults": [entry]}, SCHEMA)


@pytest.mark.parametrize("text,where", [("[1, 2]", "the document"), ("faults: 3", "faults"),
                                        ("faults: []\nextra: 1", "extra"), ("faults: [\n", "not YAML")])
def test_bad_document(tmp_path, text, where):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScheduleError, match=where):
        load_schedule(path)


def test_cli_bad_schedule_is_one_line_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("faults:\n  - {kind: ack_lie, subscription: s, key: key-001}\n")
    proc = subprocess.run([sys.executable, "-m", "pubsubguard", "verify", "--nemesis", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "faults[0].seq" in proc.stderr and "Traceback" not in proc.stderr


def test_names_checked_against_the_run():
    schedule = parse_schedule({"faults": [{"kind": "ack_lie", "subscription": "nope", "rate": 1}]}, "s")
    with pytest.raises(ScheduleError, match=r"faults\[0\].subscription 'nope'"):
        schedule.check_names({"a", "b"}, {"t"})


def test_time_windows():
    e = parse_schedule({"faults": [{"kind": "partition", "subscription": "s", "after_s": 2, "every_s": 10,
                                            "for_s": 3}]}, "s").entries[0]
    assert [e.active(t) for t in (1, 2, 4.9, 5.1, 12, 15.5)] == [False, True, True, False, True, False]


def _row(kind, sub, key, seq, detail="applied", **extra):
    return {"kind": kind, "planted": kind in PLANTED, "subscription": sub, "key": key, "seq": seq,
            "detail": detail, "entry": 0, "rpc": "StreamingPull", **extra}


SUBS = {"eod": DeclaredSubscription("eod", "t", exactly_once=True), "ord": DeclaredSubscription("ord", "t", ordering=True),
        "plain": DeclaredSubscription("plain", "t")}


def test_judge_planted_exactly():
    applied = [_row("drop_delivery", "plain", "key-000", 1), _row("ack_lie", "eod", "key-001", 2),
               _row("swap", "ord", "key-002", 0), _row("duplicate_after_ack", "plain", "key-000", 3),
               _row("drop_delivery", "plain", "key-001", 1, detail="NOT applied: ...")]
    findings = [{"subscription": "plain", "kind": "lost", "key": "key-000", "seq": 1, "severity": "error"},
                {"subscription": "eod", "kind": "duplicate_after_ack", "key": "key-001", "seq": 2, "severity": "error"},
                {"subscription": "ord", "kind": "out_of_order", "key": "key-002", "seq": 1, "severity": "error"},
                {"subscription": "ord", "kind": "out_of_order", "key": "key-002", "seq": 2, "severity": "error"}]
    verdict = applied_faults.judge_planted(applied, findings, SUBS)
    assert len(verdict["expected"]) == 3 and len(verdict["found"]) == 3 and not verdict["missed"]
    assert not verdict["unplanted"]
    # a finding elsewhere is unplanted; one a conformance scenario explains is counted apart, not hidden
    other = {"subscription": "ord", "kind": "out_of_order", "key": "key-000", "seq": 4, "severity": "error"}
    assert applied_faults.judge_planted(applied, findings + [other], SUBS)["unplanted"] == [other]
    explained = applied_faults.judge_planted(applied, findings + [other], SUBS, explained=lambda f: f is other)
    assert explained["explained"] == [other] and not explained["unplanted"]
    # a planted anomaly the checks missed is named
    missed = applied_faults.judge_planted(applied, findings[1:], SUBS)["missed"]
    assert [(m["kind"], m["key"], m["seq"]) for m in missed] == [("lost", "key-000", 1)]
    # a duplicate where exactly-once is not declared: a counted redelivery
    red = applied_faults.judge_redeliveries(applied, SUBS, {"plain": 1})
    assert len(red["found"]) == 1 and not red["missed"] and not red["unplanted"]
    assert applied_faults.judge_redeliveries(applied, SUBS, {"plain": 0})["missed"]


def test_held_under_names_network_faults():
    applied = [_row("kill_stream", "eod", None, None)] * 2 + [
        _row("lose_response", "eod", None, None, rpc="Acknowledge")] * 3 + [_row("ack_lie", "eod", "k", 1)]
    counts = applied_faults.guarantee_faults(applied, "eod")
    assert applied_faults.held_under(counts) == "2 stream kills, 3 lost ack responses"
