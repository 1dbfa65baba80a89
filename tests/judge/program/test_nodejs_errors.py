"""A TypeScript program `pubsubguard check` cannot run to its end (issue 39): missing packages, a Node.js too old for
the SDK, a throw, a missing config value, an error inside an apply, running out of memory, a type error. Each is
one line naming the cause, at the program's TypeScript line where it has one."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from support.nodejs_projects import node_modules
from support.programs import line_of, node_project, one_line_error, pubsubguard


def test_missing_node_modules_is_one_line_naming_npm_ci(tmp_path):
    root = node_project(tmp_path, 'new gcp.pubsub.Topic("orders", { name: "orders" });\n', modules=False)
    assert one_line_error(root) == (
        f"pubsubguard check: {root / 'Pulumi.yaml'}: the program's Node.js modules are not installed "
        f"({root / 'node_modules'} is missing): run `npm ci` in {root}")


def test_an_sdk_that_needs_a_newer_node_is_one_line_naming_both_versions(tmp_path):
    modules = tmp_path / "node_modules"  # the installed modules, but an SDK whose package.json wants Node 99
    modules.mkdir()
    for entry in node_modules().iterdir():
        if entry.name != "@pulumi":
            (modules / entry.name).symlink_to(entry)
    (modules / "@pulumi").mkdir()
    (modules / "@pulumi" / "gcp").symlink_to(node_modules() / "@pulumi" / "gcp")
    sdk = modules / "@pulumi" / "pulumi"
    sdk.mkdir()
    for entry in (node_modules() / "@pulumi" / "pulumi").iterdir():
        if entry.name != "package.json":
            (sdk / entry.name).symlink_to(entry)
    manifest = json.loads((node_modules() / "@pulumi" / "pulumi" / "package.json").read_text())
    (sdk / "package.json").write_text(json.dumps({**manifest, "engines": {"node": ">=99"}}))
    root = node_project(tmp_path, 'new gcp.pubsub.Topic("orders", { name: "orders" });\n', modules=modules)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert one_line_error(root) == (
        f"pubsubguard check: {root / 'Pulumi.yaml'}: @pulumi/pulumi {manifest['version']} in {root / 'node_modules'} needs "
        f"Node.js >=99 (its package.json engines.node), but `node --version` is {node}: install a newer Node.js")


def test_a_program_that_throws_is_reported_at_its_typescript_line(tmp_path):
    root = node_project(tmp_path, """
        new gcp.pubsub.Topic("orders", { name: "orders" });
        const settings: { retries?: number } = JSON.parse("{}");
        if (settings.retries === undefined) {
            throw new Error("retries is not set");
        }
        """)
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2
    line = line_of(root, "throw new Error")
    assert done.stderr.strip().splitlines()[-1] == (
        f"pubsubguard check: the program failed: index.ts:{line}: Error: retries is not set")


def timed_check(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = pubsubguard(root, "check", "-s", "dev", *args)
    return done, time.monotonic() - started


def test_a_missing_config_value_is_one_line_in_the_time_a_throw_takes(tmp_path):
    """Issue 64: the SDK reports an error with `util.inspect(err, {colors: true})`, and Node.js 20.20's
    colorizer never ends on a stack frame whose `node_modules` segment has no separator after the package
    (nodejs/node#64011): the SDK's own frames, as its source maps name them (`node_modules/@pulumi/config.ts`).
    Under the memory limit that was a std::bad_alloc after 15-20 s, never the program's error."""
    thrower = node_project(tmp_path, 'throw new Error("retries is not set");\n', name="thrower")
    root = node_project(tmp_path, """
        const config = new pulumi.Config();
        new gcp.pubsub.Topic("orders", { name: config.require("ordersTopicName") });
        """)
    thrown, throw_s = timed_check(thrower)
    assert thrown.returncode == 2, thrown.stderr
    done, elapsed = timed_check(root)
    assert done.returncode == 2, done.stderr
    line = line_of(root, "config.require")
    [error] = done.stderr.strip().splitlines()
    assert error == ("pubsubguard check: the program failed: "
                     f"index.ts:{line}: Error: Missing required configuration variable 'team-ts:ordersTopicName'")
    assert "bad_alloc" not in done.stdout
    assert elapsed < 2 * throw_s + 5, (elapsed, throw_s)


def test_an_error_inside_an_apply_is_reported_at_its_line(tmp_path):
    """The same loop from an error thrown inside `apply` (the SDK's output.ts in its stack)."""
    root = node_project(tmp_path, """
        const topic = new gcp.pubsub.Topic("orders", { name: "orders" });
        export const tail = topic.name.apply((name) => {
            if (name === "orders") {
                throw new Error(`no tail for ${name}`);
            }
            return name;
        });
        """)
    done, _ = timed_check(root, "--memory-limit", "1024")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"pubsubguard check: the program failed: index.ts:{line_of(root, 'throw new Error')}: Error: no tail for orders")


def test_a_program_that_runs_out_of_memory_is_named_as_one(tmp_path):
    root = node_project(tmp_path, """
        const kept: number[][] = [];
        for (;;) {
            kept.push(new Array(1 << 20).fill(kept.length + 0.5));
        }
        """)
    done, _ = timed_check(root, "--memory-limit", "1024")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(
        "(its memory is limited to 1024 MiB; --memory-limit MIB raises it)"), done.stderr


def test_a_type_error_is_reported_as_typescript_reports_it(tmp_path):
    root = node_project(tmp_path, 'const n: number = "x";\nnew gcp.pubsub.Topic("orders", { name: "orders" });\n')
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2
    assert "the program failed: index.ts(3,7): error TS2322" in done.stderr.strip().splitlines()[-1]
