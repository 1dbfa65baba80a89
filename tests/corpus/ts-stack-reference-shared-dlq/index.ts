// Written here: a dead-letter topic and push URL read from a StackReference.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

const config = new pulumi.Config();
const platform = new pulumi.StackReference(config.require("platformStack"));

// Owned by the platform stack: one dead-letter topic (with its drain and its publisher grant) for every team.
const sharedDeadLetterTopic = platform.requireOutput("deadLetterTopicId") as pulumi.Output<string>;
const billingUrl = platform.requireOutput("billingServiceUrl") as pulumi.Output<string>;
const pushServiceAccount = platform.requireOutput("pushServiceAccountEmail") as pulumi.Output<string>;

const project = gcp.organizations.getProjectOutput();
const pubsubAgent = project.number.apply(
    (number) => `serviceAccount:service-${number}@gcp-sa-pubsub.iam.gserviceaccount.com`,
);

const invoicesIssued = new gcp.pubsub.Topic("invoices-issued", { name: "invoices-issued" });

const toBilling = new gcp.pubsub.Subscription("invoices-to-billing", {
    name: "invoices-to-billing",
    topic: invoicesIssued.id,
    ackDeadlineSeconds: 60,
    expirationPolicy: { ttl: "" },
    pushConfig: {
        pushEndpoint: billingUrl.apply((url) => `${url.replace(/\/$/, "")}/pubsub/invoices`),
        oidcToken: { serviceAccountEmail: pushServiceAccount },
    },
    deadLetterPolicy: {
        deadLetterTopic: sharedDeadLetterTopic,
        maxDeliveryAttempts: 20,
    },
});

new gcp.pubsub.SubscriptionIAMMember("invoices-to-billing-agent", {
    subscription: toBilling.name,
    role: "roles/pubsub.subscriber",
    member: pubsubAgent,
});

export const subscription = toBilling.id;
