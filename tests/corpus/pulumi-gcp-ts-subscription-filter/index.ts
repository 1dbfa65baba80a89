// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/subscription.ts (the Pubsub Subscription Pull Filter docstring example)
import * as gcp from "@pulumi/gcp";

const shipments = new gcp.pubsub.Topic("shipments", { name: "shipments" });

// The filter spans lines and keeps its indentation: its size in bytes is what the API limits.
const euParcels = `
    attributes.region = "eu"
    AND attributes.kind = "parcel"
`;

new gcp.pubsub.Subscription("eu-parcels", {
    name: "eu-parcels",
    topic: shipments.id,
    filter: euParcels,
    ackDeadlineSeconds: 20,
    labels: { owner: "logistics" },
});
