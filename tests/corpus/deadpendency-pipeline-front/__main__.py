"""deadpendency/deadpendency terraform/app/pipeline, in Python: prod-a/main.tf calling modules/main.tf, with the
modules failure, front-door, check-run-creator and (in part) error-processor. See expected.yaml for what is left out."""
import pulumi
import pulumi_gcp as gcp

from check_run_creator import check_run_creator_module
from common import action_project
from error_processor import error_processor_module
from failure import failure_module
from front_door import front_door_module

# prod-a/main.tf: variables APP_VERSION / APP_VERSION_SHA (TF_VAR_ environment variables in CI) are stack config
config = pulumi.Config()
APP_VERSION = config.require("app_version")
APP_VERSION_SHA = config.require("app_version_sha")

project = action_project()
minor_notification_channel = gcp.monitoring.get_notification_channel(
    project=project.project_id, display_name="Minor DA Alert")
critical_notification_channel = gcp.monitoring.get_notification_channel(
    project=project.project_id, display_name="Critical DA Alert")

# module "modules" (../modules/main.tf)
app_version = APP_VERSION
app_version_sha = APP_VERSION_SHA
app_env = "prod"
app_live = "a"
app_id = "51614"

failure_modules = failure_module(app_version=app_version, app_env=app_env, app_live=app_live)

front_door_modules = front_door_module(app_version=app_version, app_version_sha=app_version_sha,
                                       app_env=app_env, app_live=app_live)

check_run_creator_modules = check_run_creator_module(
    app_version=app_version,
    app_version_sha=app_version_sha,
    app_env=app_env,
    app_live=app_live,
    app_id=app_id,
    minor_notification_channel=minor_notification_channel.name,
    init_queue_topic_id=front_door_modules["init_queue_topic_id"],
    init_queue_topic_dlq_id=front_door_modules["init_queue_topic_dlq_id"],
    processing_failure_queue_topic_id=failure_modules["processing_failure_queue_topic_id"])

error_processor_module(
    app_version=app_version,
    app_version_sha=app_version_sha,
    app_env=app_env,
    app_live=app_live,
    app_id=app_id,
    processing_failure_queue_topic_id=failure_modules["processing_failure_queue_topic_id"],
    check_run_created_queue_topic_dlq_id=check_run_creator_modules["check_run_created_queue_topic_dlq_id"])
