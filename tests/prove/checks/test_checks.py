"""Checks on small hand-built delivery logs.

Each case is a subscription of its own (own topic) in one run, so all cases are judged by one Spark
job: legal histories must raise no finding; each anomaly exactly the finding it should.
"""

from __future__ import annotations

import pytest

from pubsubguard.validation.checks.run import run_checks
from pubsubguard.validation.checks.verdict import guarantee_status
from pubsubguard.validation.evidence.records import DELIVERY_SCHEMA, PUBLISH_SCHEMA, DeclaredSubscription

import pyarrow as pa

RUN = "run-1"
MS, S = 1_000, 1_000_000
T = 1_700_000_000_000_000


def pub(topic, key, seq, at=0, poison=False, status="ok"):
    return {
        "run_id": RUN, "topic": topic, "key": key, "seq": seq,
        "message_id": f"{topic}/{key}/{seq}" if status == "ok" else None,
        "poison": poison, "status": status, "error": None if status == "ok" else "UNAVAILABLE",
        "publish_time_us": T + at, "publisher_task": "pub-0",
    }  # fmt: skip


def dlv(sub, key, seq, at, action="ack", after=100 * MS, result=None, deadline=10, attempt=None, task="task-0",
        kind="delivery", probe_run=RUN, topic=None):
    acked = action in ("ack", "nack", "late_ack")
    if action == "late_ack":
        after = deadline * S + after
    return {
        "run_id": RUN, "subscription": sub, "kind": kind,
        "message_id": f"{topic or 't-' + sub}/{key}/{seq}" if kind == "delivery" else f"dl/{key}/{seq}",
        "key": key, "seq": seq, "probe_run": probe_run, "delivery_attempt": attempt,
        "receive_time_us": T + at, "publish_time_us": T, "subscriber_task": task,
        "ack_id": f"{sub}-{key}-{seq}-{at}", "ack_deadline_s": deadline, "action": action,
        "ack_result": result or ("success" if acked else "none"),
        "ack_time_us": T + at + after if acked else None,
        "dl_source_delivery_count": None, "dl_source_subscription": None,
    }  # fmt: skip


def dead(sub, key, seq, at, count):
    row = dlv(sub, key, seq, at, action="none", kind="dead_letter")
    row["dl_source_delivery_count"] = count
    return row


PLAIN, ORDERED = {}, {"ordering": True}
EOD = {"exactly_once": True, "ack_deadline_s": 10}
DL = {"max_delivery_attempts": 5, "dead_letter_topic": "t-dlq"}

# name -> (declaration, publishes [(key, seq, poison, status)], deliveries, expected {(kind, key, seq, form)})
CASES = {
    # -- legal histories: no finding
    "legal-plain-duplicates": (PLAIN, [("a", 0), ("a", 1)], lambda s: [
        dlv(s, "a", 0, 1 * S), dlv(s, "a", 0, 3 * S),  # at-least-once: again after the ack
        dlv(s, "a", 1, 1 * S, "expire"), dlv(s, "a", 1, 2 * S),  # and while outstanding
    ], set()),
    "legal-ordered-rewind": (ORDERED, [("a", 0), ("a", 1), ("a", 2), ("a", 3)], lambda s: [
        dlv(s, "a", 0, 1 * S), dlv(s, "a", 1, 1 * S, "nack"), dlv(s, "a", 2, 1 * S),
        dlv(s, "a", 1, 3 * S), dlv(s, "a", 2, 3 * S),  # rewind to 1 replays 2 (acked) too
        dlv(s, "a", 3, 5 * S),
        dlv(s, "a", 3, 7 * S),  # at-least-once: the last one again (rewind to a settled seq)
    ], set()),
    "legal-ordered-publish-gap": (ORDERED, [("a", 0), ("a", 1, False, "error"), ("a", 2)], lambda s: [
        dlv(s, "a", 0, 1 * S), dlv(s, "a", 2, 1 * S),  # seq 1 never existed: 0 then 2 is consecutive
    ], set()),
    "legal-eod": (EOD, [("a", 0), ("a", 1)], lambda s: [
        dlv(s, "a", 0, 1 * S, "expire"), dlv(s, "a", 0, 12 * S),  # redelivered after the deadline
        dlv(s, "a", 1, 1 * S, "late_ack", result="invalid_ack_id"), dlv(s, "a", 1, 12 * S),
    ], set()),
    "legal-eod-ordered": (EOD | ORDERED, [("a", 0), ("a", 1)], lambda s: [
        dlv(s, "a", 0, 1 * S, "nack"), dlv(s, "a", 1, 1 * S, "nack"),  # abandoned after 0 failed
        dlv(s, "a", 0, 3 * S), dlv(s, "a", 1, 3 * S),
    ], set()),
    "legal-eod-ordered-rewind-supersedes": (EOD | ORDERED, [("a", 0), ("a", 1), ("a", 2)], lambda s: [
        # 0 held (its deadline set to 5 s); 1 and 2 acked meanwhile: acks must come in order, the target
        # holds them back (answered only after the rewind); the redelivery of 0 rewinds the key and
        # supersedes the outstanding deliveries of 1 and 2 (docs: every later message is redelivered)
        dlv(s, "a", 0, 1 * S, "expire", deadline=5),
        dlv(s, "a", 1, 1 * S, "ack", after=8 * S, result="invalid_ack_id"),
        dlv(s, "a", 2, 1 * S, "ack", after=8 * S, result="other"),
        dlv(s, "a", 0, 7 * S), dlv(s, "a", 1, 7 * S), dlv(s, "a", 2, 7 * S),
    ], set()),
    "legal-dead-letter": (DL, [("a", 0, True), ("a", 1)], lambda s: [
        *[dlv(s, "a", 0, i * S, "nack", attempt=i) for i in range(1, 6)],
        dead(s, "a", 0, 7 * S, 5), dlv(s, "a", 1, 1 * S, attempt=1),
    ], set()),
    "legal-dead-letter-ordered": (DL | ORDERED, [("a", 0, True), ("a", 1)], lambda s: [
        dlv(s, "a", 0, 1 * S, "nack", attempt=1), dlv(s, "a", 1, 1 * S, attempt=1),
        *[dlv(s, "a", 0, i * S, "nack", attempt=i) for i in range(2, 6)],
        dead(s, "a", 0, 8 * S, 5), dlv(s, "a", 1, 7 * S, attempt=2),
    ], set()),
    "not-declared-not-checked": (PLAIN, [("a", 0), ("a", 1), ("a", 2)], lambda s: [
        dlv(s, "a", 2, 1 * S), dlv(s, "a", 0, 2 * S, "late_ack"), dlv(s, "a", 1, 2 * S),  # order, stale ack: legal here
        dlv(s, "a", 0, 30 * S), *[dlv(s, "a", 1, i * S, "nack") for i in range(3, 10)],
    ], set()),
    # -- one finding each
    "lost": (PLAIN, [("a", 0), ("a", 1)], lambda s: [dlv(s, "a", 0, 1 * S)], {("lost", "a", 1, None)}),
    "unexpected": (PLAIN, [("a", 0)], lambda s: [
        dlv(s, "a", 0, 1 * S), dlv(s, "zz", 0, 1 * S), dlv(s, "a", 0, 2 * S, probe_run="run-0"),
    ], {("unexpected", "zz", 0, "unpublished"), ("unexpected", "a", 0, "foreign")}),
    "dup-after-ack": (EOD, [("a", 0)], lambda s: [dlv(s, "a", 0, 1 * S), dlv(s, "a", 0, 5 * S)],
                      {("duplicate_after_ack", "a", 0, None)}),
    "dup-outstanding": (EOD, [("a", 0)], lambda s: [
        dlv(s, "a", 0, 1 * S, "expire"), dlv(s, "a", 0, 4 * S, "nack", task="task-1"), dlv(s, "a", 0, 15 * S),
    ], {("duplicate_while_outstanding", "a", 0, None)}),
    "dup-outstanding-ordered-no-rewind": (EOD | ORDERED, [("a", 0), ("a", 1)], lambda s: [
        # 1 delivered again while outstanding, and no earlier seq was redelivered in between: no rewind
        dlv(s, "a", 0, 1 * S), dlv(s, "a", 1, 1 * S, "ack", after=8 * S, result="other"), dlv(s, "a", 1, 4 * S),
    ], {("duplicate_while_outstanding", "a", 1, None)}),
    "dup-outstanding-ordered-rewind-too-early": (EOD | ORDERED, [("a", 0), ("a", 1)], lambda s: [
        # 0 delivered again before its own deadline: the premature rewind is the finding, on 0 (1 follows it)
        dlv(s, "a", 0, 1 * S, "expire"), dlv(s, "a", 1, 1 * S, "ack", after=8 * S, result="other"),
        dlv(s, "a", 0, 3 * S), dlv(s, "a", 1, 3 * S),
    ], {("duplicate_while_outstanding", "a", 0, None)}),
    "dup-outstanding-after-rewind": (EOD | ORDERED, [("a", 0), ("a", 1)], lambda s: [
        # a rewind at 7 s supersedes 1's first delivery; its second (from 7 s, 10 s deadline) is outstanding at 9 s
        dlv(s, "a", 0, 1 * S, "expire", deadline=5), dlv(s, "a", 1, 1 * S, "ack", after=8 * S, result="other"),
        dlv(s, "a", 0, 7 * S), dlv(s, "a", 1, 7 * S, "expire"), dlv(s, "a", 1, 9 * S),
    ], {("duplicate_while_outstanding", "a", 1, None)}),
    "stale-late-ack": (EOD, [("a", 0)], lambda s: [dlv(s, "a", 0, 1 * S, "late_ack"), dlv(s, "a", 0, 20 * S)],
                       {("stale_ack_accepted", "a", 0, "late_ack")}),
    "stale-superseded": (EOD, [("a", 0)], lambda s: [
        dlv(s, "a", 0, 1 * S, "ack", after=8 * S), dlv(s, "a", 0, 3 * S, "nack"),
    ], {("stale_ack_accepted", "a", 0, "superseded"), ("duplicate_while_outstanding", "a", 0, None)}),
    "ooo-skip": (ORDERED, [("a", 0), ("a", 1), ("a", 2)], lambda s: [
        dlv(s, "a", 0, 1 * S, "expire"), dlv(s, "a", 2, 2 * S), dlv(s, "a", 0, 12 * S), dlv(s, "a", 1, 12 * S),
        dlv(s, "a", 2, 12 * S),
    ], {("out_of_order", "a", 2, "skip")}),
    "ooo-regression": (ORDERED, [("a", 0), ("a", 1), ("a", 2)], lambda s: [
        dlv(s, "a", 0, 1 * S, "nack"), dlv(s, "a", 1, 1 * S), dlv(s, "a", 2, 1 * S),
        dlv(s, "a", 1, 3 * S),  # back to 1 while 0 is unsettled
        dlv(s, "a", 0, 5 * S), dlv(s, "a", 1, 5 * S), dlv(s, "a", 2, 5 * S),
    ], {("out_of_order", "a", 1, "regression")}),
    "ooo-rewind-without-replay": (ORDERED, [("a", i) for i in range(4)], lambda s: [
        *[dlv(s, "a", i, 1 * S) for i in range(4)],
        dlv(s, "a", 1, 3 * S), dlv(s, "a", 3, 3 * S),  # rewind to 1, then 3 without replaying 2
    ], {("out_of_order", "a", 3, "rewind_without_replay")}),
    "ooo-dead-letter-advisory": (ORDERED | DL, [("a", 0, True), ("a", 1), ("a", 2)], lambda s: [
        *[dlv(s, "a", 0, i * S, "nack", attempt=i) for i in range(1, 6)],
        dead(s, "a", 0, 7 * S, 5), dlv(s, "a", 2, 8 * S, attempt=1), dlv(s, "a", 1, 9 * S, attempt=1),
    ], {("out_of_order", "a", 2, "skip")}),
    "dl-missing": (DL, [("a", 0, True)], lambda s: [dlv(s, "a", 0, i * S, "nack", attempt=i) for i in range(1, 6)],
                   {("dead_letter_missing", "a", 0, None)}),
    "dl-after-ack": (DL, [("a", 0)], lambda s: [
        *[dlv(s, "a", 0, i * S, "nack", attempt=i) for i in range(1, 5)],
        dlv(s, "a", 0, 5 * S, attempt=5), dead(s, "a", 0, 7 * S, 5),
    ], {("dead_letter_after_ack", "a", 0, None)}),
    "dl-early": (DL, [("a", 0, True)], lambda s: [
        dlv(s, "a", 0, 1 * S, "nack", attempt=1), dead(s, "a", 0, 2 * S, 1),
    ], {("dead_letter_early", "a", 0, None)}),
    "dl-exceeded": (DL, [("a", 0, True)], lambda s: [
        *[dlv(s, "a", 0, i * S, "nack", attempt=i) for i in range(1, 8)], dead(s, "a", 0, 9 * S, 7),
    ], {("delivery_attempts_exceeded", "a", 0, None)}),
}


@pytest.fixture(scope="module")
def inputs(spark):
    subs, pubs, dels = [], [], []
    for name, (decl, published, deliveries, _) in CASES.items():
        sub = DeclaredSubscription(name, f"t-{name}", **decl)
        subs.append(sub)
        for p in published:
            key, seq, poison, status = [*p, *[False, "ok"][len(p) - 2 :]]
            pubs.append(pub(sub.topic, key, seq, poison=poison, status=status))
        dels.extend(deliveries(name))
    publishes = spark.createDataFrame(pa.Table.from_pylist(pubs, schema=PUBLISH_SCHEMA))
    deliveries = spark.createDataFrame(pa.Table.from_pylist(dels, schema=DELIVERY_SCHEMA))
    return subs, publishes, deliveries


@pytest.fixture(scope="module")
def judged(inputs):
    subs, publishes, deliveries = inputs
    results = run_checks(publishes, deliveries, subs)
    return subs, results.findings, results.stats


def test_chunks_of_whole_keys_do_not_change_the_verdict(inputs):
    """The pass judges a partition in chunks of whole keys; tiny chunks cut it at every key."""
    subs, publishes, deliveries = inputs
    whole = run_checks(publishes, deliveries, subs)
    small = run_checks(publishes, deliveries, subs, chunk_rows=3)
    assert small.findings == whole.findings  # in one order, whatever the chunks
    assert small.stats == whole.stats


def test_subscriptions_by_case_or_by_join_give_the_same_verdict(inputs, monkeypatch):
    """Few subscriptions are found by a CASE over their names, many by a join: same findings and
    statistics, a topic with two declared subscriptions included (its twin saw no delivery)."""
    from pubsubguard.validation.checks import run as checks

    subs, publishes, deliveries = inputs
    twin = DeclaredSubscription("lost-twin", "t-lost")
    verdicts = []
    for case_up_to in (0, len(subs) + 1):
        monkeypatch.setattr(checks, "_BY_CASE_UP_TO", case_up_to)
        verdicts.append(run_checks(publishes, deliveries, [*subs, twin]))
    by_join, by_case = verdicts
    assert by_case.findings == by_join.findings and by_case.stats == by_join.stats
    lost_on_twin = [(f["kind"], f["seq"]) for f in by_case.findings if f["subscription"] == "lost-twin"]
    assert lost_on_twin == [("lost", 0), ("lost", 1)]


def test_the_evidence_read_by_names_or_by_a_join_gives_the_same_findings(inputs, monkeypatch):
    """The rows of the keys with findings are read filtered by the keys' names when they are few, by a semi-join
    with them when many (a key without a name, a foreign row's, among them): the same records either way, and
    every finding has rows, of its key."""
    from pubsubguard.validation.checks import run as checks

    subs, publishes, deliveries = inputs
    by_names = run_checks(publishes, deliveries, subs)
    monkeypatch.setattr(checks, "_PUSHDOWN_KEYS", 0)
    by_join = run_checks(publishes, deliveries, subs)
    assert by_join.findings == by_names.findings and by_names.findings
    assert all(r.get("key") == f["key"] for f in by_names.findings for r in f["evidence"])
    assert all(f["evidence"] for f in by_names.findings)


@pytest.mark.parametrize("case", list(CASES))
def test_case_raises_exactly_its_findings(judged, case):
    _, findings, _ = judged
    mine = [f for f in findings if f["subscription"] == case]
    got = {(f["kind"], f["key"], f["seq"], f["form"]) for f in mine}
    assert got == CASES[case][3], mine


def test_severity_guarantee_and_evidence(judged):
    _, findings, _ = judged
    by_case = {f["subscription"]: f for f in findings}
    advisory = by_case["ooo-dead-letter-advisory"]
    assert advisory["severity"] == "advisory" and advisory["form"] == "skip"
    skip = by_case["ooo-skip"]
    assert skip["severity"] == "error" and skip["guarantee"] == "ordering"
    assert skip["seqs"] == {"previous": 0, "blocking": 0} and skip["evidence_seqs"] == [2, 0, 0]
    assert skip["times"]["received_us"] == T + 2 * S
    assert by_case["dl-early"]["severity"] == "advisory"
    assert by_case["dl-early"]["attempts"] == {"seen": 1, "max": 5}
    assert by_case["dl-early"]["times"]["forwarded_us"] == T + 2 * S
    dup_times = by_case["dup-after-ack"]["times"]
    assert (dup_times["received_us"], dup_times["acked_us"]) == (T + 5 * S, T + 1 * S + 100 * MS)
    assert by_case["stale-late-ack"]["times"]["deadline_us"] == T + 11 * S
    assert by_case["lost"]["times"]["published_us"] == T
    lost = by_case["lost"]["evidence"]
    assert [(r["source"], r["seq"]) for r in lost] == [("publish", 1)]
    dup = by_case["dup-after-ack"]["evidence"]
    assert [(r["source"], r["receive_time_us"]) for r in dup if r["source"] == "delivery"] == [
        ("delivery", T + 1 * S),
        ("delivery", T + 5 * S),
    ]
    skip = by_case["ooo-skip"]["evidence"]
    assert {r["seq"] for r in skip if r["source"] == "delivery"} == {0, 2}


def test_stats(spark, judged):
    _, _, stats = judged
    (row,) = [r for r in stats if r["subscription"] == "legal-ordered-rewind"]
    assert {k: v for k, v in row.items() if not k.startswith("latency_")} == {
        "subscription": "legal-ordered-rewind", "published": 4, "delivered": 7, "distinct_delivered": 4, "acked": 4,
        "dead_lettered": 0, "settled": 4, "publish_duplicates": 0, "redeliveries": 3, "redelivery_rate": 3 / 7,
        "hottest_keys": [{"key": "a", "deliveries": 7}]}
    assert row["latency_p50_ms"] == pytest.approx(1000.0) and row["latency_p99_ms"] == pytest.approx(5000.0)
    assert len(stats) == len(CASES)


def test_an_empty_log_has_no_findings_and_zero_counts(spark):
    subs = [DeclaredSubscription("quiet", "t-quiet", exactly_once=True), DeclaredSubscription("idle", "t-idle")]
    publishes = spark.createDataFrame(pa.Table.from_pylist([], schema=PUBLISH_SCHEMA))
    deliveries = spark.createDataFrame(pa.Table.from_pylist([], schema=DELIVERY_SCHEMA))
    results = run_checks(publishes, deliveries, subs)
    assert results.findings == []
    rows = {r["subscription"]: r for r in results.stats}
    assert set(rows) == {"quiet", "idle"}
    for row in rows.values():
        assert (row["published"], row["delivered"], row["redeliveries"], row["hottest_keys"]) == (0, 0, 0, [])
        assert row["redelivery_rate"] is None and row["latency_p50_ms"] is None


def test_an_ack_deadline_out_of_range_is_named_in_the_error(spark):
    sub = DeclaredSubscription("odd", "t-odd")
    publishes = spark.createDataFrame(pa.Table.from_pylist([pub("t-odd", "a", 0)], schema=PUBLISH_SCHEMA))
    deliveries = spark.createDataFrame(pa.Table.from_pylist([dlv("odd", "a", 0, S, deadline=-1)], schema=DELIVERY_SCHEMA))
    with pytest.raises(Exception, match=r"deliveries: ack_deadline_s must be within 0\.\.32766, got -1"):
        run_checks(publishes, deliveries, [sub])


def test_guarantee_status():
    sub = DeclaredSubscription("s", "t", ordering=True, max_delivery_attempts=5, dead_letter_topic="d")
    f = [
        {"subscription": "s", "guarantee": "ordering", "severity": "advisory"},
        {"subscription": "s", "guarantee": "completeness", "severity": "error"},
        {"subscription": "other", "guarantee": "ordering", "severity": "error"},
    ]
    assert guarantee_status(f, sub, tested=True, poison_published=True) == {
        "ordering": "holds",
        "exactly_once": "not_tested",
        "dead_letter": "holds",
        "completeness": "violated",
        "endpoint_pinning": "not_tested",  # its endpoints were not observed
    }
    assert guarantee_status(f, sub, tested=True, poison_published=False)["dead_letter"] == "not_tested"
    pinned = [{"subscription": "s", "guarantee": "endpoint_pinning", "severity": "error"}]
    assert guarantee_status(pinned, sub, tested=True, poison_published=False,
                            endpoints_observed=True)["endpoint_pinning"] == "violated"
    assert guarantee_status([], sub, tested=True, poison_published=False, endpoints_observed=True)["endpoint_pinning"] == "holds"
    plain = DeclaredSubscription("s", "t")  # neither ordering nor exactly-once: nothing to pin
    assert guarantee_status([], plain, tested=True, poison_published=False, endpoints_observed=True)["endpoint_pinning"] == "not_tested"
    assert set(guarantee_status(f, sub, tested=False, poison_published=True).values()) == {"not_tested"}
    # unsettled messages: what held so far is inconclusive; what is violated stays violated
    assert guarantee_status(f, sub, tested=True, poison_published=True, unsettled=3) == {
        "ordering": "inconclusive",
        "exactly_once": "not_tested",
        "dead_letter": "inconclusive",
        "completeness": "violated",
        "endpoint_pinning": "not_tested",
    }
    # pinning is judged from the traffic seen: unsettled messages leave it as it is
    assert guarantee_status([], sub, tested=True, poison_published=True, unsettled=3,
                            endpoints_observed=True)["endpoint_pinning"] == "holds"
    # rows that may be missing (unsealed or partial evidence): every delivery-derived guarantee is
    # inconclusive, even a violated one; what is not tested or judged from the traffic stays as it is
    assert guarantee_status(f, sub, tested=True, poison_published=True, rows_missing=True,
                            endpoints_observed=True) == {
        "ordering": "inconclusive",
        "exactly_once": "not_tested",
        "dead_letter": "inconclusive",
        "completeness": "inconclusive",
        "endpoint_pinning": "holds",
    }


def test_report_sentences_are_rendered_from_the_fields(judged):
    """The report's sentences come from a finding's fields alone (pubsubguard.validation.checks.wording.describe)."""
    from pubsubguard.validation.checks.wording import clock, describe
    from pubsubguard.validation.checks.verdict import finding_record

    _, findings, _ = judged
    by_case = {f["subscription"]: finding_record({k: (v.asDict() if hasattr(v, "asDict") else v) for k, v in f.items()})
               for f in findings}
    assert describe(by_case["ooo-skip"]) == (
        f"skip: seq 2 received at {clock(T + 2 * S)} started a run after seq 0 while seq 0 was not settled"
    )
    assert describe(by_case["ooo-dead-letter-advisory"]).endswith(
        "; advisory: the key has a dead-lettered message and order is best effort for those"
    )
    assert describe(by_case["dup-after-ack"]) == (
        f"delivered again at {clock(T + 5 * S)}, 3.900 s after a successful ack at {clock(T + 1 * S + 100 * MS)}"
    )
    assert describe(by_case["dl-early"]) == (
        f"forwarded at {clock(T + 2 * S)} after 1 delivery attempts, fewer than the declared 5"
    )
    # with the run's start: UTC to the millisecond and the offset from it
    assert describe(by_case["dl-early"], T) == (
        f"forwarded at {clock(T + 2 * S, T)} after 1 delivery attempts, fewer than the declared 5"
    )
    assert clock(T + 2 * S + 5 * MS, T).endswith(" UTC (+2.005 s)") and clock(T - S, T).endswith(" UTC (-1.000 s)")


def test_receive_order_packed_in_one_sort_is_the_lexsort_order():
    """`kernel._receive_order` sorts key and time packed in an int64 (stable: ties keep the seq order the rows
    come in); where they do not fit it falls back to the lexsort. Both give the lexsort's order."""
    import numpy as np

    from pubsubguard.validation.checks.kernel import _receive_order

    rng = np.random.default_rng(7)
    key = np.sort(rng.integers(0, 300, 5000))
    seq = np.concatenate([np.sort(rng.integers(0, 50, n)) for n in np.bincount(key, minlength=300)])
    for span in (1_000, 2**55):  # packed; too wide to pack beside the keys (9 bits): the lexsort
        t_us = 1_795_000_000_000_000 + rng.integers(0, span, len(key))
        t_us[::7] = t_us[0]  # ties in time: by seq, then as given
        expected = np.lexsort((seq, t_us, key))
        assert np.array_equal(_receive_order(key, t_us, seq), expected)
