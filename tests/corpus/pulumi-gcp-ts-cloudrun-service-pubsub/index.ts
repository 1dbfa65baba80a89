// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/cloudrun/service.ts (the Cloud Run Service Pubsub docstring example)
import * as gcp from "@pulumi/gcp";

const receiver = new gcp.cloudrun.Service("orders-receiver", {
    name: "orders-receiver",
    location: "us-central1",
    template: { spec: { containers: [{ image: "us-docker.pkg.dev/psg-corpus-sandbox/apps/orders-receiver:1" }] } },
    traffics: [{ percent: 100, latestRevision: true }],
});

const pusher = new gcp.serviceaccount.Account("orders-pusher", { accountId: "orders-pusher", displayName: "Pushes orders" });
const asMember = pusher.email.apply(email => `serviceAccount:${email}`);

new gcp.cloudrun.IamBinding("orders-receiver-invoker", {
    location: receiver.location, service: receiver.name, role: "roles/run.invoker", members: [asMember],
});
// projects.IAMBinding requires `project`. It is left out below, so the program stops there.
new gcp.projects.IAMBinding("orders-pusher-tokens", { role: "roles/iam.serviceAccountTokenCreator", members: [asMember] });

const orders = new gcp.pubsub.Topic("orders", { name: "orders" });
new gcp.pubsub.Subscription("orders-push", {
    name: "orders-push",
    topic: orders.name,
    pushConfig: {
        pushEndpoint: receiver.statuses[0].url,
        oidcToken: { serviceAccountEmail: pusher.email },
        attributes: { "x-goog-version": "v1" },
    },
});
