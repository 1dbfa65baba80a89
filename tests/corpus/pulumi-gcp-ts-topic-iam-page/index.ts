import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";

// The docstring refers to a topic `example` it does not declare (example.project, example.name);
// it is declared here as in the Topic docstring's "Pubsub Topic Basic".
const example = new gcp.pubsub.Topic("example", {name: "example-topic"});

// ## gcp.pubsub.TopicIAMPolicy
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

// ## gcp.pubsub.TopicIAMBinding
const binding = new gcp.pubsub.TopicIAMBinding("binding", {
    project: example.project,
    topic: example.name,
    role: "roles/viewer",
    members: ["user:jane@example.com"],
});

// ## gcp.pubsub.TopicIAMMember
const member = new gcp.pubsub.TopicIAMMember("member", {
    project: example.project,
    topic: example.name,
    role: "roles/viewer",
    member: "user:jane@example.com",
});
