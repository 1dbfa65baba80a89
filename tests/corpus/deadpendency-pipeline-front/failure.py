"""terraform/app/pipeline/modules/failure (failure-pubsub-queues.tf, main.tf)."""
import pulumi_gcp as gcp

from common import action_project


def failure_module(app_version, app_env, app_live):
    project = action_project()

    processing_failure = gcp.pubsub.Topic("deadpendency_action_pubsub_processing_failure",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-processing-failed")

    processing_failure_dlq = gcp.pubsub.Topic("deadpendency_action_pubsub_processing_failure_dlq",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-processing-failed-dlq")

    gcp.pubsub.TopicIAMMember("service_account_processing_failure_dlq_queue_pubsub_publisher",
        project=project.project_id,
        topic=processing_failure_dlq.id,
        role="roles/pubsub.publisher",
        member=f"serviceAccount:service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com")

    return {
        "processing_failure_queue_topic_id": processing_failure.id,
        "processing_failure_queue_topic_dlq_id": processing_failure_dlq.id,
    }
