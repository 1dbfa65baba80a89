// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/subscription.ts (the Pubsub Subscription Push docstring example)
import * as gcp from "@pulumi/gcp";

const signups = new gcp.pubsub.Topic("signups", { name: "signups" });

// Push to a public https receiver; x-goog-version picks the v1 push payload. No OIDC token.
new gcp.pubsub.Subscription("signups-webhook", {
    name: "signups-webhook",
    topic: signups.id,
    ackDeadlineSeconds: 20,
    pushConfig: {
        pushEndpoint: "https://hooks.example.org/signups",
        attributes: { "x-goog-version": "v1" },
    },
    labels: { owner: "growth" },
});
