// Written here: a ComponentResource per channel read from stack config.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

import { Channel } from "./channel";
import { readChannels } from "./settings";

const config = new pulumi.Config();
const channels = readChannels(config);

const project = gcp.organizations.getProjectOutput();
const pubsubAgent = pulumi.interpolate`serviceAccount:service-${project.number}@gcp-sa-pubsub.iam.gserviceaccount.com`;

const built = channels.map((settings) => new Channel(settings.name, { settings, pubsubAgent }));

export const topics = built.map((c) => c.topic.name);
export const deadLetterTopics = built.map((c) => c.deadLetterTopic.name);
