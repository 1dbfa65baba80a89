"""The probe's count of deliveries per message (the fault draw hashes it) stays bounded in a watch that runs for
days, and counts as before within its span."""

from __future__ import annotations

import time

from pubsubguard.validation.probe.faults import DeliveryCounts


def test_counts_each_message_and_forgets_only_what_two_spans_did_not_see():
    counts = DeliveryCounts(span_s=0.2)
    assert [counts.count(("sub", "m1")) for _ in range(3)] == [1, 2, 3]
    assert counts.count(("sub", "m2")) == 1
    assert counts.count(("other", "m1")) == 1  # per twin
    time.sleep(0.25)
    # one span later: what was seen in the span before still counts on
    assert counts.count(("sub", "m1")) == 4
    time.sleep(0.25)
    # m2 was last seen two spans ago: gone, and so is everything of that span
    assert counts.count(("sub", "m3")) == 1
    assert len(counts) == 2  # m1 (previous span) and m3
    assert counts.count(("sub", "m2")) == 1


def test_a_day_of_messages_keeps_two_spans_at_most():
    counts = DeliveryCounts(span_s=0.05)
    for index in range(2_000):
        counts.count(("sub", str(index)))
        if index % 200 == 199:
            time.sleep(0.06)
    assert len(counts) <= 400
