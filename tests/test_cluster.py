"""A real Spark standalone cluster on loopback runs the verification job and reports what local[2] does.

A master and one worker (1 core, 1 GiB) are started from the installed pyspark
(`$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`);
`spark-submit --master spark://127.0.0.1:PORT validation/job.py --from-evidence DIR` re-checks a
generated evidence directory (with one injected anomaly) on it; the same evidence is checked in this
process on the `local[2]` session; the two report.json files must be the same. The cluster is torn
down whatever happens.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pyspark
import pytest

from validation import histories as H
from validation.evidence import DeclaredSubscription

ROOT = Path(__file__).resolve().parents[1]
SPARK_HOME = Path(pyspark.__file__).parent
SUBSCRIPTIONS = [
    DeclaredSubscription("c-plain", "c-plain-topic"),
    DeclaredSubscription("c-ordered", "c-ordered-topic", ordering=True),
    DeclaredSubscription("c-eod", "c-eod-topic", exactly_once=True, ack_deadline_s=60),
    DeclaredSubscription("c-dl", "c-dl-topic", max_delivery_attempts=5, dead_letter_topic="c-dlq"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json", timeout=5) as r:
        return json.loads(r.read())


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("spark-cluster")
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = {name: open(work / f"{name}.log", "w") for name in ("master", "worker")}
    procs = []
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)],
            env=env, stdout=logs["master"], stderr=subprocess.STDOUT, start_new_session=True,
        ))  # fmt: skip
        procs.append(subprocess.Popen(
            # 3 task slots: the probe needs one for the publisher and one per subscriber task at once
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "3",
             "--memory", "1g", "--webui-port", str(worker_ui), "--work-dir", str(work / "work")],
            env=env, stdout=logs["worker"], stderr=subprocess.STDOUT, start_new_session=True,
        ))  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            try:
                if _status(ui).get("aliveworkers", 0) >= 1:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("standalone cluster did not come up: " + (work / "master.log").read_text()[-2000:]
                            + (work / "worker.log").read_text()[-2000:])
            time.sleep(1)
        yield url, ui, env
    finally:
        for p in reversed(procs):
            _stop(p)
        for f in logs.values():
            f.close()


def _py_files(path: Path) -> Path:
    """The project's packages as one zip, as the job's docstring ships them with --py-files."""
    with zipfile.ZipFile(path, "w") as z:
        for base, package in ((ROOT, "infra"), (ROOT, "validation"), (ROOT, "pubsubguard"), (ROOT / "policies", "pubsub_rules")):
            for f in (base / package).rglob("*.py"):
                z.write(f, f.relative_to(base))
    return path


def _normalised(report: Path) -> dict:
    data = json.loads((report / "report.json").read_text())
    data.pop("report_html", None)
    for sub in data["subscriptions"].values():
        for kind, items in sub["findings"].items():
            sub["findings"][kind] = sorted(items, key=lambda f: json.dumps(f, sort_keys=True))
    return data


def test_local_spark_binds_to_loopback_only(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.master").startswith("local")
    assert (conf.get("spark.driver.host"), conf.get("spark.driver.bindAddress")) == ("127.0.0.1", "127.0.0.1")


def test_job_on_standalone_cluster_reports_like_local(spark, cluster, tmp_path):
    url, ui, env = cluster
    legal = H.generate(SUBSCRIPTIONS, H.Workload(keys=3, messages_per_key=8, poison_rate=0.1, fault_rate=0.3), seed=11,
                       run_id="run-cluster")
    mutated, injection = H.MUTATORS["out_of_order/skip"](legal, random.Random(1))
    evidence_dir = mutated.write(tmp_path / "evidence")

    cmd = [
        str(SPARK_HOME / "bin" / "spark-submit"), "--master", url, "--driver-memory", "1g", "--executor-memory", "1g",
        "--total-executor-cores", "1", "--py-files", str(_py_files(tmp_path / "pubsubguard.zip")),
        str(ROOT / "validation" / "job.py"), "--from-evidence", str(evidence_dir), "--report", str(tmp_path / "cluster"),
        "--no-progress",
    ]  # fmt: skip  (no job --master: spark-submit's --master decides, the job's default must not override it)
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-4000:]
    apps = _status(ui)
    ran = [a for a in apps.get("completedapps", []) + apps.get("activeapps", [])]
    assert ran, f"no application ran on the standalone master: {apps}"

    from validation import job

    local_code = job.check_and_report(spark, evidence_dir, tmp_path / "local", terminal=False)
    assert proc.returncode == local_code == 1  # the injected out_of_order violates ordering
    on_cluster, local = _normalised(tmp_path / "cluster"), _normalised(tmp_path / "local")
    assert on_cluster == local
    found = on_cluster["subscriptions"][injection.subscription]["findings"]["out_of_order"]
    assert [(f["key"], f["seq"]) for f in found] == [(injection.key, injection.seq)]


def test_probe_on_standalone_cluster_against_the_emulator(spark, cluster, emulator, tmp_path):
    """The whole job — twins, publisher and subscriber tasks on the cluster's executor, evidence, checks —
    submitted with spark-submit against the emulator; re-checking its evidence on local[2] gives the same
    verdicts and findings."""
    from pubsubguard.apply import apply_plan
    from test_verify_e2e import make_estate

    url, ui, env = cluster
    plan_file, plan, topic = make_estate(tmp_path)
    apply_plan(plan)
    report = tmp_path / "cluster"
    cmd = [
        str(SPARK_HOME / "bin" / "spark-submit"), "--master", url, "--driver-memory", "1g", "--executor-memory", "1g",
        "--total-executor-cores", "3", "--py-files", str(_py_files(tmp_path / "pubsubguard.zip")),
        str(ROOT / "validation" / "job.py"), "--plan", str(plan_file), "--target", "emulator",
        "--keys", "3", "--messages-per-key", "5", "--faults", "nack=0.1,poison=0.1", "--drain-timeout", "30",
        "--report", str(report), "--master", url, "--no-progress",
    ]  # fmt: skip
    proc = subprocess.run(cmd, env={**env, "PUBSUB_EMULATOR_HOST": emulator.host}, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-4000:]
    apps = _status(ui)
    assert len(apps.get("completedapps", []) + apps.get("activeapps", [])) >= 2, apps

    on_cluster = _normalised(report)
    assert on_cluster["target"] == "emulator"
    probed = {name for name, sub in on_cluster["subscriptions"].items() if sub.get("tested")}
    assert f"{topic}-plain" in probed and f"{topic}-push" in probed  # push: through the driver's receiver
    assert on_cluster["subscriptions"][f"{topic}-plain"]["figures"]["published"] == 15, on_cluster["subscriptions"][f"{topic}-plain"]

    from validation import job

    local_code = job.check_and_report(spark, report / "evidence", tmp_path / "local", terminal=False)
    local = _normalised(tmp_path / "local")
    assert local_code == proc.returncode
    for name in probed:
        assert local["subscriptions"][name]["guarantees"] == on_cluster["subscriptions"][name]["guarantees"], name
        assert local["subscriptions"][name]["findings"] == on_cluster["subscriptions"][name]["findings"], name
