// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/topicIAMPolicy.ts (the TopicIAMPolicy, TopicIAMBinding and TopicIAMMember docstring examples, in one program)
import * as gcp from "@pulumi/gcp";

const alerts = new gcp.pubsub.Topic("alerts", { name: "alerts" });
const reader = "user:auditor@example.net";

// Every grant names the topic by its outputs: the same resource, known through the dependency.
const onAlerts = { project: alerts.project, topic: alerts.name };

const viewers = gcp.organizations.getIAMPolicy({ bindings: [{ role: "roles/viewer", members: [reader] }] });
new gcp.pubsub.TopicIAMPolicy("alerts-policy", { ...onAlerts, policyData: viewers.then(v => v.policyData) });
new gcp.pubsub.TopicIAMBinding("alerts-viewers", { ...onAlerts, role: "roles/viewer", members: [reader] });
new gcp.pubsub.TopicIAMMember("alerts-auditor", { ...onAlerts, role: "roles/viewer", member: reader });
