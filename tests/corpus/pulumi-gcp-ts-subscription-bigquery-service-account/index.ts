import * as pulumi from "@pulumi/pulumi";
import * as gcp from "@pulumi/gcp";

const example = new gcp.pubsub.Topic("example", {name: "example-topic"});
const bqWriteServiceAccount = new gcp.serviceaccount.Account("bq_write_service_account", {
    accountId: "example-bqw",
    displayName: "BQ Write Service Account",
});
const project = gcp.organizations.getProject({});
const bigqueryMetadataViewer = new gcp.projects.IAMMember("bigquery_metadata_viewer", {
    project: project.then(project => project.projectId),
    role: "roles/bigquery.metadataViewer",
    member: pulumi.interpolate`serviceAccount:${bqWriteServiceAccount.email}`,
});
const bigqueryDataEditor = new gcp.projects.IAMMember("bigquery_data_editor", {
    project: project.then(project => project.projectId),
    role: "roles/bigquery.dataEditor",
    member: pulumi.interpolate`serviceAccount:${bqWriteServiceAccount.email}`,
});
const test = new gcp.bigquery.Dataset("test", {datasetId: "example_dataset"});
const testTable = new gcp.bigquery.Table("test", {
    deletionProtection: false,
    tableId: "example_table",
    datasetId: test.datasetId,
    schema: `[
  {
    \\"name\\": \\"data\\",
    \\"type\\": \\"STRING\\",
    \\"mode\\": \\"NULLABLE\\",
    \\"description\\": \\"The data\\"
  }
]
`,
});
const exampleSubscription = new gcp.pubsub.Subscription("example", {
    name: "example-subscription",
    topic: example.id,
    bigqueryConfig: {
        table: pulumi.interpolate`${testTable.project}.${testTable.datasetId}.${testTable.tableId}`,
        serviceAccountEmail: bqWriteServiceAccount.email,
    },
}, {
    dependsOn: [
        bqWriteServiceAccount,
        bigqueryMetadataViewer,
        bigqueryDataEditor,
    ],
});
