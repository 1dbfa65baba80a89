import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";

// The docstring refers to a topic `example` it does not declare (example.project, example.name);
// it is declared here as in the Topic docstring's "Pubsub Topic Basic".
const example = new gcp.pubsub.Topic("example", {name: "example-topic"});

const admin = gcp.organizations.getIAMPolicy({
    bindings: [{
        role: "roles/viewer",
        members: ["user:jane@example.com"],
    }],
});
const policy = new gcp.pubsub.TopicIAMPolicy("policy", {
    project: example.project,
    topic: example.name,
    policyData: admin.then(admin => admin.policyData),
});
