// Written here: exactly-once on a push subscription whose endpoint comes through an apply chain to a Cloud Run URL.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

import { renderWorker } from "./worker";

const config = new pulumi.Config();
const region = config.require("region");
const exactlyOnce = config.getBoolean("exactlyOnce") ?? false;

const worker = renderWorker(region, config.require("workerImage"));

const jobs = new gcp.pubsub.Topic("render-jobs", { name: "render-jobs" });

// Rendering is expensive: a job must not run twice.
const jobsPush = new gcp.pubsub.Subscription("render-jobs-push", {
    name: "render-jobs-push",
    topic: jobs.id,
    ackDeadlineSeconds: 600,
    enableExactlyOnceDelivery: exactlyOnce,
    expirationPolicy: { ttl: "" },
    retryPolicy: { minimumBackoff: "30s", maximumBackoff: "600s" },
    pushConfig: {
        pushEndpoint: worker.jobsUrl,
        oidcToken: { serviceAccountEmail: worker.invoker.email },
    },
});

export const jobsTopic = jobs.name;
export const subscription = jobsPush.name;
