"""The pass over the probe's bucketed layout (validation/checks/buckets.py) against the shuffle pass.

Its packed rows are Spark's (`run._unified`, sorted by `run._ORDER`), row for row, on the legal histories, every
mutation and rows no probe writes; its hashes are Spark's on hostile strings; a whole check of evidence in the
layout gives the shuffle pass's findings and statistics; a file whose layout metadata lies is judged the other way,
and said.
"""

from __future__ import annotations

import io
import json
import random
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from support import histories as H
from pubsubguard.validation.checks import buckets, chunk
from pubsubguard.validation.checks import run as checks_run
from pubsubguard.validation.evidence import layout, spark_hash
from pubsubguard.validation.evidence.records import DELIVERY_SCHEMA, PUBLISH_SCHEMA, DeclaredSubscription

SUBS = [
    DeclaredSubscription("plain", "t-plain"),
    DeclaredSubscription("ordered", "t-ordered", ordering=True),
    DeclaredSubscription("eod", "t-eod", exactly_once=True, ack_deadline_s=20),
    DeclaredSubscription("dl", "t-dl", max_delivery_attempts=5, dead_letter_topic="dlq"),
    DeclaredSubscription("ordered-too", "t-ordered"),  # a second subscription of one topic: publishes count twice
]
WORKLOAD = H.Workload(keys=6, messages_per_key=12, poison_rate=0.05, fault_rate=0.2, duplicate_rate=0.15)


def _hostile_strings(rng: random.Random, n: int) -> list[str | None]:
    alphabet = "ab/~-_0123456789\u00e9\u4e2d\U0001f600\x00'\\\" "
    return [None, ""] + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 90))) for _ in range(n)]


def test_hashes_are_sparks_bit_for_bit(spark):
    rng = random.Random(5)
    words = _hostile_strings(rng, 1500)
    subs = [rng.randint(-3, 5000) for _ in words]
    rows = spark.createDataFrame(list(zip(subs, words)), "sub int, word string").selectExpr(
        "xxhash64(sub, word) AS a", "hash(sub, word) AS b", "xxhash64(word) AS c").collect()
    array, sub = pa.array(words, pa.string()), np.array(subs)
    a = spark_hash.signed64(spark_hash.xxhash64_strings(array, spark_hash.xxhash64_int(sub, spark_hash.SEED)))
    b = spark_hash.signed32(spark_hash.murmur3_strings(array, spark_hash.murmur3_int(sub, spark_hash.SEED)))
    c = spark_hash.signed64(spark_hash.xxhash64_strings(array, spark_hash.SEED))
    assert [r.a for r in rows] == a.tolist()
    assert [r.b for r in rows] == b.tolist()
    assert [r.c for r in rows] == c.tolist()
    # a slice of a larger array (an offset into Arrow's buffers) hashes as the values it holds
    assert spark_hash.xxhash64_strings(array.slice(7, 20), 42).tolist() == spark_hash.xxhash64_strings(
        pa.array(words[7:27], pa.string()), 42).tolist()


def _with_strange_rows(publishes: pa.Table, deliveries: pa.Table, run_id: str) -> tuple[pa.Table, pa.Table]:
    """Rows no probe writes: another run's, without key or seq or run attribute, an undeclared subscription's, a
    dead-letter row without its count, a publish of an undeclared topic, a failed publish, a null deadline."""
    base = deliveries.slice(0, 1).to_pylist()[0]
    odd = [
        {**base, "probe_run": "another-run", "message_id": "m-other"},
        {**base, "key": None, "message_id": "m-nokey"},
        {**base, "seq": None, "message_id": "m-noseq"},
        {**base, "probe_run": None, "message_id": "m-norun"},
        {**base, "subscription": "undeclared", "message_id": "m-undeclared"},
        {**base, "kind": "dead_letter", "dl_source_delivery_count": None, "message_id": "m-dl"},
        {**base, "ack_deadline_s": None, "action": "late_ack", "ack_result": "success", "message_id": "m-late"},
        {**base, "key": "\u4e2d/\U0001f600", "seq": 3, "action": "crash", "delivery_attempt": None, "message_id": "x" * 70},
    ]
    pbase = publishes.slice(0, 1).to_pylist()[0]
    podd = [
        {**pbase, "topic": "undeclared-topic", "message_id": "p-undeclared"},
        {**pbase, "status": "error", "message_id": None, "seq": 999},
        {**pbase, "poison": True, "seq": 998, "message_id": "p-poison"},
        {**pbase, "key": "\u4e2d/\U0001f600", "seq": 3, "message_id": "y" * 70},
    ]
    pub_schema, del_schema = (pa.schema([f.with_nullable(True) for f in s]) for s in (PUBLISH_SCHEMA, DELIVERY_SCHEMA))
    return (pa.concat_tables([publishes.cast(pub_schema), pa.Table.from_pylist(podd, schema=pub_schema)]),
            pa.concat_tables([deliveries.cast(del_schema), pa.Table.from_pylist(odd, schema=del_schema)]))


def _sparks_rows(spark, publishes: pa.Table, deliveries: pa.Table) -> list[tuple]:
    from pyspark.sql.pandas.types import from_arrow_schema

    pubs = spark.createDataFrame(publishes, from_arrow_schema(publishes.schema))
    dels = spark.createDataFrame(deliveries, from_arrow_schema(deliveries.schema))
    unified = checks_run._unified(pubs, dels, SUBS)
    ordered = unified.orderBy(*[__import__("pyspark.sql.functions", fromlist=["expr"]).expr(e) for e in checks_run._ORDER])
    return [tuple(r) for r in ordered.select(*chunk.INPUT_COLUMNS).collect()]


def _ours(publishes: pa.Table, deliveries: pa.Table) -> list[tuple]:
    declared = buckets.Declared.of(SUBS)
    table = buckets.packed(publishes, deliveries, declared, 0, 1)
    return [tuple(r[c] for c in chunk.INPUT_COLUMNS) for r in table.to_pylist()]


def _same_up_to_ties(ours: list[tuple], sparks: list[tuple]) -> None:
    """The same rows; in the same order wherever the order's columns tell them apart (Spark does not order ties)."""
    assert sorted(ours, key=repr) == sorted(sparks, key=repr)

    def order_key(r):
        h, meta, seq, t = r[0], r[1], r[2], r[3]
        return (h, meta >> 32, -2**63 if seq is None else seq, (meta & 3) == chunk.FOREIGN, t, meta & 3)

    assert [order_key(r) for r in ours] == [order_key(r) for r in sparks]


@pytest.mark.parametrize("mutation", [None, *sorted(H.MUTATORS)])
def test_packed_rows_are_the_shuffle_pass_rows(spark, mutation):
    legal = H.generate(SUBS, WORKLOAD, seed=11, run_id="run-b")
    history = legal
    if mutation is not None:
        mutated = H.MUTATORS[mutation](legal, random.Random(3))
        if not mutated:
            pytest.skip(f"{mutation}: no place for it in this history")  # the generator's choice, not a gap
        history = mutated[0]
    publishes, deliveries = _with_strange_rows(history.publish_table(), history.delivery_table(), "run-b")
    _same_up_to_ties(_ours(publishes, deliveries), _sparks_rows(spark, publishes, deliveries))


@pytest.mark.parametrize("silent", [["ordered-too"], ["plain"], ["plain", "ordered", "eod", "dl", "ordered-too"]])
def test_a_subscription_that_received_nothing_keeps_its_keys_rows_together(spark, tmp_path, silent):
    """A subscription with publish rows and no delivery row in the bucket (a drain cut before its first delivery,
    beside a sibling of its topic that received everything): the packed rows and the verdict are still the
    shuffle pass's. The ranks of the keys were computed for each log's own subscriptions, so the sort parted the
    sibling's publishes from its deliveries: every message lost and every delivery unexpected (CI, stop 69)."""
    history = H.generate(SUBS, WORKLOAD, seed=6, run_id="run-s")
    publishes = history.publish_table()
    deliveries = history.delivery_table()
    deliveries = deliveries.filter(pc.invert(pc.is_in(deliveries["subscription"], pa.array(silent))))
    _same_up_to_ties(_ours(publishes, deliveries), _sparks_rows(spark, publishes, deliveries))
    bucketed = H.write_evidence(tmp_path / "bucketed", "run-s", SUBS, publishes, deliveries)
    plain = H.write_evidence(tmp_path / "plain", "run-s", SUBS, publishes, deliveries, bucketed=False)
    by_buckets, shuffled = _checked(spark, bucketed), _checked(spark, plain)
    assert by_buckets.sorted_input.startswith(f"checks: read the evidence's {layout.BUCKETS} buckets in place")
    assert _verdict(by_buckets) == _verdict(shuffled)
    kinds = {(r["subscription"], r["kind"]) for r in by_buckets.findings}
    assert not any(kind == "unexpected" for _, kind in kinds), kinds  # every delivery is of a published message
    assert {name for name, kind in kinds if kind == "lost"} == set(silent)  # only the silent ones' messages


def test_a_deadline_out_of_range_is_refused_as_the_shuffle_pass_refuses_it():
    legal = H.generate(SUBS, WORKLOAD, seed=2, run_id="r")
    deliveries = legal.delivery_table()
    bad = deliveries.set_column(deliveries.schema.get_field_index("ack_deadline_s"), "ack_deadline_s",
                                pa.array([-1] * deliveries.num_rows, pa.int64()))
    with pytest.raises(ValueError, match="ack_deadline_s must be within"):
        _ours(legal.publish_table(), bad)


def _verdict(results) -> tuple:
    return results.findings, results.stats  # each in one order


def _frames(spark, directory):
    return spark.read.parquet(str(directory / "publishes")), spark.read.parquet(str(directory / "deliveries"))


def _checked(spark, directory):
    from pubsubguard.validation.evidence.records import RunInfo

    return checks_run.run_checks(*_frames(spark, directory), RunInfo.read(directory).subscriptions, evidence_dir=directory)


def _mutated_logs() -> tuple[pa.Table, pa.Table]:
    history = H.generate(SUBS, WORKLOAD, seed=4, run_id="run-c")
    for name in ("lost", "out_of_order/skip", "duplicate_while_outstanding", "dead_letter_missing", "unexpected"):
        mutated = H.MUTATORS[name](history, random.Random(8))
        history = mutated[0] if mutated else history
    return _with_strange_rows(history.publish_table(), history.delivery_table(), "run-c")


def test_a_check_of_the_layout_is_the_shuffle_pass(spark, tmp_path):
    pubs, dels = _mutated_logs()
    bucketed = H.write_evidence(tmp_path / "bucketed", "run-c", SUBS, pubs, dels, row_group_size=97)
    plain = H.write_evidence(tmp_path / "plain", "run-c", SUBS, pubs, dels, row_group_size=97, bucketed=False)
    by_buckets = _checked(spark, bucketed)
    assert by_buckets.sorted_input.startswith(
        f"checks: read the evidence's {layout.BUCKETS} buckets in place (no shuffle); kept the sorted input in ")
    shuffled = _checked(spark, plain)
    assert shuffled.sorted_input.startswith("checks: kept the sorted input")
    found, stats = _verdict(by_buckets)
    assert (found, stats) == _verdict(shuffled)
    again = _checked(spark, bucketed)  # a re-check reads what the bucket pass kept
    assert again.sorted_input.startswith("checks: read the sorted input an earlier check kept")
    assert _verdict(again) == (found, stats) and again.plot == by_buckets.plot
    unkept = checks_run.run_checks(*_frames(spark, bucketed), SUBS, evidence_dir=bucketed, keep=False)
    assert unkept.sorted_input is None  # nothing to say: nothing kept, as asked (the warm-up's check is silent too)
    assert _verdict(unkept) == (found, stats)
    assert {r["kind"] for r in by_buckets.findings} >= {"lost", "out_of_order", "unexpected"}
    assert by_buckets.plot == shuffled.plot  # what the report draws, too


def test_the_findings_rows_read_on_the_driver_are_the_rows_spark_reads(spark, tmp_path, monkeypatch):
    """Evidence in the layout: the rows of the keys with findings are read on the driver from their buckets' row
    groups (null and hostile keys among them); above DRIVER_ROWS, by Spark: the same records either way."""
    directory = H.write_evidence(tmp_path / "bucketed", "run-c", SUBS, *_mutated_logs(), row_group_size=97)
    answers = []
    read = buckets.rows_of_keys
    monkeypatch.setattr(buckets, "rows_of_keys", lambda *args: answers.append(read(*args)) or answers[-1])
    on_driver = _checked(spark, directory)
    assert len(answers) == 1 and answers[0] is not None
    monkeypatch.setattr(buckets, "DRIVER_ROWS", 0)
    by_spark = _checked(spark, directory)
    assert len(answers) == 2 and answers[1] is None
    assert on_driver.findings == by_spark.findings and on_driver.findings
    assert all(f["evidence"] for f in on_driver.findings if f["kind"] != "lost")
    assert any(f["key"] is None for f in on_driver.findings)  # a null key's rows come from the seed's bucket


def test_the_driver_reads_only_the_row_groups_that_hold_a_wanted_key(tmp_path):
    """`rows_of_keys` skips a bucket's row group whose key dictionary holds none of the wanted keys (nor a null key,
    when one is wanted), and reads the one that does."""
    history = H.generate(SUBS, WORKLOAD, seed=3, run_id="run-g")
    directory = H.write_evidence(tmp_path / "ev", "run-g", SUBS, history.publish_table(), history.delivery_table())
    part = str(next((directory / "deliveries").glob("*.parquet")))
    count, groups = layout.row_groups(pq.read_metadata(part))
    key = pq.read_table(part, columns=["key"])["key"].drop_null()[0].as_py()
    bucket = int(layout.buckets_of(pa.array([key], pa.string()), count)[0])
    everything = set(range(count))
    _, held = buckets._groups_in(part, count, everything, pa.array([key], pa.string()), null=False)
    assert held == [groups.index(bucket)]
    _, held = buckets._groups_in(part, count, everything, pa.array(["no such key"], pa.string()), null=False)
    assert held == []
    assert buckets.rows_of_keys(([], [part]), count, ["no such key"])[1].num_rows == 0
    rows = buckets.rows_of_keys(([], [part]), count, [key])[1]
    assert rows.num_rows and set(rows["key"].to_pylist()) == {key}
    assert rows.num_rows == pc.sum(pc.equal(pq.read_table(part, columns=["key"])["key"], key)).as_py()


def test_a_file_whose_layout_lies_is_judged_by_the_shuffle_pass_and_said(spark, tmp_path):
    history = H.generate(SUBS, WORKLOAD, seed=9, run_id="run-d")
    history = H.MUTATORS["lost"](history, random.Random(1))[0]
    directory = H.write_evidence(tmp_path / "ev", "run-d", SUBS, history.publish_table(), history.delivery_table())
    honest = _verdict(_checked(spark, directory))
    shutil.rmtree(directory / "checks-input", ignore_errors=True)
    # the same rows, their row groups labelled with other buckets (as a writer with a wrong hash would)
    part = next((directory / "deliveries").glob("*.parquet"))
    file = pq.ParquetFile(part)
    count, groups = layout.row_groups(file.metadata)
    lying = json.dumps({"format": layout.LAYOUT, "buckets": count, "row_groups": [(b + 1) % count for b in groups]})
    schema = file.schema_arrow.with_metadata({layout.LAYOUT_KEY: lying.encode()})
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, schema) as writer:
        for i in range(file.num_row_groups):
            writer.write_table(file.read_row_group(i).replace_schema_metadata(schema.metadata))
    part.write_bytes(sink.getvalue())
    from pubsubguard.validation.evidence import seal

    seal.seal(directory, "run-d")
    results = _checked(spark, directory)
    assert results.sorted_input.startswith("checks: the evidence's bucketed layout could not be read (")
    assert "judged with the shuffle pass" in results.sorted_input
    assert _verdict(results) == honest


def test_a_part_file_in_the_layout_reads_as_any_other():
    rows = H.generate(SUBS, WORKLOAD, seed=1, run_id="r").delivery_table()
    file = pq.ParquetFile(io.BytesIO(layout.part_bytes(rows)))
    back = file.read()
    assert back.num_rows == rows.num_rows
    assert sorted(map(repr, back.to_pylist())) == sorted(map(repr, rows.to_pylist()))
    count, groups = layout.row_groups(file.metadata)
    assert count == layout.BUCKETS and sorted(groups) == groups  # one row group a bucket, in bucket order
    for i, bucket in enumerate(groups):
        keys = file.read_row_group(i, columns=["key"])["key"].combine_chunks()
        assert set(layout.buckets_of(keys).tolist()) == {bucket}


def test_the_two_key_sort_is_lexsort():
    """`_by_two` (a stable sort, then only the runs out of order) orders rows as NumPy's lexsort does, ties included."""
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 7, 1000, 50_000):
        for distinct in (2, 60, 10**6):
            primary, secondary = rng.integers(0, distinct, n), rng.integers(0, 4, n)
            assert buckets._by_two(primary, secondary).tolist() == np.lexsort((secondary, primary)).tolist()
            written = np.argsort(secondary, kind="stable")  # mostly in secondary order already, as a probe writes
            assert (buckets._by_two(primary[written], secondary[written]).tolist()
                    == np.lexsort((secondary[written], primary[written])).tolist())
