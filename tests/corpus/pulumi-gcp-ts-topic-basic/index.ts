// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/topic.ts (the Pubsub Topic Basic docstring example)
import * as gcp from "@pulumi/gcp";

// A topic that keeps published messages a little over a day; no subscription reads it.
new gcp.pubsub.Topic("audit-log", {
    name: "audit-log-events",
    messageRetentionDuration: "86600s",
    labels: { owner: "platform" },
});
