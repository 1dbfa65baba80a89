// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/subscription.ts (the Pubsub Subscription Dead Letter docstring example)
import * as gcp from "@pulumi/gcp";

const payments = new gcp.pubsub.Topic("payments", { name: "payments" });
const paymentsFailed = new gcp.pubsub.Topic("payments-failed", { name: "payments-failed" });

// After ten failed deliveries a message moves to payments-failed. Nothing subscribes to that topic, and
// the Pub/Sub service agent is granted nothing here.
new gcp.pubsub.Subscription("payments-ledger", {
    name: "payments-ledger",
    topic: payments.id,
    deadLetterPolicy: {
        deadLetterTopic: paymentsFailed.id,
        maxDeliveryAttempts: 10,
    },
});
