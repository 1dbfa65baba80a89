import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";

export interface Worker {
    service: gcp.cloudrun.Service;
    invoker: gcp.serviceaccount.Account;
    /** The URL jobs are posted to: the service's URL plus the jobs path. */
    jobsUrl: pulumi.Output<string>;
}

export function renderWorker(region: string, image: string): Worker {
    const invoker = new gcp.serviceaccount.Account("render-invoker", {
        accountId: "render-invoker",
        displayName: "Pub/Sub push to render-worker",
    });
    const service = new gcp.cloudrun.Service("render-worker", {
        name: "render-worker",
        location: region,
        template: {
            spec: {
                containers: [{ image, resources: { limits: { cpu: "2", memory: "4Gi" } } }],
                containerConcurrency: 1,
                timeoutSeconds: 900,
            },
        },
        traffics: [{ percent: 100, latestRevision: true }],
    });
    new gcp.cloudrun.IamMember("render-worker-invoker", {
        location: service.location,
        service: service.name,
        role: "roles/run.invoker",
        member: pulumi.interpolate`serviceAccount:${invoker.email}`,
    });
    const jobsUrl = service.statuses.apply((statuses) => `${statuses[0].url}/jobs`);
    return { service, invoker, jobsUrl };
}
