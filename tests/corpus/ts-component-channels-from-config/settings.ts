import * as pulumi from "@pulumi/pulumi";

export interface ChannelSettings {
    name: string;
    ackDeadlineSeconds: number;
    maxDeliveryAttempts: number;
    retention?: string;
}

/** The stack's `channels` list, checked once so that a bad entry fails before any resource is declared. */
export function readChannels(config: pulumi.Config): ChannelSettings[] {
    const channels = config.requireObject<ChannelSettings[]>("channels");
    for (const [i, c] of channels.entries()) {
        if (!c.name || typeof c.ackDeadlineSeconds !== "number" || typeof c.maxDeliveryAttempts !== "number") {
            throw new Error(`channels[${i}]: expected {name, ackDeadlineSeconds, maxDeliveryAttempts}`);
        }
    }
    return channels;
}
