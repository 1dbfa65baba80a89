"""The checks' sorted input written while the pass reads it (validation/checks/sorted_input.py `tee`): every batch
passes on, the partition is written whole (whole keys per row group) or not at all, and each message id is kept as
its rank within its message (validation/checks/kernel.py `with_id_ranks`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pubsubguard.validation.checks import chunk, kernel, sorted_input


class Counter:
    def __init__(self):
        self.value = 0

    def add(self, n):
        self.value += n


def rows_of(i: int, n: int) -> dict:
    """Rows i..n of a sorted pass input (`chunk.INPUT_COLUMNS`): keys of 3 rows, a publish and two
    deliveries of one message id (its hash, as `checks._unified` packs it)."""
    r = range(i, n)
    return {"h": pa.array([x // 3 for x in r], pa.int64()),
            "meta": pa.array([(x // 3) << 32 | (chunk.PUBLISH if x % 3 == 0 else chunk.DELIVERY) | 16 for x in r], pa.int64()),
            "seq": pa.array([0] * len(r), pa.int64()), "t": pa.array(list(r), pa.int64()),
            "ack_t": pa.array([None] * len(r), pa.int64()),
            "att": pa.array([(x // 3 * 7919 % 1_000_003 + 1) << chunk.ID_SHIFT | (x % 3) << 2 for x in r], pa.int64())}


def batches_of(n: int, size: int):
    return [pa.record_batch(rows_of(i, min(n, i + size))) for i in range(0, n, size)]


def test_tee_passes_every_batch_and_writes_the_partition_whole(tmp_path):
    seen, kept = Counter(), Counter()
    batches = batches_of(300_000, 10_000)  # more than two row groups
    out = list(sorted_input.tee(iter(batches), str(tmp_path), 3, seen, kept))
    assert out == batches
    assert seen.value == kept.value == 300_000
    assert [p.name for p in tmp_path.iterdir()] == ["part-00003.parquet"]
    back = pa.Table.from_batches(list(sorted_input.read(str(tmp_path / "part-00003.parquet"))))
    whole = pa.table(rows_of(0, 300_000))
    assert back.drop_columns(["att"]) == whole.drop_columns(["att"])
    # each key's one message id kept as its rank (1), beside the attempts packed below it
    assert back.column("att").to_pylist() == [1 << chunk.ID_SHIFT | (x % 3) << 2 for x in range(300_000)]
    row_groups = pq.ParquetFile(tmp_path / "part-00003.parquet").metadata
    assert all(row_groups.row_group(g).num_rows % 3 == 0 for g in range(row_groups.num_row_groups))  # whole keys


def test_message_ids_become_their_ranks_within_the_message_and_nothing_else_changes():
    P, D, L, F = chunk.PUBLISH, chunk.DELIVERY, chunk.DEAD_LETTER, chunk.FOREIGN
    ok = 16
    big, small = 5 << 30, 3

    def att(id_hash, low=0):
        return (id_hash << chunk.ID_SHIFT) | low

    # (h, meta, seq, att): key 1 seq 0 under two ids (a retried publish), a failed publish, a dead-letter
    # row without a count, a foreign row; key 2 seq 0 under one id; key 2 seq 1 published only
    rows = [
        (1, 1 << 32 | P | ok, 0, att(big, 1)),
        (1, 1 << 32 | D | ok, 0, att(big, 2 << 2)),
        (1, 1 << 32 | D | ok, 0, att(small, 1 << 2)),
        (1, 1 << 32 | D, 0, att(big, 3 << 2 | 1)),
        (1, 1 << 32 | L, 0, None),
        (1, 1 << 32 | P, 1, 0),
        (1, 1 << 32 | F, None, -12345),
        (2, 2 << 32 | P | ok, 0, att(big)),
        (2, 2 << 32 | D | ok, 0, att(big, 1 << 2)),
        (2, 2 << 32 | P | ok, 1, att(small, 1)),
    ]
    table = pa.table({"h": [r[0] for r in rows], "meta": [r[1] for r in rows], "seq": [r[2] for r in rows],
                      "t": list(range(len(rows))), "ack_t": [None] * len(rows), "att": [r[3] for r in rows]},
                     schema=pa.schema([(c, pa.int64()) for c in chunk.INPUT_COLUMNS]))
    ranked = kernel.with_id_ranks(table)
    assert ranked.drop_columns(["att"]) == table.drop_columns(["att"])
    assert ranked.column("att").to_pylist() == [
        att(2, 1), att(2, 2 << 2), att(1, 1 << 2), att(2, 3 << 2 | 1), None, 0, -12345, att(1), att(1, 1 << 2), att(1, 1)]


def test_tee_that_cannot_write_still_passes_every_batch(tmp_path):
    seen, kept = Counter(), Counter()
    batches = batches_of(300_000, 10_000)
    out = list(sorted_input.tee(iter(batches), str(tmp_path / "missing"), 0, seen, kept))
    assert out == batches
    assert (seen.value, kept.value) == (300_000, 0)


def test_tee_stopped_early_or_failing_input_leaves_no_file(tmp_path):
    seen, kept = Counter(), Counter()
    reader = sorted_input.tee(iter(batches_of(300_000, 10_000)), str(tmp_path), 0, seen, kept)
    for _ in range(20):  # past the first row group
        next(reader)
    reader.close()
    assert list(tmp_path.iterdir()) == [] and kept.value == 0

    def failing():
        yield from batches_of(200_000, 10_000)
        raise RuntimeError("the input broke")

    with pytest.raises(RuntimeError, match="the input broke"):
        list(sorted_input.tee(failing(), str(tmp_path), 1, seen, kept))
    assert list(tmp_path.iterdir()) == [] and kept.value == 0
