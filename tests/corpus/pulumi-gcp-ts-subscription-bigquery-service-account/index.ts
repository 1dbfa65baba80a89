// Written here after the shape of pulumi/pulumi-gcp sdk/nodejs/pubsub/subscription.ts (the Pubsub Subscription Push Bq Service Account docstring example)
import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";

const clicks = new gcp.pubsub.Topic("clicks", { name: "clicks" });

const writer = new gcp.serviceaccount.Account("clicks-writer", { accountId: "clicks-writer", displayName: "Writes clicks to BigQuery" });
const here = gcp.organizations.getProject({});

// The writer needs to read table metadata and to insert rows.
const grants = ["roles/bigquery.metadataViewer", "roles/bigquery.dataEditor"].map(role =>
    new gcp.projects.IAMMember(`clicks-writer-${role.split(".").pop()}`, {
        project: here.then(p => p.projectId),
        role,
        member: writer.email.apply(email => "serviceAccount:" + email),
    }));

const analytics = new gcp.bigquery.Dataset("analytics", { datasetId: "analytics" });
const rawClicks = new gcp.bigquery.Table("raw-clicks", {
    datasetId: analytics.datasetId,
    tableId: "raw_clicks",
    deletionProtection: false,
    schema: '[{"name": "data", "type": "STRING", "mode": "NULLABLE"}]',
});

// BigQuery wants the table as project.dataset.table, three outputs of the table joined in one apply.
const tablePath = pulumi.all([rawClicks.project, rawClicks.datasetId, rawClicks.tableId]).apply(parts => parts.join("."));

new gcp.pubsub.Subscription("clicks-to-bq", {
    name: "clicks-to-bq",
    topic: clicks.id,
    bigqueryConfig: { table: tablePath, serviceAccountEmail: writer.email },
}, { dependsOn: [writer, ...grants] });
