"""Programs as teams write them, for `pubsubguard check` and `plan`: a TypeScript project (`runtime: nodejs`)
with the packages `scripts/setup.sh` installed from tests/nodejs's lockfile as its `node_modules`, the Python
twin a TypeScript program is compared with, the command run on them, and what the tests read from its output."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from support.nodejs_projects import node_modules

HEADER = 'import * as pulumi from "@pulumi/pulumi";\nimport * as gcp from "@pulumi/gcp";\n'
TSCONFIG = {"compilerOptions": {"strict": True, "target": "ES2020", "module": "commonjs",
                                "moduleResolution": "node", "esModuleInterop": True}, "files": ["index.ts"]}
DEAD_LETTER = """\
const orders = new gcp.pubsub.Topic("orders", { name: "orders" });
const deadLetter = new gcp.pubsub.Topic("orders-dlq", { name: "orders-dlq" });
new gcp.pubsub.Subscription("orders-dlq-drain", { name: "orders-dlq-drain", topic: deadLetter.name, expirationPolicy: { ttl: "" } });
const worker = new gcp.pubsub.Subscription("orders-worker", {
    name: "orders-worker",
    topic: orders.id,
    expirationPolicy: { ttl: "" },
    deadLetterPolicy: { deadLetterTopic: deadLetter.id, maxDeliveryAttempts: 5 },
});
"""


def node_project(tmp_path: Path, source: str, *, modules: Path | None = None, name: str = "team-ts") -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": name, "runtime": "nodejs"}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    (root / "package.json").write_text(json.dumps({"name": name, "main": "index.ts", "dependencies": {
        "@pulumi/pulumi": "3.248.0", "@pulumi/gcp": "9.37.0"}}))
    (root / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    (root / "index.ts").write_text(HEADER + textwrap.dedent(source))
    if modules is not False:
        (root / "node_modules").symlink_to(modules or node_modules(), target_is_directory=True)
    return root


def pubsubguard(root: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", *args], cwd=root, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def one_line_error(root: Path) -> str:
    """The check's one line on stderr, for a project it cannot run (exit 2)."""
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    return line


def line_of(root: Path, needle: str) -> int:
    return next(n for n, text in enumerate((root / "index.ts").read_text().splitlines(), 1) if needle in text)


def mandatory(document: dict) -> list[str]:
    return sorted(v["policy"] for v in document["violations"] if v["level"] == "mandatory" and not v["suppressed"])


def python_twin(tmp_path: Path, source: str, *, name: str = "team") -> Path:
    """The Python program a TypeScript program is compared with: the same project name and stack config."""
    root = tmp_path / "python"
    root.mkdir()
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": name, "runtime": "python"}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    (root / "__main__.py").write_text(textwrap.dedent(source).lstrip())
    return root


def judged(root: Path) -> tuple:
    """The verdict and the "Not judged" list (rule, resource, the blocking properties and the types of
    where they come from): what must be the same for a TypeScript program and its Python twin."""
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    document = json.loads(done.stdout)
    unjudged = sorted((e["policy"], e["resource_name"], tuple(e["properties"]),
                       tuple(sorted({s["type"] for sources in e["unknown_inputs"].values() for s in sources})))
                      for e in document["unjudged"])
    return done.returncode, mandatory(document), unjudged


def check_json(root: Path, *args: str) -> tuple[int, dict]:
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json", *args)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def python_line(root: Path, needle: str) -> int:
    return next(n for n, text in enumerate((root / "__main__.py").read_text().splitlines(), 1) if needle in text)


def inputs_of(document_root: Path, name: str) -> dict:
    """The recorded inputs of resource `name` (from `pubsubguard plan`)."""
    done = pubsubguard(document_root, "plan", "-s", "dev")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    return next(r for r in plan["resources"] if r["name"] == name)
