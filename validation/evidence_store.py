"""Recorded evidence where it is stored: found (`evidence_location`) and read into Spark (`read_evidence`),
where it is read from decided once.

Spark reads the part files in place when its Hadoop has a filesystem for the evidence's scheme (local
paths always). Otherwise, in local mode, the evidence is copied to a local staging directory first; on
a cluster (whose executors do not see the driver's disk) the driver reads the parts itself
(`pubsubguard.core.storage`) and hands them to Spark as Arrow tables, bounded by its memory. Either is
said on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pubsubguard.core import storage
from pubsubguard.validation import evidence
from pubsubguard.validation.failures import VerifyError


def evidence_location(directory: Path | str) -> Path | str:
    for candidate in (directory, storage.join(directory, "evidence")):
        if storage.exists(storage.join(candidate, "run.json")):
            return candidate if storage.is_remote(candidate) else Path(candidate)
    raise VerifyError(f"--from-evidence {directory}: no run.json here or in {storage.join(directory, 'evidence')} "
                      "(expected the evidence directory of a verify run)")


def read_evidence(spark, evidence_dir: Path | str, staging: Path | None = None):
    """(run info, publishes, deliveries) of an evidence directory, the frames in the contract's schema.
    `staging`: a local directory the evidence may be copied to (local mode, no connector for its scheme);
    without one, such evidence is read through the driver."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    info = evidence.RunInfo.read(evidence_dir)
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
            parts = [name for name in storage.files(evidence_dir) if name.endswith(".parquet")]
            print(f"evidence: {missing}; the driver reads the {len(parts)} part files of {evidence_dir} and sends "
                  "them to the executors (bounded by the driver's memory: add the connector for large runs)",
                  file=sys.stderr)
            through_driver = True
    frames = []
    for name, schema in (("publishes", evidence.PUBLISH_SCHEMA), ("deliveries", evidence.DELIVERY_SCHEMA)):
        directory = storage.join(evidence_dir, name)  # a path, or a URI Spark's Hadoop reads
        if through_driver:
            parts = [storage.read_parquet(storage.join(directory, part)).select(schema.names).cast(schema)
                     for part in storage.names(directory, "part-") if part.endswith(".parquet")]
            table = pa.concat_tables(parts) if parts else schema.empty_table()
            frames.append(spark.createDataFrame(table, schema=from_arrow_schema(schema)))
            continue
        if not storage.is_remote(directory):
            Path(directory).mkdir(parents=True, exist_ok=True)
        frames.append(spark.read.schema(from_arrow_schema(schema)).parquet(directory))
    return (info, *frames)
