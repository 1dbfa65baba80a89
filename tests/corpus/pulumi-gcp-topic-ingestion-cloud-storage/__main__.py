# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/pubsub/topic.py (the Pubsub Topic Ingestion Cloud Storage docstring example)
import pulumi_gcp as gcp

# Objects dropped into a bucket the stack does not manage become messages, one per "|"-separated record.
gcp.pubsub.Topic(
    "partner-drops",
    name="partner-drops",
    ingestion_data_source_settings={
        "cloud_storage": {
            "bucket": "partner-drop-zone",
            "match_glob": "exports/**",
            "minimum_object_create_time": "2025-03-01T00:00:00Z",
            "text_format": {"delimiter": "|"},
        },
        "platform_logs_settings": {"severity": "WARNING"},
    },
)
