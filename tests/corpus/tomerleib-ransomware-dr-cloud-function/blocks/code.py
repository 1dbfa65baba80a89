# Written here after the shape of tomerleib/ransomeware-dr pulumi-cloud-function/components/storage.py and function.py
import zipfile
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

fn2 = gcp.cloudfunctionsv2


def zip_folder(folder: str) -> str:
    """Writes <folder>.zip beside the folder (while the program runs) and returns its path."""
    target = f"{folder}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in sorted(Path(folder).rglob("*")):
            if item.is_file():
                archive.write(item, item.relative_to(folder))
    return target


class CodeBucket(pulumi.ComponentResource):
    def __init__(self, name: str, folder: str, location: str, opts=None):
        super().__init__("dr:parts:storage", name, {}, opts)
        archive = zip_folder(folder)
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = gcp.storage.Bucket(name, location=location, opts=child)  # autonamed
        self.object = gcp.storage.BucketObject(f"{name}-code", bucket=self.bucket.name,
                                               source=pulumi.FileAsset(archive), opts=child)
        self.register_outputs({"bucket": self.bucket.name, "object": self.object.name})


class TopicFunction(pulumi.ComponentResource):
    """A 2nd-gen function started by each message published to a topic (Eventarc makes the subscription)."""

    def __init__(self, name: str, location: str, code: CodeBucket, runtime: str, entry_point: str, runner_email,
                 topic_path, timeout_seconds: int, description=None, opts=None):
        super().__init__("dr:resource:TopicFunction", name, {}, opts)
        self.function = fn2.Function(
            name,
            name=name,
            location=location,
            description=description,
            build_config=fn2.FunctionBuildConfigArgs(
                runtime=runtime,
                entry_point=entry_point,
                environment_variables={"GOOGLE_FUNCTION_SOURCE": "backup-dr.py"},
                source=fn2.FunctionBuildConfigSourceArgs(storage_source=fn2.FunctionBuildConfigSourceStorageSourceArgs(
                    bucket=code.bucket.name, object=code.object.name)),
            ),
            service_config=fn2.FunctionServiceConfigArgs(service_account_email=runner_email,
                                                         timeout_seconds=timeout_seconds),
            event_trigger=fn2.FunctionEventTriggerArgs(event_type="google.cloud.pubsub.topic.v1.messagePublished",
                                                       pubsub_topic=topic_path,
                                                       service_account_email=runner_email),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"name": self.function.name, "id": self.function.id})
