"""The checks' sorted input, kept beside a run's evidence: a re-check skips the read, pack, shuffle and sort.

The checks' pass (`pubsubguard.validation.checks.run`) feeds `kernel.check_partition` the rows of
`chunk.INPUT_COLUMNS`, partitioned by (subscription, key) and sorted. Making those rows (read, pack,
shuffle, sort) costs more than the kernel's walk over them. So the first check of evidence in a local
directory keeps them: each task of its pass writes its partition, from the batches the kernel reads, to
`<evidence>/checks-input/<generation>/part-<partition>.parquet` (no second pass; a row group holds whole
keys, each message id as its rank among its message's ids, `kernel.with_id_ranks`: the same verdict in
half the bytes of the hashes), and the driver then writes `manifest.json`, last, saying what they were
made from. A later check reads them, one Spark task
a file, and the same kernel walks the same rows in the same order: the same findings, statistics and
plot data.

A check uses them only when the manifest matches what it is asked to check now: the run (a digest of
its run.json and of its seal, `pubsubguard.validation.evidence.seal`: a kept input is never read by another run),
every file of the run's `publishes/` and `deliveries/` (relative path, size, modification time), the
declared subscriptions in order, and a digest of the code that makes and judges the rows (this module,
`run`, `chunk` with its packed layout, `kernel`, `scans`: `run._SHAPING_MODULES`). Anything else (no manifest, a file added, changed or removed, another run, other
subscriptions, other code) and the check runs the shuffle pass and keeps its rows anew. A kept input
that matches but is damaged (its manifest not JSON, a kept file missing, of another size or another
SHA-256 than the manifest says, or outside its generation) is an EvidenceError naming the file (exit 2):
delete `checks-input/` (the next check shuffles again and keeps it anew) or check with
`--no-checks-input`. A cache: deleting it costs the next check the shuffle, never another verdict.
Kept only for evidence in a local directory (the executors write where they read the evidence from);
a directory that cannot be written is checked with the shuffle pass every time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

DIRNAME = "checks-input"
MANIFEST = "manifest.json"
FORMAT = "pubsubguard-checks-input/3"  # /2: each kept part's SHA-256, the run's digests; /3: message ids as ranks
ROW_GROUP_ROWS = 1 << 17  # rows per Parquet row group (up to the last whole key)
# rows per batch read back: the size of the pass's Arrow batches (Spark's arrow.maxRecordsPerBatch,
# 10,000), so the kernel cuts the same chunks as in the pass (the same plot data) of about CHUNK_ROWS;
# batches of 2**17 made chunks twice the size its arrays stay in the CPU's caches at (~30 % more CPU)
READ_BATCH_ROWS = 10_000
# lz4 over zstd: a re-check reads a 2.2M-row part in 0.04 s instead of 0.16 s (about 10 % of the kernel's walk
# of it) and the first check writes it a little faster, for 10 % more bytes (docs/performance.md)
COMPRESSION = "lz4"
_SOURCES = ("publishes", "deliveries")
_RUN_FILES = ("run.json", "seal.json")  # whose digests bind a kept input to its run (seal: when sealed)


def _plain(value):
    """As it reads back from JSON (tuples become lists), so a manifest compares equal to what made it."""
    return json.loads(json.dumps(value))


@dataclasses.dataclass(frozen=True)
class Kept:
    """Where a check of one run's evidence keeps its sorted input, and what that input is made from."""

    directory: Path  # <evidence>/checks-input
    sources: dict  # the manifest's "sources": part files, subscriptions, code digest

    @classmethod
    def of(cls, evidence_dir: Path, subscriptions, code_modules, read: set[str] | None = None) -> "Kept | None":
        """`code_modules`: the modules that make and judge the rows (their source is digested); `read`:
        the files the check's frames read (absolute paths), when known. None when the sources cannot
        be read, or the frames read other files than the log's part files (nothing is then kept or read)."""
        evidence_dir = Path(evidence_dir)
        digest = hashlib.sha256()
        files = []
        try:
            for module in (sys.modules[__name__], *code_modules):
                # through the module's loader: a file, or a member of the zip a cluster's bundle ships
                digest.update(module.__loader__.get_data(module.__file__))
            run = {name: _sha256(evidence_dir / name) if (evidence_dir / name).exists() else None for name in _RUN_FILES}
            for name in _SOURCES:
                for path in sorted((evidence_dir / name).rglob("*")):
                    if path.is_file():
                        status = path.stat()
                        files.append([path.relative_to(evidence_dir).as_posix(), status.st_size, status.st_mtime_ns])
        except (OSError, AttributeError, TypeError):
            return None
        # Spark skips files whose names start with _ or .: every other file must be one the frames read
        parts = {os.path.realpath(evidence_dir / f[0]) for f in files if not Path(f[0]).name.startswith(("_", "."))}
        if read is not None and parts != read:
            return None
        sources = {"run": run, "files": files, "subscriptions": [dataclasses.asdict(s) for s in subscriptions],
                   "code": digest.hexdigest()}
        return cls(evidence_dir / DIRNAME, _plain(sources))

    def find(self) -> "KeptMatch | None":
        """The kept input (its parts and the key names kept with it) when it was made from exactly these
        sources; else None. EvidenceError naming the file when it was, but is damaged."""
        from ..evidence.records import EvidenceError, read_record

        location = self.directory / MANIFEST
        remedy = f"delete {self.directory} (the next check keeps it anew) or check with --no-checks-input"
        try:
            manifest = read_record(location, missing=None, damaged="damaged kept sorted input",
                                   expected="the manifest of a kept sorted input", remedy=remedy, read=Path.read_text)
        except OSError:  # unreadable (e.g. a file where the directory would be): not kept, as when absent
            return None
        if manifest is None:
            return None
        try:
            if manifest["format"] != FORMAT or manifest["sources"] != self.sources:
                return None
            generation = self.directory / manifest["generation"]
            parts = []
            for part in manifest["parts"]:
                path = generation / part["file"]
                if path.parent != generation:
                    raise EvidenceError(f"{location}: damaged kept sorted input: names {part['file']!r}, outside its "
                                        f"generation; {remedy}")
                try:
                    size = path.stat().st_size
                except OSError:
                    raise EvidenceError(f"{path}: missing from the kept sorted input; {remedy}") from None
                if size != part["bytes"]:
                    raise EvidenceError(f"{path}: damaged kept sorted input ({size:,} bytes, the manifest says "
                                        f"{part['bytes']:,}); {remedy}")
                if _sha256(path) != part["sha256"]:
                    raise EvidenceError(f"{path}: damaged kept sorted input (its SHA-256 is not the manifest's); {remedy}")
                parts.append((int(part["partition"]), str(path)))
            names = manifest.get("names") or {"wanted": [], "keys": []}
            return KeptMatch(parts, KeyNames({(int(h), bool(published)) for h, published in names["wanted"]},
                                         {(s, int(h), int(h2)): key for s, h, h2, key in names["keys"]}))
        except (KeyError, TypeError, ValueError) as err:
            raise EvidenceError(f"{location}: damaged kept sorted input: {type(err).__name__}: {err}; {remedy}") from None

    def start(self, spark) -> "Writing | None":
        """A new generation for a pass to write into; None when the directory cannot be made."""
        generation = f"g-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        try:
            (self.directory / generation).mkdir(parents=True)
        except OSError:
            return None
        return Writing(self, generation, spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0))


@dataclasses.dataclass(frozen=True)
class KeyNames:
    """The key names a check read from the log (`checks._key_names`): for each wanted key hash (h, whether
    the key has publish rows), the names of every (subscription, h, h2) of it. Kept with the sorted input
    its pass judged: a re-check of the same input finds the same findings and hottest keys, so it names
    them from here instead of reading the log's key columns again (`covers`; else it reads them)."""

    wanted: set  # {(h, published)}
    keys: dict  # {(subscription, h, h2): key}

    def covers(self, wanted: set) -> bool:
        return wanted <= self.wanted

    def of(self, wanted: set) -> dict:
        """The names a read for `wanted` (covered) would give."""
        hashes = {h for h, _ in wanted}
        return {coordinates: key for coordinates, key in self.keys.items() if coordinates[1] in hashes}


@dataclasses.dataclass(frozen=True)
class KeptMatch:
    """A kept input that matches: (partition, file) of its parts, and the key names kept with it."""

    parts: list
    names: KeyNames


@dataclasses.dataclass
class Writing:
    """One pass's rows being kept: the tasks write (`tee`), the driver then commits or discards."""

    kept: Kept
    generation: str
    seen: object  # accumulators: rows the tasks' kernels read, rows their files hold
    written: object

    @property
    def path(self) -> str:
        return str(self.kept.directory / self.generation)

    def commit(self, names: "KeyNames | None" = None) -> int | None:
        """Write the manifest (last) when the files hold every row the pass read, once, with the key names
        the check read (`names`); drop older generations. The bytes kept, or None when nothing was kept."""
        import pyarrow.parquet as pq

        generation = self.kept.directory / self.generation
        try:
            parts = [{"partition": int(f.name[len("part-"):-len(".parquet")]), "file": f.name,
                      "rows": pq.ParquetFile(f).metadata.num_rows, "bytes": f.stat().st_size, "sha256": _sha256(f)}
                     for f in sorted(generation.glob("part-*.parquet"))]
            rows = sum(p["rows"] for p in parts)
            if rows != self.seen.value or self.written.value != self.seen.value:
                self.discard()
                return None
            names = names or KeyNames(set(), {})
            manifest = {"format": FORMAT, "generation": self.generation, "sources": self.kept.sources,
                        "parts": parts, "rows": rows,
                        "names": {"wanted": sorted([h, published] for h, published in names.wanted),
                                  "keys": sorted(([*coordinates, key] for coordinates, key in names.keys.items()),
                                                 key=lambda row: row[:3])}}
            temporary = self.kept.directory / f".{MANIFEST}.{self.generation}"
            temporary.write_text(json.dumps(manifest, indent=1))
            os.replace(temporary, self.kept.directory / MANIFEST)
        except Exception:  # noqa: BLE001 - a cache: whatever failed, the verdict stands and nothing is kept
            self.discard()
            return None
        for other in self.kept.directory.iterdir():  # older generations, a crashed check's leftovers
            if other.name in (self.generation, MANIFEST):
                continue
            if other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
            else:
                other.unlink(missing_ok=True)
        return sum(p["bytes"] for p in parts)

    def discard(self) -> None:
        shutil.rmtree(self.kept.directory / self.generation, ignore_errors=True)
        try:
            self.kept.directory.rmdir()  # when nothing else is kept there: no empty directory left behind
        except OSError:
            pass


def tee(batches: Iterator, directory: str, partition: int, seen, written) -> Iterator:
    """The batches as they come, each also written to `<directory>/part-<partition>.parquet` under a
    temporary name until the last one (a file under its own name is whole). Runs in the pass's task.
    A write that fails stops the writing, not the batches: the rows then miss from `written` and the
    driver keeps nothing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from . import kernel

    final = os.path.join(directory, f"part-{partition:05d}.parquet")
    temporary = f"{final}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    writer, pending, pending_rows, count, failed = None, [], 0, 0, False

    def flush(last: bool) -> None:
        """Write the pending rows' whole keys (all of them when `last`) as one row group, their message
        ids as ranks (`kernel.with_id_ranks`)."""
        nonlocal writer, pending, pending_rows
        table = pa.Table.from_batches(pending).combine_chunks()
        cut = table.num_rows if last else kernel.last_key_start(table)
        if cut == 0:  # one key so far: keep reading
            return
        rest = table.slice(cut)
        table = kernel.with_id_ranks(table.slice(0, cut))
        if writer is None:
            writer = pq.ParquetWriter(temporary, table.schema, compression=COMPRESSION, write_statistics=False)
        writer.write_table(table, row_group_size=table.num_rows)
        pending, pending_rows = rest.to_batches(), rest.num_rows

    try:
        for batch in batches:  # an error of the input or the reader goes up, as it would without this
            count += batch.num_rows
            if not failed and batch.num_rows:
                pending.append(batch)
                pending_rows += batch.num_rows
                if pending_rows >= ROW_GROUP_ROWS:
                    try:
                        flush(last=False)
                    except Exception:  # noqa: BLE001 - the check goes on; this partition is not kept
                        failed, pending = True, []
            yield batch
        seen.add(count)
        if count and not failed:
            try:
                if pending_rows:
                    flush(last=True)
                writer.close()
                writer = None
                os.replace(temporary, final)
                written.add(count)
            except Exception:  # noqa: BLE001 - as above
                pass
    finally:  # also when the reader stops early or fails: nothing half-written stays
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass
        _remove(temporary)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read(path: str) -> Iterator:
    """The kept rows of one partition, in their order, a row group at a time."""
    import pyarrow.parquet as pq

    yield from pq.ParquetFile(path).iter_batches(batch_size=READ_BATCH_ROWS, use_threads=False)
