// Written here: a secret inside a push endpoint URL.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

const config = new pulumi.Config();
const webhook = config.require("partnerWebhook");
// The partner authenticates us by a token in the query string; it must stay out of the state in clear.
const token = config.requireSecret("partnerToken");

const shipments = new gcp.pubsub.Topic("shipment-events", {
    name: "shipment-events",
    messageRetentionDuration: "604800s",
});

const partnerPush = new gcp.pubsub.Subscription("shipment-events-partner", {
    name: "shipment-events-partner",
    topic: shipments.id,
    ackDeadlineSeconds: 20,
    filter: 'attributes.partner = "acme-freight"',
    expirationPolicy: { ttl: "" },
    retryPolicy: { minimumBackoff: "20s", maximumBackoff: "300s" },
    pushConfig: {
        pushEndpoint: pulumi.interpolate`${webhook}?token=${token}`,
        noWrapper: { writeMetadata: true },
    },
});

export const subscription = partnerPush.name;
