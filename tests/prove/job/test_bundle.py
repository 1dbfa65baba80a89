"""`pubsubguard bundle`'s zip holds exactly the packages the job's driver and task functions import
(the full bundle, with its packed environment, is built and used by tests/prove/job/test_cluster.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from pubsubguard.validation import bundle

def test_the_zip_ships_what_the_job_and_its_tasks_import(tmp_path):
    code = ("import sys, pubsubguard.validation.job, pubsubguard.validation.probe.clients, pubsubguard.validation.checks.run, "
            "pubsubguard.validation.checks.kernel, pubsubguard.validation.report.render, pubsubguard.validation.checks.verdict; "
            "mods = [m for m in sys.modules if m.split('.')[0] == 'pubsubguard']; "
            "print(' '.join(sorted({m if hasattr(sys.modules[m], '__path__') else m.rpartition('.')[0] for m in mods})))")
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(imported) == sorted(bundle.PACKAGES)
    bundle.write_zip(tmp_path / "a.zip")
    bundle.write_zip(tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()  # reproducible
    names = zipfile.ZipFile(tmp_path / "a.zip").namelist()
    for package, folder in bundle.package_folders().items():
        prefix = package.replace(".", "/")
        expected = {f"{prefix}/{p.relative_to(folder).as_posix()}" for p in folder.glob("*.py")}
        assert expected <= set(names), package
    assert "pubsubguard/validation/report/templates/report.html.j2" in names or any(n.startswith("pubsubguard/validation/report/templates/") for n in names)
    assert not [n for n in names if n.startswith(("pubsubguard/policies/pubsub_rules/", "pubsubguard/commands/",
                                                   "pubsubguard/judging/", "pubsubguard/infra/"))]


def test_requirements_are_pinned_and_leave_out_pulumi_and_pyspark():
    pinned = bundle.requirements()
    names = {p.split("==")[0].lower() for p in pinned}
    assert {"google-cloud-pubsub", "pyarrow", "numpy", "pandas"} <= names
    assert not names & {"pulumi", "pulumi-gcp", "pyspark", "pytest"}
    assert all("==" in p for p in pinned)


def test_an_unwritable_out_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "bundle", "--out", str(blocker / "bundle")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "argument --out" in done.stderr, done.stderr
    assert not list(tmp_path.glob(".*building*"))
