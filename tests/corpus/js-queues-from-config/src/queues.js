"use strict";
const gcp = require("@pulumi/gcp");

const labels = { team: "notifications", managed_by: "pulumi" };

/** A topic and its pull subscription for one queue of the `queues` config map. */
function queue(name, settings) {
    const topic = new gcp.pubsub.Topic(`${name}-requests`, {
        name: `${name}-requests`,
        labels,
    });
    const subscription = new gcp.pubsub.Subscription(`${name}-sender`, {
        name: `${name}-sender`,
        topic: topic.name,
        labels,
        ackDeadlineSeconds: settings.ackDeadlineSeconds,
        messageRetentionDuration: settings.retention,
        filter: settings.filter,
        expirationPolicy: { ttl: "" },
    });
    return { topic, subscription };
}

module.exports = { queue };
