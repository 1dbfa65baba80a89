# Written here after the shape of pulumi/pulumi-gcp sdk/python/pulumi_gcp/dataflow/job.py (the Streaming Job docstring example)
import pulumi_gcp as gcp

events = gcp.pubsub.Topic("enriched-events", name="enriched-events")

# Two buckets; the job reads JSON files from the first, the second is declared and left unused.
landing, spare = (
    gcp.storage.Bucket(name, name=f"psg-{name}", location="US", force_destroy=True)
    for name in ("landing", "spare")
)

gcp.dataflow.Job(
    "enricher",
    name="enricher",
    template_gcs_path="gs://psg-templates/enricher/template.json",
    temp_gcs_location="gs://psg-templates/tmp",
    enable_streaming_engine=True,
    parameters={
        "inputFilePattern": landing.url.apply(lambda url: f"{url}/*.json"),
        "outputTopic": events.id,
    },
    transform_name_mapping={"parse": "parse_v2", "enrich": "enrich_v2"},
    on_delete="cancel",
)
