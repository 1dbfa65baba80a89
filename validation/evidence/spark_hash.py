"""Spark SQL's `xxhash64` and `hash` (Murmur3) of the checks' columns, in NumPy, bit for bit.

The checks identify a (subscription, key) by `xxhash64(sub_id, key)` and `hash(sub_id, key)` and a message id by
`xxhash64(message_id)` (`checks.run._KEY_HASHES`, `chunk.INPUT_COLUMNS`). The pass over the probe's bucketed layout
(`checks.layout`) packs its rows in the Python worker, not in Spark's SQL; these functions give it the same
numbers, so its rows, findings and the later reads that find a finding's key and evidence by those hashes in
Spark's SQL agree with the shuffle pass's. Both follow Spark's own implementations
(`org.apache.spark.sql.catalyst.expressions.XXH64`, `org.apache.spark.unsafe.hash.Murmur3_x86_32`): XXH64 is the
standard algorithm; Spark's Murmur3 of a string mixes each byte past the last whole 4-byte word as a signed int of
its own (not the standard tail). Several columns chain: each column's hash is the seed of the next (42 first); a
null leaves the hash as it is. `tests/prove/checks/test_checks_buckets.py` compares both with Spark's SQL on hostile
strings.

Strings are hashed vectorised over the rows of each byte length (the words read from Arrow's data buffer in
place), so the cost is a few dozen NumPy operations a word, not a Python call a row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

SEED = 42  # Spark's seed for both functions

_P1, _P2, _P3 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)
_P4, _P5 = np.uint64(0x85EBCA77C2B2AE63), np.uint64(0x27D4EB2F165667C5)
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl64(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _rotl32(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _fmix64(h: np.ndarray) -> np.ndarray:
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def _round64(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """XXH64's round, in place: `lane` (a fresh array) is spent, `acc` is the result."""
    lane *= _P2
    acc += lane
    lane = acc << np.uint64(31)
    acc >>= np.uint64(33)
    acc |= lane
    acc *= _P1
    return acc


def xxhash64_int(values: np.ndarray, seed) -> np.ndarray:
    """Spark's xxhash64 of 32-bit integers (XXH64 of their 4 little-endian bytes), as uint64."""
    with np.errstate(over="ignore"):
        seed = np.asarray(seed, np.uint64)
        h = seed + _P5 + np.uint64(4)
        h = h ^ (np.asarray(values, np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF)) * _P1
        h = _rotl64(h, 23) * _P2 + _P3
        return _fmix64(h)


class _Bytes:
    """A string array's bytes, each row's words readable in place: `word64(p)` is the little-endian uint64 at
    byte p of the data buffer for every p of an array, `word32` and `byte` alike (an array of stride 1: unaligned
    reads, no copy)."""

    def __init__(self, array: pa.Array):
        wide = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
        offsets = np.frombuffer(array.buffers()[1], np.int64 if wide else np.int32)
        offsets = offsets[array.offset:array.offset + len(array) + 1].astype(np.int64)
        data = array.buffers()[2]
        raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        self.data = np.concatenate([raw, np.zeros(8, np.uint8)])  # room for a word read at the last byte
        self.start = offsets[:-1]
        self.length = offsets[1:] - offsets[:-1]
        buffer = self.data.data
        self.u64 = np.ndarray(shape=(len(self.data) - 7,), dtype="<u8", buffer=buffer, strides=(1,))
        self.u32 = np.ndarray(shape=(len(self.data) - 3,), dtype="<u4", buffer=buffer, strides=(1,))


def _by_length(bytes_: _Bytes, rows: np.ndarray):
    """(byte length, its rows) of the given rows."""
    lengths = bytes_.length[rows]
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    cuts = np.flatnonzero(np.diff(sorted_lengths)) + 1
    for part in np.split(order, cuts):
        if len(part):
            yield int(lengths[part[0]]), rows[part]


def _xxh64_of_length(b: _Bytes, rows: np.ndarray, length: int, seed: np.ndarray) -> np.ndarray:
    p = b.start[rows]
    offset = 0
    if length >= 32:
        v1, v2, v3, v4 = seed + _P1 + _P2, seed + _P2, seed.copy(), seed - _P1
        while offset + 32 <= length:
            v1 = _round64(v1, b.u64[p + offset])
            v2 = _round64(v2, b.u64[p + offset + 8])
            v3 = _round64(v3, b.u64[p + offset + 16])
            v4 = _round64(v4, b.u64[p + offset + 24])
            offset += 32
        h = _rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)
        for v in (v1, v2, v3, v4):
            h ^= _round64(np.zeros_like(v), v.copy())
            h *= _P1
            h += _P4
    else:
        h = seed + _P5
    h += np.uint64(length)
    while offset + 8 <= length:
        h ^= _round64(np.zeros_like(h), b.u64[p + offset])
        h = _rotl64(h, 27)
        h *= _P1
        h += _P4
        offset += 8
    if offset + 4 <= length:
        lane = b.u32[p + offset].astype(np.uint64)
        lane *= _P1
        h ^= lane
        h = _rotl64(h, 23)
        h *= _P2
        h += _P3
        offset += 4
    while offset < length:
        lane = b.data[p + offset].astype(np.uint64)
        lane *= _P5
        h ^= lane
        h = _rotl64(h, 11)
        h *= _P1
        offset += 1
    return _fmix64(h)


def _per_length(array: pa.Array, seeds: np.ndarray, hash_rows) -> np.ndarray:
    """`hash_rows(bytes, rows, length, their seeds)` over the valid rows of each byte length; a null row keeps its
    seed."""
    out = seeds.copy()
    if len(array) == 0:
        return out
    b = _Bytes(array)
    valid = np.flatnonzero(np.asarray(array.is_valid()))
    with np.errstate(over="ignore"):
        for length, rows in _by_length(b, valid):
            out[rows] = hash_rows(b, rows, length, seeds[rows].copy())
    return out


def xxhash64_strings(array: pa.Array, seed) -> np.ndarray:
    """Spark's xxhash64 of a string column chained after `seed` (a scalar or one per row), as uint64; a null
    row keeps its seed."""
    return _per_length(array, np.broadcast_to(np.asarray(seed, np.uint64), (len(array),)), _xxh64_of_length)


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    return _rotl32(k1 * _C1, 15) * _C2


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    return _rotl32(h1 ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix32(h1: np.ndarray, length) -> np.ndarray:
    h1 = h1 ^ np.uint32(length)
    h1 ^= h1 >> np.uint32(16)
    h1 *= np.uint32(0x85EBCA6B)
    h1 ^= h1 >> np.uint32(13)
    h1 *= np.uint32(0xC2B2AE35)
    h1 ^= h1 >> np.uint32(16)
    return h1


def murmur3_int(values: np.ndarray, seed) -> np.ndarray:
    """Spark's hash (Murmur3_x86_32) of 32-bit integers chained after `seed`, as uint32."""
    with np.errstate(over="ignore"):
        k1 = _mix_k1(np.asarray(values, np.int64).astype(np.uint32))
        return _fmix32(_mix_h1(np.asarray(seed, np.int64).astype(np.uint32), k1), 4)


def _murmur3_of_length(b: _Bytes, rows: np.ndarray, length: int, h1: np.ndarray) -> np.ndarray:
    p = b.start[rows]
    aligned = length - length % 4
    for offset in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(b.u32[p + offset]))
    for offset in range(aligned, length):  # each byte as a signed int (Spark's tail)
        h1 = _mix_h1(h1, _mix_k1(b.data[p + offset].astype(np.int8).astype(np.int64).astype(np.uint32)))
    return _fmix32(h1, length)


def murmur3_strings(array: pa.Array, seed) -> np.ndarray:
    """Spark's hash (its Murmur3 of a string: `Murmur3_x86_32.hashUnsafeBytes`) of a string column chained after
    `seed` (a scalar or one per row, 32-bit), as uint32; a null row keeps its seed."""
    seeds = np.broadcast_to(np.asarray(seed, np.int64).astype(np.uint32), (len(array),))
    return _per_length(array, seeds, _murmur3_of_length)


def signed64(h: np.ndarray) -> np.ndarray:
    """A uint64 hash as the BIGINT Spark's SQL shows."""
    return h.view(np.int64)


def signed32(h: np.ndarray) -> np.ndarray:
    """A uint32 hash as the INT Spark's SQL shows, widened to int64."""
    return h.view(np.int32).astype(np.int64)
