# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/topic.py (the Pubsub Topic Ingestion Kinesis docstring example)
import pulumi_gcp as gcp

# Placeholder AWS identifiers: only strings, no AWS resource is declared.
AWS_ACCOUNT = "210987654321"
STREAM = f"arn:aws:kinesis:eu-west-1:{AWS_ACCOUNT}:stream/clickstream"

gcp.pubsub.Topic(
    "clickstream-import",
    name="clickstream-import",
    ingestion_data_source_settings={
        "aws_kinesis": {
            "stream_arn": STREAM,
            "consumer_arn": f"{STREAM}/consumer/pubsub-reader:1700000000",
            "aws_role_arn": f"arn:aws:iam::{AWS_ACCOUNT}:role/pubsub-ingest",
            "gcp_service_account": "kinesis-reader@psg-corpus-sandbox.iam.gserviceaccount.com",
        },
    },
)
