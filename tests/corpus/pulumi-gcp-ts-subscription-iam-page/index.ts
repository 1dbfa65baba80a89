// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/subscriptionIAMPolicy.ts (the SubscriptionIAMPolicy, SubscriptionIAMBinding and SubscriptionIAMMember docstring examples, in one program)
import * as gcp from "@pulumi/gcp";

// A subscription made elsewhere, named here by its literal name.
const subscription = "refunds-worker";
const role = "roles/editor";
const operator = "user:ops-oncall@example.net";

// The whole policy of the subscription, from the policy-data invoke ...
const wholePolicy = gcp.organizations.getIAMPolicy({ bindings: [{ role, members: [operator] }] });
new gcp.pubsub.SubscriptionIAMPolicy("refunds-policy", { subscription, policyData: wholePolicy.then(p => p.policyData) });

// ... and, on the same subscription and role, a binding and a member as well.
new gcp.pubsub.SubscriptionIAMBinding("refunds-binding", { subscription, role, members: [operator] });
new gcp.pubsub.SubscriptionIAMMember("refunds-member", { subscription, role, member: operator });
