"""Smaller things a newcomer met (issue 28), each ending in one clear line and the right exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from support.one_line import one_line


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", *args], cwd=root, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "VIRTUAL_ENV": sys.prefix})


def project(tmp_path: Path, program: str, stack: object = None) -> Path:
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "python"}))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack if stack is not None else {"config": {"gcp:project": "p"}}))
    (tmp_path / "__main__.py").write_text(program)
    return tmp_path


def test_a_syntax_error_names_the_programs_file_and_line(tmp_path):
    root = project(tmp_path, "import pulumi_gcp as gcp\ntopic = gcp.pubsub.Topic('t', name='orders'\n")
    line = one_line(run(root, "check"), 2)
    assert line.startswith("pubsubguard check: the program failed: __main__.py:2: SyntaxError: "), line


def test_a_stack_file_that_is_a_list_is_an_error_not_a_pass(tmp_path):
    root = project(tmp_path, "import pulumi_gcp as gcp\n", stack=[{"gcp:project": "p"}])
    assert one_line(run(root, "check"), 2) == (
        "pubsubguard check: Pulumi.dev.yaml: expected a mapping with 'config' (as `pulumi config set` writes it), got a list")
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": ["gcp:project", "p"]}))
    assert "config: expected a mapping" in one_line(run(root, "check"), 2)


def test_an_empty_stack_name_is_a_usage_error(tmp_path):
    root = project(tmp_path, "import pulumi_gcp as gcp\n")
    line = one_line(run(root, "check", "-s", ""), 2)
    assert "argument -s/--stack: expected a stack name" in line and "Pulumi..yaml" not in line


def test_sarif_out_on_a_broken_stack_still_writes_a_failed_run(tmp_path):
    root = project(tmp_path, "import pulumi_gcp as gcp\n", stack=["not", "a", "mapping"])
    out = tmp_path / "check.sarif"
    one_line(run(root, "check", "--format", "sarif", "--out", str(out)), 2)
    (run_,) = json.loads(out.read_text())["runs"]
    assert run_["invocations"][0]["executionSuccessful"] is False and run_["results"] == []
    failing = project(tmp_path / "p2" if (tmp_path / "p2").mkdir() is None else tmp_path, "raise ValueError('boom')\n")
    one_line(run(failing, "check", "--format", "sarif", "--out", str(out)), 2)
    (run_,) = json.loads(out.read_text())["runs"]
    assert run_["invocations"][0]["executionSuccessful"] is False
    assert "boom" in run_["invocations"][0]["toolExecutionNotifications"][-1]["message"]["text"]
