"""The pack's virtualenv made on first use (pubsubguard.judging.packenv): keyed by the requirements, built once
when two checks start together, a pack that cannot be made is one line; the job summary from the check's outcome."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pubsubguard.judging import packenv, summary
from pubsubguard.judging.result import Judgement, Suppression, Violation, compose

from support import ROOT

# A stand-in for the Python that makes the venv: `-m venv DIR` makes DIR/bin/python (itself), `-m pip`
# counts the builds and takes a moment, so two concurrent builders would overlap.
FAKE_PYTHON = textwrap.dedent("""\
    #!/bin/sh
    if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0; fi
    if [ "$1 $2" = "-m pip" ]; then echo build >> "$BUILDS"; sleep 1; exit 0; fi
    exit 1
""")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(packenv.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_python(tmp_path: Path, body: str = FAKE_PYTHON) -> Path:
    path = tmp_path / "python"
    path.write_text(body)
    path.chmod(0o755)
    return path


def test_the_key_is_the_requirements(tmp_path, cache):
    one, two = tmp_path / "a.txt", tmp_path / "b.txt"
    one.write_text("pulumi-policy>=1.21,<2\n")
    two.write_text("pulumi-policy>=1.21,<2\n")
    assert packenv.venv_dir(one) == packenv.venv_dir(two) and packenv.venv_dir(one).parent == cache
    two.write_text("pulumi-policy>=1.22,<2\n")
    assert packenv.venv_dir(one) != packenv.venv_dir(two)


def test_two_checks_at_once_build_it_once(tmp_path, cache, monkeypatch):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pulumi-policy\n")
    builds = tmp_path / "builds"
    monkeypatch.setenv("BUILDS", str(builds))
    python = fake_python(tmp_path)
    with ThreadPoolExecutor(2) as pool:
        made = list(pool.map(lambda _: packenv.ensure_venv(requirements, str(python)), range(2)))
    assert made[0] == made[1] == packenv.venv_dir(requirements)
    assert builds.read_text().splitlines() == ["build"]
    assert (made[0] / packenv.READY).is_file()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []  # no temporary folder left


def test_no_venv_module_is_one_line(tmp_path, cache):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pulumi-policy\n")
    python = fake_python(tmp_path, "#!/bin/sh\necho 'Error: ensurepip is not available' >&2\nexit 1\n")
    with pytest.raises(packenv.PackError, match=r"venv module or ensurepip is missing \(Debian/Ubuntu: apt install python3-venv\)"):
        packenv.ensure_venv(requirements, str(python))
    assert not packenv.venv_dir(requirements).exists()


def test_a_pack_whose_venv_cannot_be_made_is_one_line(tmp_path, cache):
    """No package index (as offline): pip fails; one line naming the cause and the log, exit 2."""
    fork = tmp_path / "fork"
    shutil.copytree(ROOT / "policies", fork, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    (fork / "requirements.txt").write_text("--no-index\npulumi-policy>=1.21,<2\n")
    team = tmp_path / "team"
    shutil.copytree(ROOT / "examples" / "team-orders", team, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--policy-pack", str(fork), "--python", sys.executable],
                          cwd=team, capture_output=True, text=True, timeout=300,
                          env={**os.environ, packenv.CACHE_ENV: str(cache)})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert lines[0].startswith("pubsubguard: making the policy pack's virtualenv")
    assert len(lines) == 2 and lines[1].startswith("pubsubguard check: cannot make the policy pack's virtualenv: "
                                                   "pip install -r requirements.txt failed"), done.stderr
    assert "(log: " in lines[1]


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel of one module, made here, that pip installs with no index."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", "MADE_BY = 'the wheel'\n")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: pubsubguard-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_a_pythonpath_holding_a_requirement_does_not_leave_it_out_of_the_venv(tmp_path, cache, monkeypatch):
    """With PYTHONPATH naming a folder where the requirement is already installed (a checkout's
    site-packages, say), pip would count it satisfied and skip it: the venv is built apart from it."""
    wheels = tmp_path / "wheels"
    _wheel(wheels, "pgtinypkg", "1.0")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "pgtinypkg-1.0.dist-info").mkdir(parents=True)
    (elsewhere / "pgtinypkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: pgtinypkg\nVersion: 1.0\n")
    (elsewhere / "pgtinypkg").mkdir()
    (elsewhere / "pgtinypkg" / "__init__.py").write_text("MADE_BY = 'PYTHONPATH'\n")
    requirements = tmp_path / "pack" / "requirements.txt"
    requirements.parent.mkdir()
    requirements.write_text(f"--no-index\n--find-links {wheels}\npgtinypkg==1.0\n")
    monkeypatch.setenv("PYTHONPATH", str(elsewhere))
    monkeypatch.setenv("PIP_TARGET", str(tmp_path / "target"))
    venv = packenv.ensure_venv(requirements)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_TARGET")}
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import pgtinypkg; print(pgtinypkg.MADE_BY)"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "the wheel", done.stderr
    assert not (tmp_path / "target").exists()


def test_the_summary_is_a_table_with_suppressed_apart():
    def violation(rule, name, level):
        return Violation(policy=rule, level=level, message=f"{name} breaks {rule}; fix it.",
                         urn=f"urn:pulumi:dev::team::gcp:pubsub/topic:Topic::{name}", resource_type="", resource_name=name)

    found = (violation("ack-deadline-in-range", "orders-ordered", "mandatory"),
             violation("ack-deadline-in-range", "orders-slow", "mandatory"), violation("topic-kms-key", "orders", "advisory"))
    judgement = Judgement(pack="p", pack_version="1", stack="dev", source="Pulumi.dev.yaml", resources=3, policies=(),
                          levels={}, violations=found)
    reason = Suppression("ack-deadline-in-range", "", "consumers ack in 2 s", "inSource", "OPS-12")
    outcome = compose(judgement, suppressed={1: reason})
    text = summary.section(outcome, lambda v: ("channel.py", 35))
    assert "### Stack `dev`: REJECTED: 1 mandatory, 1 advisory, 1 suppressed" in text
    assert "| mandatory | `ack-deadline-in-range` | `orders-ordered` | `channel.py:35` | orders-ordered breaks" in text
    assert "| mandatory | `ack-deadline-in-range` | `orders-slow` | `channel.py:35` | consumers ack in 2 s (OPS-12) |" in text
    assert text.index("orders-ordered") < text.index("topic-kms-key") < text.index("Suppressed")
