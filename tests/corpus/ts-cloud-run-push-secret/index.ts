// Written here: Cloud Run v2 push whose token comes from config.requireSecret.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

const config = new pulumi.Config();
const gcpConfig = new pulumi.Config("gcp");
const region = gcpConfig.require("region");
const image = config.require("image");
const signingKey = config.requireSecret("signingKey");

const runtimeAccount = new gcp.serviceaccount.Account("order-webhook", {
    accountId: "order-webhook",
    displayName: "order-webhook (Cloud Run runtime)",
});
const pushAccount = new gcp.serviceaccount.Account("order-webhook-push", {
    accountId: "order-webhook-push",
    displayName: "Pub/Sub push to order-webhook",
});

const signingKeySecret = new gcp.secretmanager.Secret("signing-key", {
    secretId: "order-webhook-signing-key",
    replication: { auto: {} },
});
const signingKeyVersion = new gcp.secretmanager.SecretVersion("signing-key", {
    secret: signingKeySecret.id,
    secretData: signingKey,
});
new gcp.secretmanager.SecretIamMember("signing-key-runtime", {
    secretId: signingKeySecret.id,
    role: "roles/secretmanager.secretAccessor",
    member: pulumi.interpolate`serviceAccount:${runtimeAccount.email}`,
});

const service = new gcp.cloudrunv2.Service("order-webhook", {
    name: "order-webhook",
    location: region,
    deletionProtection: false,
    ingress: "INGRESS_TRAFFIC_ALL",
    template: {
        serviceAccount: runtimeAccount.email,
        containers: [{
            image,
            envs: [{
                name: "SIGNING_KEY",
                valueSource: {
                    secretKeyRef: { secret: signingKeySecret.secretId, version: signingKeyVersion.version },
                },
            }],
        }],
    },
});

// Only the push identity may invoke the service.
new gcp.cloudrunv2.ServiceIamMember("order-webhook-invoker", {
    location: service.location,
    name: service.name,
    role: "roles/run.invoker",
    member: pulumi.interpolate`serviceAccount:${pushAccount.email}`,
});

const orders = new gcp.pubsub.Topic("orders", { name: "orders" });

const ordersPush = new gcp.pubsub.Subscription("orders-to-webhook", {
    name: "orders-to-webhook",
    topic: orders.id,
    ackDeadlineSeconds: 30,
    expirationPolicy: { ttl: "" },
    retryPolicy: { minimumBackoff: "10s", maximumBackoff: "600s" },
    pushConfig: {
        pushEndpoint: pulumi.interpolate`${service.uri}/pubsub/orders`,
        oidcToken: {
            serviceAccountEmail: pushAccount.email,
            audience: service.uri,
        },
    },
});

export const endpoint = ordersPush.pushConfig.apply((c) => c?.pushEndpoint);
