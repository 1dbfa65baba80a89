import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";

// ## gcp.pubsub.SubscriptionIAMPolicy
const admin = gcp.organizations.getIAMPolicy({
    bindings: [{
        role: "roles/editor",
        members: ["user:jane@example.com"],
    }],
});
const editor = new gcp.pubsub.SubscriptionIAMPolicy("editor", {
    subscription: "your-subscription-name",
    policyData: admin.then(admin => admin.policyData),
});

// ## gcp.pubsub.SubscriptionIAMBinding
// (each section of the page names its resource "editor"; Pulumi needs unique names in one program,
// so the second and third get a suffix)
const editorBinding = new gcp.pubsub.SubscriptionIAMBinding("editor-binding", {
    subscription: "your-subscription-name",
    role: "roles/editor",
    members: ["user:jane@example.com"],
});

// ## gcp.pubsub.SubscriptionIAMMember
const editorMember = new gcp.pubsub.SubscriptionIAMMember("editor-member", {
    subscription: "your-subscription-name",
    role: "roles/editor",
    member: "user:jane@example.com",
});
