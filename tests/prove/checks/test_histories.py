"""Property tests: every legal history passes the checks; every mutation is caught, where injected.

Each hypothesis example generates one legal history over six declared subscriptions (plain,
ordered, exactly-once, ordered exactly-once, dead-lettering, ordered dead-lettering), applies every
mutator that finds a place in it, and checks all the copies in ONE Spark run (each copy under its
own subscription and topic names). How many histories and mutations were checked is printed in
pytest's terminal summary (`pytest_terminal_summary` in tests/conftest.py).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from support import histories as H
from pubsubguard.validation.checks.run import run_checks
from pubsubguard.validation.checks.findings import FINDING_KINDS
from support.histories import SUBSCRIPTIONS

HISTORIES_PER_EXAMPLE = 3  # legal histories checked per Spark run (with all their mutations)
COUNTS = {"histories": 0, "mutations": 0, "by_mutator": {}, "not_applicable": {}}

workloads = st.builds(
    H.Workload,
    keys=st.integers(1, 4),
    messages_per_key=st.integers(1, 9),
    poison_rate=st.sampled_from([0.0, 0.15, 0.3]),
    publish_error_rate=st.sampled_from([0.0, 0.1]),
    fault_rate=st.sampled_from([0.0, 0.3, 0.5]),
    duplicate_rate=st.sampled_from([0.0, 0.2, 0.5]),
    subscriber_tasks=st.integers(1, 4),
    max_skew_us=st.sampled_from([0, 20_000, 100_000]),
    max_batch=st.integers(1, 3),
)


def _tables(spark, histories):
    pubs = [p for h in histories for p in h.publishes]
    dels = [d for h in histories for d in h.deliveries]
    first = histories[0]
    merged = H.History(first.run_id, [s for h in histories for s in h.subscriptions], pubs, dels)
    return spark.createDataFrame(merged.publish_table()), spark.createDataFrame(merged.delivery_table()), merged


def _key_has_dead_letter(h: H.History, sub: str, key: str) -> bool:
    return any(d["kind"] == "dead_letter" and d["subscription"] == sub and d["key"] == key for d in h.deliveries)


@pytest.mark.filterwarnings("ignore")
# derandomize: CI runs the same generated histories every time (a found failure is reproducible, not flaky);
# broader random sweeps are run by hand (see the closing notes).
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(workload=workloads, seed=st.integers(0, 2**31 - 1))
# an example where every mutator finds a place, so each runs in every CI run
@example(workload=H.Workload(keys=3, messages_per_key=8, poison_rate=0.15, fault_rate=0.5, duplicate_rate=0.5, max_batch=3), seed=0)
# found by a sweep: the regression mutator placed its clone after the failed message came again (a skip)
@example(workload=H.Workload(keys=3, messages_per_key=5, fault_rate=0.3, duplicate_rate=0.5, subscriber_tasks=1, max_skew_us=0, max_batch=3), seed=166)
def test_legal_histories_pass_and_every_mutation_is_caught(spark, workload, seed):
    copies, injected = [], {}
    for h in range(HISTORIES_PER_EXAMPLE):
        legal = H.generate(SUBSCRIPTIONS, workload, seed + h, run_id="run-prop")
        copies.append(H.renamed(legal, f"~h{h}~legal"))
        for i, (name, mutate) in enumerate(H.MUTATORS.items()):
            result = mutate(legal, random.Random(seed + h * 100 + i))
            if result is None:
                COUNTS["not_applicable"][name] = COUNTS["not_applicable"].get(name, 0) + 1
                continue
            mutated, injection = result
            suffix = f"~h{h}~m{i}"
            copies.append(H.renamed(mutated, suffix))
            injected[suffix] = (name, injection, mutated)
    publishes, deliveries, merged = _tables(spark, copies)
    findings = run_checks(publishes, deliveries, merged.subscriptions).findings

    legal_findings = [f for f in findings if f["subscription"].endswith("~legal")]
    assert legal_findings == [], f"legal history (seed {seed}, {workload}) raised {legal_findings}"
    COUNTS["histories"] += HISTORIES_PER_EXAMPLE

    for suffix, (name, inj, mutated) in injected.items():
        mine = [f for f in findings if f["subscription"].endswith(suffix)]
        sub = inj.subscription + suffix
        hit = [
            f
            for f in mine
            if f["kind"] == inj.kind and f["subscription"] == sub and f["key"] == inj.key and f["seq"] == inj.seq
        ]
        assert hit, f"{name} injected at {inj} (seed {seed}, {workload}) was not reported; findings: {mine}"
        if inj.form:
            assert all(f["form"] == inj.form for f in hit), hit
        expected = FINDING_KINDS[inj.kind][1]
        dl_sub = next(s for s in mutated.subscriptions if s.name == inj.subscription)
        if inj.kind == "out_of_order" and dl_sub.dead_lettering and _key_has_dead_letter(mutated, inj.subscription, inj.key):
            expected = "advisory"
        assert {f["severity"] for f in hit} == {expected}, hit
        others = [f for f in mine if f["severity"] == "error" and f not in hit]
        assert others == [], f"{name} injected at {inj} (seed {seed}, {workload}) also raised {others}"
        for f in hit:
            assert f["evidence"] and all(r.get("key") == f["key"] for r in f["evidence"]), f
        COUNTS["mutations"] += 1
        COUNTS["by_mutator"][name] = COUNTS["by_mutator"].get(name, 0) + 1



def test_publish_side_duplicates_are_reported_and_counted_never_as_redeliveries(spark):
    """A retried publish (the same key and seq under a second message id) on every kind of subscription:
    one `publish_duplicate` (advisory) with the rows of both message ids, counted in `publish_duplicates`;
    no exactly-once, ordering or dead-letter finding, and the redeliveries count is the legal history's."""
    legal = H.generate(SUBSCRIPTIONS, H.Workload(keys=3, messages_per_key=6, fault_rate=0.3, duplicate_rate=0.5), 11,
                       run_id="run-dup")
    copies, injected = [H.renamed(legal, "~legal")], {}
    for i, sub in enumerate(SUBSCRIPTIONS):
        result = H.mutate_publish_duplicate(legal, random.Random(i), subscription=sub.name)
        assert result is not None, sub.name
        mutated, injection = result
        copies.append(H.renamed(mutated, f"~d{i}"))
        injected[sub.name + f"~d{i}"] = injection
    publishes, deliveries, merged = _tables(spark, copies)
    checked = run_checks(publishes, deliveries, merged.subscriptions)
    findings = checked.findings
    stats = {r["subscription"]: r for r in checked.stats}
    assert [f for f in findings if f["subscription"].endswith("~legal")] == []
    for name, inj in injected.items():
        mine = [f for f in findings if f["subscription"] == name]
        assert [(f["kind"], f["severity"], f["key"], f["seq"]) for f in mine] == [
            ("publish_duplicate", "advisory", inj.key, inj.seq)], (name, mine)
        ids = {r["message_id"] for r in mine[0]["evidence"] if r["source"] == "delivery"}
        assert len(ids) == 2 and mine[0]["message_id"].endswith("/retried"), (name, ids)
        legal_name = name.rsplit("~", 1)[0] + "~legal"
        assert stats[name]["publish_duplicates"] == 1 and stats[legal_name]["publish_duplicates"] == 0
        assert stats[name]["redeliveries"] == stats[legal_name]["redeliveries"], (name, stats[name], stats[legal_name])


def test_completeness_is_per_message_id(spark):
    """An id the target accepted whose Publish reply the fault layer dropped (a publish row of the layer) must be
    delivered like the probe's own: never delivered, it is `lost` on the row of that id, although the same key
    and seq was delivered under the client's retried id; delivered, it is the advisory publish-side duplicate.
    Nothing else is raised either way (no exactly-once, ordering or dead-letter finding)."""
    legal = H.generate(SUBSCRIPTIONS, H.Workload(keys=3, messages_per_key=6, fault_rate=0.3, duplicate_rate=0.5), 17,
                       run_id="run-ids")
    copies, injected = [H.renamed(legal, "~legal")], {}
    for i, sub in enumerate(SUBSCRIPTIONS):
        s, k, q = H._messages(legal, H._not_dead_lettered_last_if_ordered(legal, sub.name))[0]
        for delivered in (False, True):
            m = legal.copy()
            probe_row = next(p for p in m.publishes if p["topic"] == sub.topic and p["key"] == k and p["seq"] == q)
            layer_id = f"{probe_row['message_id']}/accepted-reply-lost"
            m.publishes.append({**probe_row, "message_id": layer_id, "publisher_task": "fault-layer",
                                "publish_time_us": probe_row["publish_time_us"] + 1, "result_time_us": None})
            if delivered:
                first = min(H._rows(m, s, k, q), key=lambda r: r["receive_time_us"])
                twin = H._clone_delivery(first, first["receive_time_us"] + 1, "ack", m)
                twin.update(message_id=layer_id, delivery_attempt=1 if first["delivery_attempt"] else None)
                m.deliveries.append(twin)
            suffix = f"~{i}{'d' if delivered else 'u'}"
            copies.append(H.renamed(m, suffix))
            injected[sub.name + suffix] = (k, q, layer_id, delivered)
    publishes, deliveries, merged = _tables(spark, copies)
    checked = run_checks(publishes, deliveries, merged.subscriptions)
    findings = checked.findings
    assert [f for f in findings if f["subscription"].endswith("~legal")] == []
    for name, (k, q, layer_id, delivered) in injected.items():
        mine = [(f["kind"], f["severity"], f["key"], f["seq"], f["message_id"]) for f in findings if f["subscription"] == name]
        expected = ("publish_duplicate", "advisory") if delivered else ("lost", "error")
        assert mine == [(*expected, k, q, layer_id)], (name, mine)


def test_lost_only_where_a_final_read_proved_it(spark):
    """A message the target accepted and never delivered is `lost` on a subscription whose drain ended with a final
    read; on one whose drain was cut at its ceiling (`unproven`) it is no finding at all, only unsettled (the
    guarantee is then inconclusive). Every other finding is the same either way."""
    legal = H.generate(SUBSCRIPTIONS, H.Workload(keys=3, messages_per_key=6, fault_rate=0.3), 23, run_id="run-proof")
    mutated, injection = H.mutate_lost(legal, random.Random(5))
    proven, unproven = H.renamed(mutated, "~proven"), H.renamed(mutated, "~cut")
    publishes, deliveries, merged = _tables(spark, [proven, unproven])
    cut = injection.subscription + "~cut"
    checked = run_checks(publishes, deliveries, merged.subscriptions, unproven=frozenset({cut}))
    findings = checked.findings
    lost = [(f["subscription"], f["key"], f["seq"]) for f in findings if f["kind"] == "lost"]
    assert lost == [(injection.subscription + "~proven", injection.key, injection.seq)]
    assert [f for f in findings if f["subscription"] == cut] == []
    stats = {r["subscription"]: r for r in checked.stats}
    assert stats[cut]["published"] - stats[cut]["settled"] >= 1
