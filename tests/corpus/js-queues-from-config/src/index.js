// Written here: queues built from config, package.json main, a duration in the wrong format.
"use strict";
const pulumi = require("@pulumi/pulumi");
const { queue } = require("./queues");

const config = new pulumi.Config();
const queues = config.requireObject("queues");

const declared = Object.entries(queues).map(([name, settings]) => queue(name, settings));

exports.topics = declared.map((q) => q.topic.name);
exports.subscriptions = declared.map((q) => q.subscription.name);
