// Written here: a subscription dead-lettering into its own topic, main: infra/.
"use strict";
const pulumi = require("@pulumi/pulumi");
const gcp = require("@pulumi/gcp");

const config = new pulumi.Config();
const gcpConfig = new pulumi.Config("gcp");

const trigger = new gcp.pubsub.Topic("nightly-export", { name: "nightly-export" });

const exporter = new gcp.pubsub.Subscription("nightly-export-worker", {
    name: "nightly-export-worker",
    topic: trigger.id,
    ackDeadlineSeconds: 600,
    messageRetentionDuration: "86400s",
    // Give up after a few tries instead of retrying forever.
    deadLetterPolicy: {
        deadLetterTopic: trigger.id,
        maxDeliveryAttempts: 5,
    },
});

const job = new gcp.cloudscheduler.Job("nightly-export", {
    name: "nightly-export",
    region: gcpConfig.require("region"),
    schedule: config.require("schedule"),
    timeZone: config.require("timeZone"),
    pubsubTarget: {
        topicName: trigger.id,
        data: Buffer.from(JSON.stringify({ kind: "full" })).toString("base64"),
    },
});

module.exports = { subscription: exporter.name, scheduler: job.id };
