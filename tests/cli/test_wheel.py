"""pubsubguard the way a user gets it: the wheel built from this source, installed into a fresh
virtualenv with no checkout on the path, run in a repository that has never seen pubsubguard's source
(a copy of examples/team-orders). The first check makes the pack's virtualenv in the (fresh) cache,
with one line on stderr; the second reuses it. The installed tool is built once per version of the code
(`installed.installed_tool`: a few minutes on a cold pip cache)."""

from __future__ import annotations

import shutil
import sys
import time
import zipfile
from pathlib import Path

import pytest

from support.installed import IGNORED, ROOT, installed_tool, run, user_env


@pytest.fixture(scope="module")
def installed():
    """(wheel, the fresh virtualenv's bin/) with pubsubguard installed from the wheel alone."""
    return installed_tool()


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """A team's repository: its program and stack, and the program's virtualenv (as `pulumi install` makes
    it; here the test runner's own, which has pulumi and pulumi-gcp)."""
    repo = tmp_path_factory.mktemp("team") / "repo"
    shutil.copytree(ROOT / "examples" / "team-orders", repo, ignore=IGNORED)
    (repo / "venv").symlink_to(sys.prefix)
    return repo


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """The user's cache, fresh for this module (the first check makes the pack's virtualenv in it)."""
    return tmp_path_factory.mktemp("user") / "cache"


def test_the_wheel_holds_the_pack_and_the_report_template(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("pubsubguard/policies/PulumiPolicy.yaml", "pubsubguard/policies/__main__.py",
                   "pubsubguard/policies/requirements.txt", "pubsubguard/policies/pubsub_rules/catalog.py",
                   "pubsubguard/policies/pubsub_facts/__init__.py", "pubsubguard/validation/report/templates/report.html.j2",
                   "pubsubguard/cli.py", "pubsubguard/validation/job.py", "pubsubguard/infra/__main__.py",
                   "pubsubguard/core/plan.py", "pubsubguard/core/langhost_node_exec.js", "pubsubguard/judging/analyzer.py",
                   "pubsubguard/validation/judgement.py", "pubsubguard/validation/report/terminal.py"):
        assert needed in names, needed
    # one import name: nothing beside `pubsubguard` and its metadata (no `infra`, `validation`, ...)
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"pubsubguard"}, top
    assert not [name for name in names if "/venv/" in name or "__pycache__" in name]


def test_the_installed_copy_is_not_the_checkout(installed, cache, tmp_path):
    _, bin_dir = installed
    done = run([bin_dir / "python", "-c", "import pubsubguard, sys; print(pubsubguard.__file__)"], cwd=tmp_path,
               env=user_env(cache))
    assert "site-packages" in done.stdout and str(ROOT) not in done.stdout
    from pubsubguard import __version__

    assert run([bin_dir / "pubsubguard", "--version"], cwd=tmp_path, env=user_env(cache)).stdout.strip() == \
        f"pubsubguard {__version__}"


def test_a_command_that_needs_the_verify_extra_says_so(installed, repository, cache):
    _, bin_dir = installed
    done = run([bin_dir / "pubsubguard", "verify", "-s", "dev"], cwd=repository, env=user_env(cache), check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "needs the verify extra" in lines[0] and "pip install 'pubsubguard[verify]'" in lines[0]


def test_check_makes_the_pack_venv_once_then_reuses_it(installed, repository, cache):
    _, bin_dir = installed
    env = user_env(cache)
    started = time.monotonic()
    first = run([bin_dir / "pubsubguard", "check", "-s", "dev"], cwd=repository, env=env, check=False)
    first_s = time.monotonic() - started
    assert first.returncode == 0, first.stdout + first.stderr
    assert [line for line in first.stderr.splitlines() if line] == [
        line for line in first.stderr.splitlines() if line.startswith("pubsubguard: making the policy pack's virtualenv")]
    assert len(first.stderr.strip().splitlines()) == 1, first.stderr
    assert first.stdout.startswith("pubsubguard check: Pulumi.dev.yaml (stack dev), 9 resources, pack pubsubguard-pubsub@")
    assert "PASSED: 0 mandatory" in first.stdout and "making" not in first.stdout

    started = time.monotonic()
    second = run([bin_dir / "pubsubguard", "check", "-s", "dev"], cwd=repository, env=env, check=False)
    second_s = time.monotonic() - started
    assert second.returncode == 0 and second.stderr == "", second.stderr
    assert second.stdout == first.stdout
    assert second_s < first_s
    print(f"\nfirst check {first_s:.1f} s, second {second_s:.1f} s")

    folder = Path(run([bin_dir / "pubsubguard", "pack", "path"], cwd=repository, env=env).stdout.strip())
    assert folder.parent == cache
    assert (folder / "PulumiPolicy.yaml").is_file() and (folder / "venv" / "bin" / "python").exists()
    # the folder is complete for the real CLI: its venv runs the pack's SDK
    run([folder / "venv" / "bin" / "python", "-c", "import pulumi_policy"], cwd=folder)


def test_a_fork_of_the_pack(installed, repository, cache, tmp_path):
    """--policy-pack DIR: a team's copy of the pack (here: another version) judges; with the same
    requirements it shares the virtualenv already made."""
    _, bin_dir = installed
    env = user_env(cache)
    fork = tmp_path / "fork"
    shutil.copytree(ROOT / "policies", fork, ignore=IGNORED)
    (fork / "PulumiPolicy.yaml").write_text((fork / "PulumiPolicy.yaml").read_text().replace("version: ", "version: 9"))
    done = run([bin_dir / "pubsubguard", "check", "-s", "dev", "--policy-pack", fork], cwd=repository, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pack pubsubguard-pubsub@9" in done.stdout and "making" not in done.stderr
