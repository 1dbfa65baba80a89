"""Plans, run metadata, evidence parts and reports on Google Cloud Storage, through pubsubguard.core.storage,
against a real GCS JSON API server on loopback (`gcp-storage-emulator`, selected with
STORAGE_EMULATOR_HOST as the Google Cloud clients do). The Python side only: Spark reads gs:// through
the GCS connector, which this installation does not have, so the checks read a local staging copy and
say so."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pyarrow as pa
import pytest

from pubsubguard.core import storage
from pubsubguard.core.declared import plan_from
from support import histories as H
from pubsubguard.validation.evidence import records
from pubsubguard.validation import job
from pubsubguard.validation.evidence.records import DeclaredSubscription
from pubsubguard.validation.probe.clients import PartWriter

BUCKET = "pubsubguard-test"  # the bucket the `gcs` fixture (conftest) creates
SUBSCRIPTIONS = [
    DeclaredSubscription("s-plain", "s-plain-topic"),
    DeclaredSubscription("s-ordered", "s-ordered-topic", ordering=True),
]


def test_objects_round_trip_and_list(gcs):
    storage.write_text(f"gs://{BUCKET}/rt/a.txt", "one")
    storage.write_bytes(f"gs://{BUCKET}/rt/sub/b.bin", b"\x00\x01")
    assert storage.read_text(f"gs://{BUCKET}/rt/a.txt") == "one"
    assert storage.exists(f"gs://{BUCKET}/rt/sub/b.bin") and not storage.exists(f"gs://{BUCKET}/rt/none")
    assert storage.files(f"gs://{BUCKET}/rt") == ["a.txt", "sub/b.bin"]
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(f"gs://{BUCKET}/rt/none")


def test_local_writes_leave_no_temporary_file(tmp_path):
    target = tmp_path / "deep" / "run.json"
    storage.write_text(target, "{}")
    storage.write_text(target, "{\"again\": 1}")
    assert json.loads(target.read_text()) == {"again": 1}
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]


def test_unknown_scheme_is_one_line_exit_2(tmp_path):
    with pytest.raises(storage.StorageError, match=r"ftp://x/plan.json: unknown storage scheme 'ftp://'"):
        storage.filesystem("ftp://x/plan.json")
    proc = subprocess.run([sys.executable, "-m", "pubsubguard", "verify", "--plan", "ftp://x/plan.json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "unknown storage scheme 'ftp://'" in proc.stderr, proc.stderr


def test_plan_read_from_gcs(gcs, tmp_path):
    plan = {"format": "pubsubguard-plan/1", "stack": "dev", "resources": [], "outputs": {}}
    from pubsubguard.core.plan_file import PLAN_FORMAT

    plan["format"] = PLAN_FORMAT
    storage.write_text(f"gs://{BUCKET}/plans/plan.json", json.dumps(plan))
    assert plan_from(f"gs://{BUCKET}/plans/plan.json", None) == plan
    with pytest.raises(Exception, match=f"gs://{BUCKET}/plans/missing.json: no such plan file"):
        plan_from(f"gs://{BUCKET}/plans/missing.json", None)


def test_part_writer_and_run_info_on_gcs(gcs):
    directory = f"gs://{BUCKET}/parts/evidence"
    writer = PartWriter(storage.join(directory, "publishes"), records.PUBLISH_SCHEMA, "pub-t", flush_rows=2, flush_s=60)
    rows = [{"run_id": "r", "topic": "t", "key": "k", "seq": i, "message_id": str(i), "poison": False, "status": "ok",
             "error": None, "publish_time_us": i, "publisher_task": "pub-t"} for i in range(5)]
    for row in rows:
        writer.add(row)
    writer.close()
    parts = storage.files(storage.join(directory, "publishes"))
    assert len(parts) == 3 and all(p.endswith(".parquet") for p in parts)
    import pyarrow.parquet as pq

    read = pa.concat_tables([pq.read_table(pa.BufferReader(storage.read_bytes(storage.join(directory, "publishes", p))))
                             for p in parts])
    assert sorted(read.column("seq").to_pylist()) == list(range(5))
    info = records.RunInfo(run_id="r", target="emulator", subscriptions=SUBSCRIPTIONS, parameters={"keys": 1})
    info.write(directory)
    assert records.RunInfo.read(directory) == info


def _normalised(report: dict) -> dict:
    report = dict(report)
    report.pop("report_html", None)
    report.pop("evidence", None)
    return report


def test_recheck_reads_evidence_from_gcs_and_writes_the_report_there(gcs, spark, tmp_path, capsys):
    legal = H.generate(SUBSCRIPTIONS, H.Workload(keys=3, messages_per_key=6, fault_rate=0.2), seed=5, run_id="run-gcs")
    mutated, injection = H.MUTATORS["out_of_order/skip"](legal, random.Random(3))
    local_evidence = mutated.write(tmp_path / "evidence")
    remote = f"gs://{BUCKET}/runs/run1"
    copied = storage.copy_tree(local_evidence, storage.join(remote, "evidence"))
    assert "run.json" in copied and any(name.startswith("deliveries/") for name in copied)

    code = job.main(["--from-evidence", remote, "--report", storage.join(remote, "recheck"), "--no-progress"], spark=spark)
    err = capsys.readouterr().err
    assert "no Hadoop filesystem for gs://" in err and "GCS connector" in err  # said, not silent
    assert f"written to {remote}/recheck" in err
    on_gcs = json.loads(storage.read_text(storage.join(remote, "recheck", "report.json")))
    assert storage.exists(storage.join(remote, "recheck", "report.html"))
    assert on_gcs["evidence"] == storage.join(remote, "evidence")

    local_code = job.check_and_report(spark, local_evidence, tmp_path / "local", terminal=False)
    local = json.loads((tmp_path / "local" / "report.json").read_text())
    assert code == local_code == 1
    assert _normalised(on_gcs) == _normalised(local)
    found = on_gcs["subscriptions"][injection.subscription]["findings"]["out_of_order"]
    assert [(f["key"], f["seq"]) for f in found] == [(injection.key, injection.seq)]


@pytest.mark.emulator
def test_a_probe_run_writes_its_whole_report_tree_to_gcs(gcs, spark, emulator, tmp_path, capsys):
    """`verify --report gs://…`: the tasks write the evidence (parts, flags, notes) to the bucket as the run
    goes and the driver reads it from there; run.json, report.json and report.html land there too;
    nothing is left in a scratch directory; a re-check of the bucket's evidence reports the same findings.
    (tests/prove/job/test_cluster.py runs it on a worker that shares no files with the driver.)"""
    import glob
    import tempfile

    from pubsubguard.core.apply import apply_plan
    from support.estates import make_estate

    plan_file, plan, topic = make_estate(tmp_path)
    apply_plan(plan)
    remote = f"gs://{BUCKET}/probe-runs/run1"
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "pubsubguard-run-*")))
    code = job.main(["--plan", str(plan_file), "--target", "emulator", "--keys", "2", "--messages-per-key", "4",
                     "--drain-timeout", "30", "--faults", "nack=0.2", "--report", remote, "--no-progress"], spark=spark)
    err = capsys.readouterr().err
    assert f"files written to {remote}" in err, err
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "pubsubguard-run-*"))) == before  # scratch removed
    names = storage.files(remote)
    assert {"report.json", "report.html", "evidence/run.json"} <= set(names), names
    assert any(n.startswith("evidence/deliveries/part-") for n in names)
    assert any(n.startswith("evidence/publishes/part-") for n in names)
    report = json.loads(storage.read_text(storage.join(remote, "report.json")))
    assert report["evidence"] == storage.join(remote, "evidence")
    assert report["report_html"] == storage.join(remote, "report.html")
    assert code == report["exit_code"]
    plain = report["subscriptions"][f"{topic}-plain"]
    assert plain["figures"]["published"] == 8 and plain["guarantees"]["completeness"] == "holds", plain
    # the evidence in the bucket is the run's: a re-check of it says the same
    again = job.main(["--from-evidence", remote, "--report", str(tmp_path / "again"), "--no-progress"], spark=spark)
    rechecked = json.loads((tmp_path / "again" / "report.json").read_text())
    assert again == code
    assert {n: s["findings"] for n, s in rechecked["subscriptions"].items()} == \
        {n: s["findings"] for n, s in report["subscriptions"].items()}


def test_a_probe_run_to_a_bucket_that_does_not_exist_is_one_line_before_the_target_is_touched(gcs, tmp_path):
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "verify", "--report", "gs://no-such-bucket-x/run",
                           "--target", "emulator"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PUBSUB_EMULATOR_HOST": "127.0.0.1:9"})  # nothing listens there
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "gs://no-such-bucket-x/run" in lines[0] and "Traceback" not in done.stderr, done.stderr
