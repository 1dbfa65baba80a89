import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

import { ChannelSettings } from "./settings";

export interface ChannelArgs {
    settings: ChannelSettings;
    /** serviceAccount:service-NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com of the stack's project */
    pubsubAgent: pulumi.Input<string>;
}

/** A topic, its subscription, and a dead-letter topic with a drain, with the grants dead-lettering needs. */
export class Channel extends pulumi.ComponentResource {
    public readonly topic: gcp.pubsub.Topic;
    public readonly subscription: gcp.pubsub.Subscription;
    public readonly deadLetterTopic: gcp.pubsub.Topic;

    constructor(name: string, args: ChannelArgs, opts?: pulumi.ComponentResourceOptions) {
        super("acme:messaging:Channel", name, {}, opts);
        const parent = { parent: this };
        const s = args.settings;

        this.topic = new gcp.pubsub.Topic(name, { name }, parent);
        this.deadLetterTopic = new gcp.pubsub.Topic(`${name}-dlq`, { name: `${name}-dlq` }, parent);

        this.subscription = new gcp.pubsub.Subscription(`${name}-worker`, {
            name: `${name}-worker`,
            topic: this.topic.id,
            ackDeadlineSeconds: s.ackDeadlineSeconds,
            messageRetentionDuration: s.retention,
            expirationPolicy: { ttl: "" },
            deadLetterPolicy: {
                deadLetterTopic: this.deadLetterTopic.id,
                maxDeliveryAttempts: s.maxDeliveryAttempts,
            },
        }, parent);

        // Someone has to read what was dead-lettered, or it is lost.
        new gcp.pubsub.Subscription(`${name}-dlq-drain`, {
            name: `${name}-dlq-drain`,
            topic: this.deadLetterTopic.id,
            expirationPolicy: { ttl: "" },
        }, parent);

        // Pub/Sub forwards dead letters as its service agent.
        new gcp.pubsub.TopicIAMMember(`${name}-dlq-agent-publisher`, {
            topic: this.deadLetterTopic.name,
            role: "roles/pubsub.publisher",
            member: args.pubsubAgent,
        }, parent);
        new gcp.pubsub.SubscriptionIAMMember(`${name}-worker-agent-subscriber`, {
            subscription: this.subscription.name,
            role: "roles/pubsub.subscriber",
            member: args.pubsubAgent,
        }, parent);

        this.registerOutputs({
            topic: this.topic.name,
            subscription: this.subscription.name,
            deadLetterTopic: this.deadLetterTopic.name,
        });
    }
}
