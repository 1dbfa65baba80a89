"""The pass over evidence in the probe's bucketed layout: no shuffle, no sort by Spark.

Every part file of such evidence holds each bucket of keys in a row group of its own
(`pubsubguard.validation.evidence.layout`). One Spark task per bucket reads that row group of every part file
with pyarrow, packs its rows into the kernel's six numbers (`chunk.INPUT_COLUMNS`) with NumPy, sorts them as the
shuffle pass sorts a partition (`run._ORDER`) and hands them to the same kernel (`kernel.check_partition`). The
numbers are those Spark's SQL makes in `run._unified` (its hashes: `evidence.spark_hash`), so the findings,
statistics and the later reads that name a finding's key and fetch its evidence by those hashes are the shuffle
pass's; `tests/prove/checks/test_checks_buckets.py` holds the packed rows of both equal on the legal histories and their
mutations.

A task checks what it read: a row whose key is not of the task's bucket (a file whose layout metadata lies) raises
`NotInLayout`, and the check judges the log with the shuffle pass instead (`run._judged` says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..evidence import layout, records, spark_hash
from . import chunk
from .scans import filled_ints
from .kernel import ACT_ACK, ACT_LATE_ACK

PUBLISH_COLUMNS = ["topic", "key", "seq", "message_id", "poison", "status", "publish_time_us"]
DELIVERY_COLUMNS = [
    "run_id", "subscription", "kind", "message_id", "key", "seq", "probe_run", "delivery_attempt", "receive_time_us",
    "ack_deadline_s", "action", "ack_result", "ack_time_us", "dl_source_delivery_count",
]
_DICTIONARY = ("topic", "status", "run_id", "subscription", "kind", "probe_run", "action", "ack_result", "key")
_ID_MASK = np.int64((1 << chunk.ID_BITS) - 1)
_ACTIONS = {"ack": ACT_ACK, "late_ack": ACT_LATE_ACK, "nack": chunk.ACT_NACK}
_EXTENSIONS = {"expire": chunk.EXT_EXPIRE, "crash": chunk.EXT_CRASH}
BATCH_ROWS = 10_000  # the kernel's input in Spark's Arrow batch size, so it cuts chunks as in the shuffle pass


Columns = dict[str, pa.Array]  # a bucket's rows, column by column


class NotInLayout(Exception):
    """A part file's rows are not where its layout metadata says."""


@dataclass(frozen=True)
class Declared:
    """What packing needs of the declared subscriptions, in the checks' order (index = sub_id)."""

    names: tuple[str, ...]
    topics: tuple[str, ...]

    @classmethod
    def of(cls, subscriptions) -> "Declared":
        return cls(tuple(s.name for s in subscriptions), tuple(s.topic for s in subscriptions))


def layout_of(paths: list[str]) -> int | None:
    """The number of buckets when every part file is in the layout with the same number; else None."""
    found = set()
    for path in paths:
        try:
            groups = layout.row_groups(pq.read_metadata(path))
        except (OSError, pa.ArrowInvalid):
            return None
        if groups is None:
            return None
        found.add(groups[0])
    return found.pop() if len(found) == 1 else None


def read_bucket(paths: list[str], bucket: int, columns: list[str]) -> dict[str, pa.Array] | None:
    """Row group `bucket` of every part file (those that have one) as columns, the low-cardinality strings as
    dictionaries."""
    tables = []
    for path in paths:
        file = pq.ParquetFile(path, read_dictionary=[c for c in columns if c in _DICTIONARY])
        groups = layout.row_groups(file.metadata)
        if groups is None:
            raise NotInLayout(f"{path}: not in the bucketed layout")
        if bucket in groups[1]:
            tables.append(file.read_row_group(groups[1].index(bucket), columns=columns, use_threads=False))
    if not tables:
        return None
    table = pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()
    # the message ids stay in their files' chunks (hashed chunk by chunk): joining their strings cost a third
    # of the read
    return {name: table.column(name) if name == "message_id" else table.column(name).combine_chunks()
            for name in columns}


def _codes(column: pa.Array, values: dict[str, int], missing: int) -> np.ndarray:
    """Each row's code: `values[string]`, `missing` for a null or a string not among them."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    lookup = np.array([values.get(v, missing) for v in column.dictionary.to_pylist()] + [missing], np.int64)
    indices = column.indices.to_numpy(zero_copy_only=False) if column.null_count == 0 else np.asarray(
        pc.fill_null(column.indices, len(column.dictionary)))
    return lookup[indices.astype(np.int64)]


def _ints(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """An integer column as int64 values (0 for null) and validity."""
    column = column.cast(pa.int64())
    return filled_ints(column), np.ones(len(column), bool) if column.null_count == 0 else np.asarray(column.is_valid())


class _Keys:
    """The bucket's keys: one dictionary of their strings for its publish and delivery rows; each (sub_id, key)'s
    two hashes (Spark's, computed once a key and subscription) and its rank in the pass's (h, h2) order."""

    def __init__(self, words: pa.Array, bucket: int, buckets: int, subs: np.ndarray):
        words = words.cast(pa.string())
        of_bucket = np.append(layout.buckets_of(words, buckets), spark_hash.SEED % buckets)  # a null key: the seed's
        self.wrong = of_bucket != bucket
        self.bucket = bucket
        self.with_null = pa.concat_arrays([words, pa.array([None], pa.string())])
        self.null = len(words)
        self._table(subs)

    def index(self, keys: pa.Array) -> np.ndarray:
        """Each row's key as its index in the dictionary (`null` for none); NotInLayout if one is not of the bucket."""
        index = filled_ints(keys.indices.cast(pa.int64()), self.null)
        if self.wrong[index].any():
            raise NotInLayout(f"a row group of bucket {self.bucket} holds rows of another bucket")
        return index

    def _table(self, subs: np.ndarray) -> None:
        """Every key's two hashes with each of `subs` (the sub_ids of both logs' rows: the publish rows' and the
        delivery rows' alike) and the rank of each (sub_id, key) in (h, h2) order among them all. One table for
        both logs: a rank computed over one log's subscriptions alone differs from the other's wherever a
        subscription has rows in one log only (a subscription that received nothing in the bucket), and the
        sort would then part a key's publishes from its deliveries."""
        self.position = np.zeros(int(subs.max()) + 1 if len(subs) else 1, np.int64)
        self.position[subs] = np.arange(len(subs))
        self.subs = subs
        h = np.empty((len(subs), self.null + 1), np.int64)
        h2 = np.empty((len(subs), self.null + 1), np.int64)
        for i, s in enumerate(subs):
            seed64 = spark_hash.xxhash64_int(np.array([s]), spark_hash.SEED)[0]
            seed32 = spark_hash.murmur3_int(np.array([s]), spark_hash.SEED)[0]
            h[i] = spark_hash.signed64(spark_hash.xxhash64_strings(self.with_null, seed64))
            h2[i] = spark_hash.signed32(spark_hash.murmur3_strings(self.with_null, seed32))
        self.h, self.h2 = h.reshape(-1), h2.reshape(-1)
        order = np.lexsort((self.h2, self.h))
        new = np.ones(len(order), bool)
        new[1:] = (self.h[order][1:] != self.h[order][:-1]) | (self.h2[order][1:] != self.h2[order][:-1])
        self.rank = np.empty(len(order), np.int64)
        self.rank[order] = np.cumsum(new) - 1

    def hashes(self, sub: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's h, h2 (int64, as Spark's SQL gives them) and its key's rank in (h, h2) order (keys whose
        hashes are equal share a rank, as the shuffle pass judges them as one); `sub`: sub_ids among the table's."""
        cell = self.position[sub] * (self.null + 1) + index
        return self.h[cell], self.h2[cell], self.rank[cell]


def row_kinds(dels: Columns) -> np.ndarray:
    """Each delivery row's kind in the pass (`chunk.FOREIGN`, `DEAD_LETTER` or `DELIVERY`; `run._ROW_KIND` in
    SQL): foreign when its probe_run is not its run_id (a null on either side is not a difference), or it has no
    probe_run, key or seq."""
    run = pc.cast(dels["run_id"], pa.string()) if pa.types.is_dictionary(dels["run_id"].type) else dels["run_id"]
    probe = pc.cast(dels["probe_run"], pa.string()) if pa.types.is_dictionary(dels["probe_run"].type) else dels["probe_run"]
    differs = np.asarray(pc.fill_null(pc.not_equal(probe, run), False))
    foreign = ~np.asarray(probe.is_valid()) | differs | ~np.asarray(dels["key"].is_valid()) | \
        ~np.asarray(dels["seq"].is_valid())
    dead_letter = _codes(dels["kind"], {"dead_letter": 1}, 0) == 1
    return np.where(foreign, chunk.FOREIGN, np.where(dead_letter, chunk.DEAD_LETTER, chunk.DELIVERY))


def id_hashes(ids: "pa.Array | pa.ChunkedArray") -> np.ndarray:
    """xxhash64(message_id) as Spark's SQL gives it (int64; a null's is the seed's)."""
    chunks = ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]
    hashed = [spark_hash.xxhash64_strings(c.dictionary_decode() if pa.types.is_dictionary(c.type) else c,
                                          spark_hash.SEED) for c in chunks]
    return spark_hash.signed64(np.concatenate(hashed) if hashed else np.zeros(0, np.uint64))


def _packed_publishes(pubs: Columns, declared: Declared, keys: _Keys) -> dict[str, np.ndarray]:
    """A publish row once per declared subscription of its topic (in declaration order), packed as `run._unified`."""
    topics: dict[str, list[int]] = {}
    for i, topic in enumerate(declared.topics):
        topics.setdefault(topic, []).append(i)
    topic_code = _codes(pubs["topic"], {t: j for j, t in enumerate(topics)}, -1)
    of_topic = list(topics.values())
    fanout = np.array([len(v) for v in of_topic] + [0], np.int64)[topic_code]
    row = np.repeat(np.arange(len(pubs["topic"])), fanout)
    # the k-th declared subscription of each row's topic
    nth = np.arange(len(row)) - np.repeat(np.cumsum(fanout) - fanout, fanout)
    table_of = np.full((len(of_topic) + 1, max([len(v) for v in of_topic] + [1])), -1, np.int64)
    for j, subs in enumerate(of_topic):
        table_of[j, :len(subs)] = subs
    sub = table_of[topic_code[row], nth]
    ok = _codes(pubs["status"], {"ok": 1}, 0)[row]
    h, h2, rank = keys.hashes(sub, keys.index(pubs["key"])[row])
    seq, seq_valid = _ints(pubs["seq"])
    poison, _ = _ints(pubs["poison"].cast(pa.int8()))
    ids = pubs["message_id"]
    id_hash = np.where(np.asarray(ids.is_valid()), (id_hashes(ids) & _ID_MASK) + 1, 0)
    ided = (_codes(pubs["status"], {"ok": 1}, 0) == 1) & np.asarray(ids.is_valid())
    att = np.where(ided, id_hash << chunk.ID_SHIFT, 0) + (poison != 0)
    t, _ = _ints(pubs["publish_time_us"])
    meta = (h2 << 32) + sub * 32 + ok * 16 + chunk.ACT_OTHER * 4 + chunk.PUBLISH
    return {"h": h, "rank": rank, "meta": meta, "seq": seq[row], "seq_valid": seq_valid[row], "t": t[row],
            "ack_t": np.zeros(len(row), np.int64), "ack_t_valid": np.zeros(len(row), bool),
            "att": att[row], "att_valid": np.ones(len(row), bool)}


def _packed_deliveries(dels: Columns, declared: Declared, keys: _Keys) -> dict[str, np.ndarray]:
    """The delivery and dead-letter rows of declared subscriptions, packed as `run._unified`."""
    sub_all = _codes(dels["subscription"], {n: i for i, n in reversed(list(enumerate(declared.names)))}, -1)
    keep = np.flatnonzero(sub_all >= 0)
    if len(keep) < len(sub_all):
        dels = {name: column.take(pa.array(keep)) for name, column in dels.items()}
    sub = sub_all[keep]
    seq, seq_valid = _ints(dels["seq"])
    rk = row_kinds(dels)
    dead_letter = rk == chunk.DEAD_LETTER
    ack_t, ack_t_valid = _ints(dels["ack_time_us"])
    ok = (_codes(dels["ack_result"], {"success": 1}, 0) == 1) & ack_t_valid
    act = _codes(dels["action"], _ACTIONS, chunk.ACT_OTHER)
    deadline, deadline_valid = _ints(dels["ack_deadline_s"])
    bad = deadline_valid & ((deadline < 0) | (deadline > chunk.MAX_DEADLINE_S))
    if bad.any():
        raise ValueError(f"deliveries: ack_deadline_s must be within 0..{chunk.MAX_DEADLINE_S}, got {deadline[bad][0]}")
    h, h2, rank = keys.hashes(sub, keys.index(dels["key"]))
    meta = ((h2 << 32) + sub * 32 + ok * 16 + act * 4 + rk
            + np.where(deadline_valid, deadline + 1, 0) * (1 << chunk.DEADLINE_SHIFT))
    ids = id_hashes(dels["message_id"])
    attempt, attempt_valid = _ints(dels["delivery_attempt"])
    ext = _codes(dels["action"], _EXTENSIONS, chunk.EXT_NONE)
    delivery_att = (((ids & _ID_MASK) + 1) << chunk.ID_SHIFT) + np.where(attempt_valid, attempt + 1, 0) * 4 + ext
    forwarded, forwarded_valid = _ints(dels["dl_source_delivery_count"])
    att = np.where(rk == chunk.FOREIGN, ids, np.where(dead_letter, forwarded, delivery_att))
    att_valid = (rk == chunk.FOREIGN) | ~dead_letter | forwarded_valid
    t, _ = _ints(dels["receive_time_us"])
    return {"h": h, "rank": rank, "meta": meta, "seq": seq, "seq_valid": seq_valid, "t": t, "ack_t": ack_t,
            "ack_t_valid": ack_t_valid, "att": att, "att_valid": att_valid}


def _order(rank: np.ndarray, meta: np.ndarray, seq: np.ndarray, seq_valid: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The rows in the shuffle pass's order within a partition (`run._ORDER`: h, h2 -- the key's `rank` --, seq
    nulls first, foreign last, t, row kind): two stable sorts over packed keys where the values fit, else one a
    column."""
    if len(rank) == 0:
        return np.zeros(0, np.int64)
    kind = meta & 3
    foreign = (kind == chunk.FOREIGN).astype(np.int64)
    seq_key = np.where(seq_valid, seq, np.iinfo(np.int64).min)
    lo, hi = int(seq_key.min()), int(seq_key.max())
    rank_bits = max(1, int(rank.max()).bit_length())
    seq_bits = (hi - lo).bit_length() if hi - lo < (1 << 62) else 64
    if int(t.min()) >= 0 and int(t.max()) < (1 << 60) and rank_bits + seq_bits + 1 <= 63:
        return _by_two((rank << (seq_bits + 1)) | ((seq_key - lo) << 1) | foreign, t * 4 + kind)
    return np.lexsort((kind, t, foreign, seq_key, rank))


def _by_two(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """`np.lexsort((secondary, primary))`, cheaper on rows that mostly come in secondary order within each primary
    (a message's rows, written in time order): one stable sort by primary, then only the runs of equal primary
    found out of secondary order sorted again (a lexsort of both costs ten times as much on a bucket)."""
    order = np.argsort(primary, kind="stable")
    p, s = primary[order], secondary[order]
    bad = (p[1:] == p[:-1]) & (s[1:] < s[:-1])
    if not bad.any():
        return order
    run = np.cumsum(np.r_[True, p[1:] != p[:-1]]) - 1  # each sorted row's run of equal primary
    unsorted = np.zeros(run[-1] + 1, bool)
    unsorted[run[1:][bad]] = True
    rows = np.flatnonzero(unsorted[run])  # the rows of those runs, each run's contiguous
    order[rows] = order[rows[np.lexsort((s[rows], run[rows]))]]
    return order


def _columns(rows: "Columns | pa.Table | None", names: list[str]) -> Columns | None:
    if rows is None:
        return None
    if isinstance(rows, pa.Table):
        rows = {name: rows.column(name).combine_chunks() for name in names}
    return rows if len(rows[names[0]]) else None


def _strings_of(column: pa.Array) -> set:
    """The distinct strings a column may hold (a dictionary's values: a superset of its rows')."""
    return set((column.dictionary if pa.types.is_dictionary(column.type) else pc.unique(column)).to_pylist())


def _subs_of(sources: list, declared: Declared) -> np.ndarray:
    """The sub_ids the bucket's rows can carry: each declared subscription of a topic its publish rows name and each
    one its delivery rows name (a superset does no harm: one more row of hashes)."""
    named: set = set()
    for rows, how in sources:
        if how is _packed_publishes:
            named.update(("topic", t) for t in _strings_of(rows["topic"]))
        else:
            named.update(("name", n) for n in _strings_of(rows["subscription"]))
    return np.array([i for i, (name, topic) in enumerate(zip(declared.names, declared.topics))
                     if ("topic", topic) in named or ("name", name) in named], np.int64)


def packed(pubs: "Columns | pa.Table | None", dels: "Columns | pa.Table | None", declared: Declared, bucket: int,
           buckets: int) -> pa.Table:
    """The bucket's rows as the kernel's input (`chunk.INPUT_COLUMNS`), sorted."""
    sources = [(rows, how) for rows, how in ((_columns(pubs, PUBLISH_COLUMNS), _packed_publishes),
                                             (_columns(dels, DELIVERY_COLUMNS), _packed_deliveries)) if rows is not None]
    if not sources:
        return pa.table({c: pa.array([], pa.int64()) for c in chunk.INPUT_COLUMNS})
    # one dictionary of the keys for both logs
    key_columns = [rows["key"] if pa.types.is_dictionary(rows["key"].type) else pc.dictionary_encode(rows["key"])
                   for rows, _ in sources]
    key_columns = pa.chunked_array([k.cast(pa.dictionary(pa.int32(), pa.string())) for k in key_columns])
    key_columns = key_columns.unify_dictionaries().chunks
    keys = _Keys(key_columns[0].dictionary, bucket, buckets, _subs_of(sources, declared))
    parts = [how({**rows, "key": key}, declared, keys) for (rows, how), key in zip(sources, key_columns)]
    v = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    order = _order(v["rank"], v["meta"], v["seq"], v["seq_valid"], v["t"])

    def column(name: str) -> pa.Array:
        values = v[name][order]
        valid = v.get(f"{name}_valid")
        return pa.array(values, pa.int64(), mask=None if valid is None or valid.all() else ~valid[order])

    return pa.table({name: column(name) for name in chunk.INPUT_COLUMNS})


def bucket_input(pub_paths: list[str], del_paths: list[str], declared: Declared, bucket: int,
                 buckets: int) -> Iterator[pa.RecordBatch]:
    """One bucket's sorted input for the kernel, in batches of BATCH_ROWS."""
    pubs = read_bucket(pub_paths, bucket, PUBLISH_COLUMNS)
    dels = read_bucket(del_paths, bucket, DELIVERY_COLUMNS)
    yield from packed(pubs, dels, declared, bucket, buckets).to_batches(max_chunksize=BATCH_ROWS)


DRIVER_ROWS = 2_000_000  # `rows_of_keys` reads at most this many rows on the driver; more, and Spark reads them


def rows_of_keys(paths: tuple[list[str], list[str]], count: int, key_values: list) -> tuple[pa.Table, pa.Table] | None:
    """Every column of the rows of both logs (`paths`: their part files, in the layout with `count` buckets) whose
    key is among `key_values` (None: a null key), read on the driver from the row groups of those keys' buckets that
    hold one of them (`_groups_in`: by the key column's dictionary) -- Spark's read (`run._rows_of_keys`) took 0.24 s
    of a 1M-row re-check's 1.1 s, most of it a job's fixed cost. None when those row groups hold more than
    DRIVER_ROWS rows, or a file cannot be read so: Spark reads them."""
    wanted = set(layout.buckets_of(pa.array(key_values, pa.string()), count).tolist())
    names = pa.array([k for k in key_values if k is not None], pa.string())
    try:
        files = [[_groups_in(path, count, wanted, names, None in key_values) for path in log_paths]
                 for log_paths in paths]
        if any(None in log for log in files) or sum(
                file.metadata.row_group(i).num_rows for log in files for file, groups in log for i in groups) > DRIVER_ROWS:
            return None
        out = []
        for log, schema in zip(files, (records.PUBLISH_SCHEMA, records.DELIVERY_SCHEMA)):
            columns = pa.schema([f.with_nullable(True) for f in schema])  # as Spark reads it: nullable
            tables = [file.read_row_groups(groups, columns=columns.names, use_threads=False).cast(columns)
                      for file, groups in log if groups]
            table = pa.concat_tables(tables) if tables else columns.empty_table()
            keep = pc.is_in(table["key"], value_set=names)
            if None in key_values:
                keep = pc.or_(keep, pc.is_null(table["key"]))
            out.append(table.filter(pc.fill_null(keep, False)))
        return out[0], out[1]
    except (OSError, KeyError, ValueError, pa.ArrowException):  # a column missing, a file gone: Spark reads it
        return None


def _groups_in(path: str, count: int, wanted: set, names: pa.Array, null: bool) -> tuple[pq.ParquetFile, list[int]] | None:
    """A part file and the indices of its row groups of the `wanted` buckets whose key column holds one of `names`
    (or a null key, when `null`): its dictionary read, not its strings; a bucket's row group of a part file holds
    only the keys its writer saw, so most of them are skipped when the findings are on a few keys (at 1M rows, the
    dictionaries of the 32 row groups of the benchmark's log took 22 ms; all their columns 0.23 s). None when the
    file is not in the layout of `count` buckets."""
    file = pq.ParquetFile(path, read_dictionary=["key"])
    groups = layout.row_groups(file.metadata)
    if groups is None or groups[0] != count:
        return None
    held = []
    for i, bucket in enumerate(groups[1]):
        if bucket not in wanted:
            continue
        keys = file.read_row_group(i, columns=["key"], use_threads=False).column(0)
        if any((null and part.null_count) or pc.any(pc.is_in(part.dictionary, value_set=names)).as_py()
               for part in keys.chunks):
            held.append(i)
    return file, held


class KeyNames:
    """The names of wanted key hashes, read from the key dictionaries of the part files (`sorted_input.KeyNames`'
    interface: `covers`, `of`): every distinct key of the log hashed with each declared subscription, where the
    shuffle pass's key-name read hashes every row in Spark (`run._key_names`). A wanted (h, h2) of a subscription
    names the key that hashes to it there, as that read names it."""

    def __init__(self, pub_paths: list[str], del_paths: list[str], declared: Declared):
        self.paths, self.declared = [*pub_paths, *del_paths], declared

    def covers(self, wanted: set) -> bool:
        return True

    def of(self, wanted: set) -> dict:
        hashes = np.array(sorted({h for h, _ in wanted}), np.int64)
        if not len(hashes):
            return {}
        words = set()
        for path in self.paths:
            column = pq.read_table(path, columns=["key"], read_dictionary=["key"], use_threads=False)["key"]
            for chunk_ in column.chunks:
                words.update(chunk_.dictionary.to_pylist())
                if chunk_.null_count:
                    words.add(None)
        array = pa.array(sorted(words, key=lambda w: (w is not None, w or "")), pa.string())
        named = {}
        for sub_id, name in enumerate(self.declared.names):
            seed64 = spark_hash.xxhash64_int(np.array([sub_id]), spark_hash.SEED)[0]
            h = spark_hash.signed64(spark_hash.xxhash64_strings(array, seed64))
            hit = np.flatnonzero(np.isin(h, hashes))
            if not len(hit):
                continue
            seed32 = spark_hash.murmur3_int(np.array([sub_id]), spark_hash.SEED)[0]
            h2 = spark_hash.signed32(spark_hash.murmur3_strings(array.take(pa.array(hit)), seed32))
            for i, second in zip(hit.tolist(), h2.tolist()):
                named[(name, int(h[i]), second)] = array[i].as_py()
        return named

