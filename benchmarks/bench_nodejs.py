"""The TypeScript side of `bench_check.py --language nodejs`: the same estate (`bench_check.estate`) as a
TypeScript program a team would write (a loop over `pulumi:estate` config: topics, their three
subscriptions, every tenth one dead-lettering into a topic with its drain and service-agent IAM), run
as `pubsubguard check` runs it (the project's own @pulumi/pulumi cmd/run with ts-node, confined) and,
for the goal of issue 39, under the Node SDK's own unit-test mocks (`pulumi.runtime.setMocks`, preview,
the same ts-node with type checking, in one fresh `node` process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.nodejs_projects import node_modules  # noqa: E402 - the packages setup.sh installed for the tests

PROGRAM = """\
import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";

interface SubscriptionSpec {
    name: string;
    exactly_once?: boolean;
    ordering?: boolean;
    ack_deadline_seconds?: number;
    consumer_region?: string;
    expiration?: string;
    dead_letter?: { max_delivery_attempts: number };
}
interface TopicSpec {
    name: string;
    publisher_region: string;
    persistence_regions: string[];
    subscriptions: SubscriptionSpec[];
}

const config = new pulumi.Config();
const estate = config.requireObject<{ topics: TopicSpec[] }>("estate");
const agent = `serviceAccount:service-${config.require("projectNumber")}@gcp-sa-pubsub.iam.gserviceaccount.com`;

for (const spec of estate.topics) {
    const topic = new gcp.pubsub.Topic(spec.name, {
        name: spec.name,
        labels: { "pubsubguard-publisher-region": spec.publisher_region },
        messageStoragePolicy: { allowedPersistenceRegions: spec.persistence_regions },
    });
    for (const sub of spec.subscriptions) {
        let deadLetterPolicy: gcp.types.input.pubsub.SubscriptionDeadLetterPolicy | undefined;
        if (sub.dead_letter) {
            const deadLetter = new gcp.pubsub.Topic(`${sub.name}-dlq`, { name: `${sub.name}-dlq` });
            new gcp.pubsub.Subscription(`${sub.name}-dlq-drain`, {
                name: `${sub.name}-dlq-drain`, topic: deadLetter.name, expirationPolicy: { ttl: "" },
            });
            new gcp.pubsub.TopicIAMMember(`${sub.name}-dlq-publisher`, {
                topic: deadLetter.name, role: "roles/pubsub.publisher", member: agent,
            });
            deadLetterPolicy = { deadLetterTopic: deadLetter.id, maxDeliveryAttempts: sub.dead_letter.max_delivery_attempts };
        }
        const subscription = new gcp.pubsub.Subscription(sub.name, {
            name: sub.name,
            topic: topic.name,
            enableExactlyOnceDelivery: sub.exactly_once ?? false,
            enableMessageOrdering: sub.ordering ?? false,
            ackDeadlineSeconds: sub.ack_deadline_seconds,
            labels: sub.consumer_region ? { "pubsubguard-consumer-region": sub.consumer_region } : undefined,
            expirationPolicy: { ttl: "" },
            deadLetterPolicy,
        });
        if (sub.dead_letter) {
            new gcp.pubsub.SubscriptionIAMMember(`${sub.name}-dlq-subscriber`, {
                subscription: subscription.name, role: "roles/pubsub.subscriber", member: agent,
            });
        }
    }
}
"""

MOCKS = """\
const started = process.hrtime.bigint();
Object.assign(process.env, JSON.parse(require("fs").readFileSync(process.argv[2], "utf8")));
// As cmd/run: the project's ts-node and typescript, else the SDK's vendored ones (the template installs no
// ts-node), type checked.
const { tsnodeRequire, typescriptRequire } = require("@pulumi/pulumi/tsutils").typeScriptRequireStrings();
require(tsnodeRequire).register({ project: "tsconfig.json", compiler: typescriptRequire });
const pulumi = require("@pulumi/pulumi");
pulumi.runtime.setMocks({
    newResource: (args) => ({ id: "", state: args.inputs }),
    call: () => ({}),
}, "pubsubguard", "bench", true);
require("./index.ts");
pulumi.runtime.waitForRPCs().then(() => {
    console.log(JSON.stringify({ seconds: Number(process.hrtime.bigint() - started) / 1e9 }));
});
"""


def project(directory: Path, estate: dict) -> None:
    (directory / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "pubsubguard", "runtime": "nodejs"}))
    config = {"gcp:project": "bench-project", "pubsubguard:projectNumber": "100000000001", "pubsubguard:estate": estate}
    (directory / "Pulumi.bench.yaml").write_text(yaml.safe_dump({"config": config}))
    (directory / "package.json").write_text(json.dumps({"name": "bench", "main": "index.ts"}))
    (directory / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "strict": True, "target": "ES2020", "module": "commonjs", "moduleResolution": "node"}, "files": ["index.ts"]}))
    (directory / "index.ts").write_text(PROGRAM)
    (directory / "node_modules").symlink_to(node_modules(), target_is_directory=True)


def mocks_seconds(root: Path) -> float:
    """Wall seconds of the same program under the Node SDK's unit-test mocks, in a fresh `node` process."""
    from pubsubguard.core import project as projects

    project_ = projects.read_project(root)
    config = projects.read_stack_config(project_, "bench")
    (root / "config.json").write_text(json.dumps(config.env()))
    (root / "mocks.js").write_text(MOCKS)
    started = time.perf_counter()
    done = subprocess.run(["node", str(root / "mocks.js"), str(root / "config.json")], cwd=root, capture_output=True,
                          text=True, check=False, env={**os.environ, "PULUMI_NODEJS_PROJECT": "pubsubguard",
                                                       "PULUMI_NODEJS_STACK": "bench"})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the mocks run failed: {done.stderr.strip().splitlines()[-3:]}")
    json.loads(done.stdout.strip().splitlines()[-1])
    return wall
