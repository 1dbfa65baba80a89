"""Recorded evidence where it is stored: found (`evidence_location`) and read into Spark (`read_evidence`),
where it is read from decided once.

Spark reads the part files in place when its Hadoop has a filesystem for the evidence's scheme (local
paths always). Otherwise, in local mode, the evidence is copied to a local staging directory first; on
a cluster (whose executors do not see the driver's disk) the driver reads the parts itself
(`pubsubguard.core.storage`) and hands them to Spark as Arrow tables, bounded by its memory. Either is
said on stderr. Which part files are read is the seal's to say (`pubsubguard.validation.evidence.seal`): the
sealed ones, checked first; of unsealed evidence, every part that opens as one of its run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

from pubsubguard.core import storage
from pubsubguard.core.errors import VerifyError

from . import locks, records, seal


def evidence_location(directory: Path | str) -> Path | str:
    for candidate in (directory, storage.join(directory, "evidence")):
        if storage.exists(storage.join(candidate, "run.json")):
            return candidate if storage.is_remote(candidate) else Path(candidate)
    raise VerifyError(f"--from-evidence {directory}: no run.json here or in {storage.join(directory, 'evidence')} "
                      "(expected the evidence directory of a verify run)")


RECHECK = "recheck"  # a re-check's report by default, inside the evidence it re-checks (not sealed: seal.NOT_SEALED)
PROBE_EVIDENCE = "evidence"  # a probe run writes its evidence to `<report>/evidence`


def recheck_directory(evidence_dir: Path | str) -> Path | str:
    """Where a re-check (`verify --from-evidence DIR`) writes its report without `--report`: `<evidence>/recheck`,
    inside what it re-checks, so re-checks of two evidence directories never write to one place, nor onto the
    report of the run that recorded them. Refused in one line (VerifyError) where it cannot be written."""
    directory = storage.join(evidence_dir, RECHECK)
    if storage.is_remote(directory):
        return directory
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise VerifyError(f"--from-evidence {evidence_dir}: cannot write the re-check's report to {directory} "
                          f"({err.strerror}); name a writable directory with --report DIR") from None
    return Path(directory)


def probe_report(evidence_dir: Path | str) -> Path | str | None:
    """The report directory of the probe run that wrote `evidence_dir` (`<report>/evidence`, which that run holds:
    `locks`), or None when the evidence is not in one (a copy elsewhere, whose parent no probe run held)."""
    if storage.is_remote(evidence_dir) or Path(evidence_dir).name != PROBE_EVIDENCE:
        return None
    parent = Path(evidence_dir).resolve().parent
    return parent if (parent / locks.LOCK).exists() else None


class Evidence(NamedTuple):
    """A run's evidence as the checks read it: run.json, the two logs as frames, and what was found of the
    files against their seal (`pubsubguard.validation.evidence.seal.Integrity`: which part files the frames read)."""

    info: records.RunInfo
    publishes: object  # pyspark DataFrame, records.PUBLISH_SCHEMA
    deliveries: object  # pyspark DataFrame, records.DELIVERY_SCHEMA
    integrity: seal.Integrity


def read_evidence(spark, evidence_dir: Path | str, staging: Path | None = None, partial: bool = False) -> Evidence:
    """The evidence of a run, the frames in the contract's schema reading the part files its seal lists
    (`seal.check`: a damaged file is an EvidenceError naming it, unless `partial`: then what is intact).
    `staging`: a local directory the evidence may be copied to (local mode, no connector for its scheme);
    without one, such evidence is read through the driver."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    info = records.RunInfo.read(evidence_dir)
    integrity = seal.check(evidence_dir, info, partial)
    through_driver = False
    if storage.is_remote(evidence_dir) and not storage.hadoop_can_read(spark, evidence_dir):
        kind = storage.scheme(evidence_dir)
        missing = (f"this Spark has no Hadoop filesystem for {kind}:// (it needs "
                   f"{storage.CONNECTORS.get(kind, 'a connector')})")
        if staging is not None and spark.sparkContext.master.startswith("local"):
            copied = storage.copy_tree(evidence_dir, staging)
            print(f"evidence: {missing}; copied {len(copied)} files from {evidence_dir} to local staging {staging} "
                  "to check them", file=sys.stderr)
            evidence_dir = staging
        else:
            parts = sum(len(names) for names in integrity.parts.values())
            print(f"evidence: {missing}; the driver reads the {parts} part files of {evidence_dir} and sends "
                  "them to the executors (bounded by the driver's memory: add the connector for large runs)",
                  file=sys.stderr)
            through_driver = True
    frames = []
    for name, schema in (("publishes", records.PUBLISH_SCHEMA), ("deliveries", records.DELIVERY_SCHEMA)):
        parts = [storage.join(evidence_dir, *part.split("/")) for part in integrity.parts[name]]
        if through_driver or not parts:
            tables = [storage.read_parquet(part).select(schema.names).cast(schema) for part in parts]
            table = pa.concat_tables(tables) if tables else schema.empty_table()
            frames.append(spark.createDataFrame(table, schema=from_arrow_schema(schema)))
            continue
        # the directory when its files are the parts (Spark lists more than 32 paths with a job of its own)
        where = [storage.join(evidence_dir, name)] if integrity.whole else parts
        frames.append(spark.read.schema(from_arrow_schema(schema)).parquet(*where))  # paths, or URIs Spark's Hadoop reads
    return Evidence(info, *frames, integrity)
