// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/subscription.ts (the Pubsub Subscription Push Cloudstorage Avro docstring example)
import * as gcp from "@pulumi/gcp";

const archive = new gcp.storage.Bucket("telemetry-archive", { name: "telemetry-archive-psg", location: "US", uniformBucketLevelAccess: true });
const telemetry = new gcp.pubsub.Topic("telemetry", { name: "telemetry" });

// Pub/Sub writes the files as its own service agent, named after the project number.
const number = gcp.organizations.getProject({}).then(p => p.number);
const agentOnBucket = new gcp.storage.BucketIAMMember("telemetry-archive-agent", {
    bucket: archive.name,
    role: "roles/storage.admin",
    member: number.then(n => `serviceAccount:service-${n}@gcp-sa-pubsub.iam.gserviceaccount.com`),
});

// Files close at 1000 bytes (the API's smallest maxBytes), 1000 messages or five minutes.
new gcp.pubsub.Subscription("telemetry-to-gcs", {
    name: "telemetry-to-gcs",
    topic: telemetry.id,
    cloudStorageConfig: {
        bucket: archive.name,
        filenamePrefix: "telemetry-",
        filenameSuffix: "-batch.avro",
        filenameDatetimeFormat: "YYYY-MM-DD/hh_mm_ssZ",
        maxBytes: 1000,
        maxMessages: 1000,
        maxDuration: "300s",
        avroConfig: { writeMetadata: true, useTopicSchema: true },
    },
}, { dependsOn: [archive, agentOnBucket] });
