import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";

const example = new gcp.pubsub.Topic("example", {
    name: "example-topic",
    labels: {
        foo: "bar",
    },
    messageRetentionDuration: "86600s",
});
