// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/subscription.ts (the Pubsub Subscription Pull docstring example)
import * as gcp from "@pulumi/gcp";

const invoices = new gcp.pubsub.Topic("invoices", { name: "invoices" });

// Pull delivery. The TTL has a fractional second part, which the API's duration format allows.
new gcp.pubsub.Subscription("invoices-audit", {
    name: "invoices-audit",
    topic: invoices.id,
    ackDeadlineSeconds: 20,
    messageRetentionDuration: "1200s",
    retainAckedMessages: true,
    enableMessageOrdering: false,
    expirationPolicy: { ttl: "300000.5s" },
    retryPolicy: { minimumBackoff: "10s" },
    labels: { owner: "billing" },
});
