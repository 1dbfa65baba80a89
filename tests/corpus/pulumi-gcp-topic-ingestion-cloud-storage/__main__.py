import pulumi
import pulumi_gcp as gcp

example = gcp.pubsub.Topic("example",
    name="example-topic",
    ingestion_data_source_settings={
        "cloud_storage": {
            "bucket": "test-bucket",
            "text_format": {
                "delimiter": " ",
            },
            "minimum_object_create_time": "2024-01-01T00:00:00Z",
            "match_glob": "foo/**",
        },
        "platform_logs_settings": {
            "severity": "WARNING",
        },
    })
