import pulumi
import pulumi_gcp as gcp

example = gcp.pubsub.Topic("example",
    name="example-topic",
    ingestion_data_source_settings={
        "aws_kinesis": {
            "stream_arn": "arn:aws:kinesis:us-west-2:111111111111:stream/fake-stream-name",
            "consumer_arn": "arn:aws:kinesis:us-west-2:111111111111:stream/fake-stream-name/consumer/consumer-1:1111111111",
            "aws_role_arn": "arn:aws:iam::111111111111:role/fake-role-name",
            "gcp_service_account": "fake-service-account@fake-gcp-project.iam.gserviceaccount.com",
        },
    })
