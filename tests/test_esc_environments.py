"""Pulumi ESC environments a stack file imports (`environment:`, issue 64). Offline nothing can open them:
the first screen says which the stack imports and that their values were not read; a key only they could
supply fails in one line naming the key and the environments (never Pulumi's advice to `pulumi config
set` a value that lives in ESC); `--environment-values FILE` reads what `esc open ORG/ENV --format json`
prints, its `pulumiConfig` merged under the stack file's own values, every value kept secret."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from test_nodejs_programs import node_project

PROGRAM = """
    import pulumi
    import pulumi_gcp as gcp

    config = pulumi.Config()
    gcp.pubsub.Topic("orders", name=config.require("ordersTopic"), labels={"region": config.get("region") or "none"})
"""
ESC_OPEN = {  # the shape of `esc open acme/pubsub-dev --format json`: the environment's values, evaluated
    "pulumiConfig": {"ordersTopic": "orders-from-esc-7f3a", "region": "europe-west4", "gcp:project": "proj-esc"},
    "environmentVariables": {"GOOGLE_PROJECT": "proj-esc"},
}


def project(tmp_path: Path, stack: dict, program: str = PROGRAM, config: dict | None = None) -> Path:
    root = tmp_path / "team"
    root.mkdir(parents=True)
    runtime = {"name": "python", "options": {"virtualenv": sys.prefix}}
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": runtime, **({"config": config} if config else {})}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    (root / "__main__.py").write_text(textwrap.dedent(program).lstrip())
    return root


def check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", "check", "-s", "dev", *args], cwd=root,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_a_key_only_an_environment_supplies_is_one_line_naming_it_and_the_environments(tmp_path):
    root = project(tmp_path, {"environment": ["acme/common", "acme/pubsub-dev"], "config": {"gcp:project": "proj-a"}})
    done = check(root)
    assert done.returncode == 2
    assert done.stdout.splitlines()[2] == (
        "environments: acme/common, acme/pubsub-dev, imported by Pulumi.dev.yaml: their values were NOT read "
        "(offline nothing opens them; a key only they set is missing here: --environment-values FILE gives them)")
    [line] = done.stderr.strip().splitlines()
    assert line == (
        "pubsubguard check: the program failed: configuration value 'team:ordersTopic' is not in Pulumi.dev.yaml: "
        "only the stack's environments acme/common, acme/pubsub-dev (imported by Pulumi.dev.yaml; not read offline: "
        "give their values with --environment-values FILE, what `esc open ORG/ENV --format json` prints) could supply it")


def test_the_definition_form_and_a_declared_key_name_the_environments(tmp_path):
    stack = {"environment": {"imports": ["acme/common", {"acme/pubsub-dev": {"merge": False}}]},
             "config": {"gcp:project": "proj-a"}}
    root = project(tmp_path, stack, config={"ordersTopic": {"type": "string"}})
    done = check(root)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "pubsubguard check: Pulumi.dev.yaml: configuration value 'team:ordersTopic' (declared in Pulumi.yaml without a "
        "default) is not in the stack file: only its environments acme/common, acme/pubsub-dev could supply it, and "
        "offline their values are not read (give them with --environment-values FILE, what `esc open ORG/ENV "
        "--format json` prints)"]


def test_environment_values_merge_under_the_stack_files_own_and_stay_secret(tmp_path):
    root = project(tmp_path, {"environment": ["acme/pubsub-dev"], "config": {"gcp:project": "proj-a",
                                                                            "team:region": "europe-west1"}})
    (root / "esc.json").write_text(json.dumps(ESC_OPEN))
    done = check(root, "--environment-values", "esc.json", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["environments"] == {"imports": ["acme/pubsub-dev"], "values_from": "esc.json"}
    text = check(root, "--environment-values", "esc.json")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[2] == ("environments: acme/pubsub-dev, their values from --environment-values "
                                           "esc.json (every value kept secret)")
    assert "Topic [secret] (Pulumi resource orders)" in text.stdout
    for shown in (done.stdout, done.stderr, text.stdout, text.stderr):
        assert "orders-from-esc-7f3a" not in shown and "europe-west4" not in shown
    plan = subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "dev"], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert plan.returncode == 2  # without the environment's values the program cannot run


def test_bad_environment_input_is_one_line_before_the_program_runs(tmp_path):
    root = project(tmp_path, {"environment": ["acme/pubsub-dev"], "config": {"gcp:project": "proj-a"}})
    (root / "broken.json").write_text("{not json")
    (root / "list.json").write_text(json.dumps({"pulumiConfig": ["ordersTopic"]}))
    assert check(root, "--environment-values", "broken.json").stderr.strip().startswith(
        "pubsubguard check: --environment-values broken.json: not JSON (")
    assert check(root, "--environment-values", "list.json").stderr.strip() == (
        "pubsubguard check: --environment-values list.json: pulumiConfig: expected an object of configuration keys "
        "to values, got a list")
    bad = project(tmp_path / "bad", {"environment": 5})
    assert check(bad).stderr.strip() == (
        "pubsubguard check: Pulumi.dev.yaml: environment: expected a list of environment names (`environment: "
        "[org/env]`) or a mapping with `imports:`, got 5")
    plain = project(tmp_path / "plain", {"config": {"gcp:project": "proj-a"}})
    (plain / "esc.json").write_text(json.dumps(ESC_OPEN))
    assert check(plain, "--environment-values", "esc.json").stderr.strip() == (
        "pubsubguard check: --environment-values esc.json: Pulumi.dev.yaml imports no environment (its "
        "`environment:` lists the ones whose values this gives)")


def test_a_typescript_program_missing_a_key_an_environment_supplies(tmp_path):
    root = node_project(tmp_path, """
        const config = new pulumi.Config();
        new gcp.pubsub.Topic("orders", { name: config.require("ordersTopic") });
        """)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"environment": ["acme/pubsub-dev"],
                                                          "config": {"gcp:project": "proj-a"}}))
    done = check(root)
    assert done.returncode == 2
    line = next(n for n, text in enumerate((root / "index.ts").read_text().splitlines(), 1) if "config.require" in text)
    assert done.stderr.strip().splitlines() == [
        f"pubsubguard check: the program failed: index.ts:{line}: configuration value 'team-ts:ordersTopic' is not in "
        "Pulumi.dev.yaml: only the stack's environment acme/pubsub-dev (imported by Pulumi.dev.yaml; not read offline: "
        "give their values with --environment-values FILE, what `esc open ORG/ENV --format json` prints) could supply it"]
    (root / "esc.json").write_text(json.dumps({"pulumiConfig": {"ordersTopic": "orders-from-esc-7f3a"}}))
    given = check(root, "--environment-values", "esc.json")
    assert given.returncode == 0, given.stderr
    assert "orders-from-esc-7f3a" not in given.stdout + given.stderr
