# Written here after the shape of populationgenomics/cpg-cost-control aggregate/__main__.py
"""A scheduler publishes once a day; every aggregation job named in the stack config gets a push
subscription (or, for type "function", a Pub/Sub-triggered Cloud Function) and an alert to Slack."""
import ast
import base64
import os
import time
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

REGISTRY = "australia-southeast1-docker.pkg.dev/cpg-common/images"


class Settings:
    """The stack's three config namespaces, read once; numbers arrive as strings."""

    def __init__(self):
        opts, cloud = pulumi.Config("opts"), pulumi.Config("gcp")
        self.name = opts.get("name")
        self.kind = opts.get("type")
        self.jobs = ast.literal_eval(opts.get("functions"))  # a YAML list comes back as its JSON text
        self.runner = opts.get("service_account")
        self.image = f"{REGISTRY}/{cloud.get('project')}/{opts.get('imagename')}"
        self.memory_mb, self.timeout_s = int(opts.get("memory")), int(opts.get("timeout"))
        self.cron, self.slack = opts.get("cron"), opts.get("slack_channel")
        self.project, self.region = cloud.get("project"), cloud.get("region")
        self.table = pulumi.Config("bq").get("destination")


def source_archive(folder: Path) -> pulumi.AssetArchive:
    """Python and text files as assets, subfolders (but not caches) as archives."""
    parts = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.name.startswith("__"):
            parts[entry.name] = pulumi.FileArchive(str(entry))
        elif entry.suffix in (".py", ".txt"):
            parts[entry.name] = pulumi.FileAsset(str(entry))
    return pulumi.AssetArchive(parts)


def warn_on(job: str, kind: str, target, log_filter: pulumi.Output, channel) -> gcp.monitoring.AlertPolicy:
    return gcp.monitoring.AlertPolicy(
        f"{job}-alert-{kind}",
        display_name=f"{job} billing job errors",
        combiner="OR",
        notification_channels=[channel],  # the resource itself, not its id
        conditions=[{"display_name": "warning or worse",
                     "condition_matched_log": {"filter": log_filter}}],
        alert_strategy={"notification_rate_limit": {"period": "300s"}},
        opts=pulumi.ResourceOptions(depends_on=[target]),
    )


def run_job(s: Settings, job: str, trigger: gcp.pubsub.Topic, failures: gcp.pubsub.Topic, api, channel):
    service = gcp.cloudrun.Service(
        f"{job}-run",
        location=s.region,
        template={"spec": {"service_account_name": s.runner, "timeout_seconds": s.timeout_s,
                           "containers": [{"image": s.image,
                                           "envs": [{"name": "GCP_AGGREGATE_DEST_TABLE", "value": s.table}]}]}},
        opts=pulumi.ResourceOptions(depends_on=[trigger, api]),
    )
    gcp.cloudrun.IamMember(f"{job}-run-invoker", project=service.project, location=service.location,
                           service=service.name, role="roles/run.invoker", member="serviceAccount:" + s.runner)
    gcp.pubsub.Subscription(
        f"{job}-push",
        topic=trigger.name,
        push_config={
            "push_endpoint": service.statuses[0].url,
            "attributes": {"x-goog-version": "v1", "function": job},  # the job reads its name here
            "oidc_token": {"service_account_email": s.runner},
        },
        dead_letter_policy={"dead_letter_topic": failures, "max_delivery_attempts": 5},  # a Topic object
        opts=pulumi.ResourceOptions(depends_on=[service, trigger]),
    )
    warn_on(job, "run", service,
            service.name.apply(lambda n: f"resource.type='cloud_run_job' AND resource.labels.job_name='{n}' "
                                         "AND severity >= WARNING"), channel)
    pulumi.export(f"{job}_cloudrun_name", service.name)


def function_job(s: Settings, job: str, trigger: gcp.pubsub.Topic, api, bucket, code, channel):
    fn = gcp.cloudfunctions.Function(
        f"{job}-function",
        project=s.project,
        region=s.region,
        entry_point=job,
        runtime="python310",
        event_trigger={"event_type": "google.pubsub.topic.publish", "resource": trigger.name},
        source_archive_bucket=bucket.name,
        source_archive_object=code.name,
        service_account_email=s.runner,
        available_memory_mb=s.memory_mb,
        timeout=s.timeout_s,
        environment_variables={"GCP_AGGREGATE_DEST_TABLE": s.table},
        build_environment_variables={"GCP_AGGREGATE_DEST_TABLE": s.table},
        opts=pulumi.ResourceOptions(depends_on=[trigger, api, bucket, code]),
    )
    warn_on(job, "function", fn,
            fn.name.apply(lambda n: f"resource.type='cloud_function' AND resource.labels.function_name='{n}' "
                                    "AND severity >= WARNING"), channel)
    pulumi.export(f"{job}_function_name", fn.name)


def build():
    s = Settings()
    functions_api, run_api = (gcp.projects.Service(f"{api}-api", service=f"{api}.googleapis.com",
                                                   disable_on_destroy=False)
                              for api in ("cloudfunctions", "run"))

    bucket_name = f"{s.name}-{s.project}"
    code_bucket = gcp.storage.Bucket(bucket_name, name=bucket_name, project=s.project, location=s.region,
                                     uniform_bucket_level_access=True)
    pulumi.export("bucket_name", code_bucket.url)
    code = gcp.storage.BucketObject(bucket_name, bucket=bucket_name, name=f"{s.name}-code-{time.time()}",
                                    source=source_archive(Path(".")))

    # both topics get names made up by Pulumi
    trigger = gcp.pubsub.Topic(f"{s.name}-topic", project=s.project)
    failures = gcp.pubsub.Topic(f"{s.name}-dead-letters", project=s.project)

    daily = gcp.cloudscheduler.Job(
        f"{s.name}-daily",
        project=s.project,
        region=s.region,
        schedule=s.cron,
        time_zone="Australia/Sydney",
        pubsub_target={"topic_name": trigger.id, "data": base64.b64encode(b"start").decode()},
        opts=pulumi.ResourceOptions(depends_on=[trigger]),
    )
    pulumi.export("cron_job", daily.id)

    slack = gcp.monitoring.NotificationChannel(
        f"{s.name}-slack",
        project=s.project,
        type="slack",
        display_name=f"{s.name} to Slack",
        labels={"channel_name": s.slack, "auth_token": os.environ.get("SLACK_AUTH_TOKEN")},
    )

    for job in s.jobs:
        if s.kind == "function":
            function_job(s, job, trigger, functions_api, code_bucket, code, slack)
        else:
            run_job(s, job, trigger, failures, run_api, slack)


if __name__ == "__main__":
    build()
