"""The probe's bucketed layout of a part file: every row of a key in one row group per file, found without a shuffle.

A part file in this layout holds the same rows, in the same schema, as any other (`records`: Spark, DuckDB and
`pubsubguard watch` read it as before), cut into one row group per bucket of its keys: bucket =
`xxhash64(key) mod BUCKETS` (Spark's xxhash64, unsigned; `spark_hash`), a null key in the bucket of the seed's own
hash. Its Parquet schema metadata says so (`LAYOUT_KEY`): the format, the number of buckets and which bucket each
row group holds, in order. Within a row group the rows keep the order they were written in.

So every row of a key, publish or delivery, from every writer, is in the same bucket of every file, and the checks
judge bucket b by reading row group b of each file (`checks.layout`), where a log written otherwise is
repartitioned and sorted by Spark first (`checks.run`). A file whose metadata is absent, of another format or does
not match its row groups is not in the layout; the checks then judge the whole log the other way. The layout is
not part of the seal (`seal` hashes the files as they are) nor of the row format: writing it is how the probe,
the legal-history generator and the benchmarks write part files, and reading it is only a faster way to the same
verdict.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pubsubguard.core import storage

from . import spark_hash

LAYOUT = "pubsubguard-buckets/1"
LAYOUT_KEY = b"pubsubguard.layout"
BUCKETS = 8  # the checks' tasks: enough for a few cores, few row groups per small flush


def buckets_of(keys: pa.Array, buckets: int = BUCKETS) -> np.ndarray:
    """Each row's bucket from its key (a string column; a chunked one is combined)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    return (spark_hash.xxhash64_strings(keys, spark_hash.SEED) % np.uint64(buckets)).astype(np.int64)


def bucketed(table: pa.Table, buckets: int = BUCKETS) -> tuple[pa.Table, list[tuple[int, int]]]:
    """The table's rows grouped by bucket (each bucket's in their order), with each bucket's (bucket, rows)."""
    of_row = buckets_of(table["key"], buckets)
    order = np.argsort(of_row, kind="stable")
    counts = np.bincount(of_row, minlength=buckets)
    return table.take(order), [(b, int(n)) for b, n in enumerate(counts) if n]


def part_bytes(table: pa.Table, buckets: int = BUCKETS) -> bytes:
    """A part file of `table` in the layout: one row group per bucket its keys fall in."""
    rows, groups = bucketed(table, buckets)
    meta = json.dumps({"format": LAYOUT, "buckets": buckets, "row_groups": [b for b, _ in groups]})
    schema = rows.schema.with_metadata({**(rows.schema.metadata or {}), LAYOUT_KEY: meta.encode()})
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema) as writer:
        start = 0
        for _, n in groups:
            writer.write_table(rows.slice(start, n).replace_schema_metadata(schema.metadata), row_group_size=n)
            start += n
    return sink.getvalue().to_pybytes()


def write_part(table: pa.Table, location, buckets: int = BUCKETS) -> None:
    """Write a part file in the layout, whole or nothing (`storage.write_bytes`)."""
    storage.write_bytes(location, part_bytes(table, buckets))


def row_groups(metadata: pq.FileMetaData) -> tuple[int, list[int]] | None:
    """(buckets, the bucket of each row group) of a part file in the layout, from its footer; None when it is
    not in it (no layout metadata, another format, or metadata that does not match the file's row groups)."""
    raw = (metadata.schema.to_arrow_schema().metadata or {}).get(LAYOUT_KEY)
    if raw is None:
        return None
    try:
        layout = json.loads(raw)
        buckets, groups = layout["buckets"], layout["row_groups"]
        if layout["format"] != LAYOUT or not isinstance(buckets, int) or buckets < 1:
            return None
        if not isinstance(groups, list) or any(not isinstance(b, int) or not 0 <= b < buckets for b in groups):
            return None
        if len(set(groups)) != len(groups) or len(groups) != metadata.num_row_groups:
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return buckets, groups
