// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/topicIAMPolicy.ts (the TopicIAMPolicy docstring example)
import * as gcp from "@pulumi/gcp";

const alerts = new gcp.pubsub.Topic("alerts", { name: "alerts" });

// The topic's whole policy: one viewer, nothing public, and no binding or member beside it.
const viewers = gcp.organizations.getIAMPolicy({
    bindings: [{ role: "roles/viewer", members: ["user:auditor@example.net"] }],
});
new gcp.pubsub.TopicIAMPolicy("alerts-policy", {
    project: alerts.project,
    topic: alerts.name,
    policyData: viewers.then(v => v.policyData),
});
