"""terraform/app/pipeline/modules/error-processor: subscriptions.tf section "check run created dlq",
cloud-run-service.tf and the service account of cloud-run-user.tf (the sections for the run-prepared and
dependencies-determined dead-letter topics, whose modules are not in this slice, are left out)."""
import pulumi_gcp as gcp

from common import action_project, cloud_run_url


def error_processor_module(app_version, app_version_sha, app_env, app_live, app_id,
                           processing_failure_queue_topic_id, check_run_created_queue_topic_dlq_id):
    project = action_project()

    # cloud-run-user.tf (service account only)
    run_account = gcp.serviceaccount.Account("error_processor_cloud_run_account",
        account_id=f"{app_env}-{app_live}-ep-run-account",
        display_name=f"Message Replayer Cloud Run Account {app_env}",
        project=project.project_id)

    # subscriptions.tf: invoker account
    invoker_account = gcp.serviceaccount.Account("error_processor_invoker_account",
        account_id=f"{app_env}-{app_live}-ep-invoker-account",
        display_name=f"Dependency Determiner Invoker Cloud Run Account {app_env}",
        project=project.project_id)
    invoker_member = invoker_account.email.apply(lambda email: f"serviceAccount:{email}")

    # cloud-run-service.tf
    error_processor = gcp.cloudrun.Service("deadpendency_action_error_processor",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-error-processor",
        location="us-central1",
        template={
            "spec": {
                "containers": [{
                    "image": f"gcr.io/dgtw-deadpendency-action-2/deadpendency-action-error-processor:{app_version_sha}",
                    "envs": [
                        {"name": "FAILURE_QUEUE", "value": processing_failure_queue_topic_id},
                        {"name": "APP_ID", "value": app_id},
                        {"name": "APP_ENV", "value": app_env},
                        {"name": "APP_VERSION", "value": app_version},
                        {"name": "APP_LIVE", "value": app_live},
                    ],
                }],
                "service_account_name": run_account.email,
                "timeout_seconds": 60,
            },
            "metadata": {"labels": {"app_env": app_env}},
        },
        traffics=[{"percent": 100, "latest_revision": True}])

    invoker_policy = gcp.organizations.get_iam_policy_output(bindings=[{
        "role": "roles/run.invoker",
        "members": [invoker_member],
    }])
    gcp.cloudrun.IamPolicy("deadpendency_action_error_processor_pubsub_invoker",
        location=error_processor.location,
        project=project.project_id,
        service=error_processor.name,
        policy_data=invoker_policy.policy_data)

    # subscriptions.tf: check run created dlq
    dlq_subscription = gcp.pubsub.Subscription("check_run_created_dlq_error_processor_subscription",
        name=f"{app_env}-{app_live}-check-run-created-dlq-error-processor-subscription",
        project=project.project_id,
        topic=check_run_created_queue_topic_dlq_id,
        ack_deadline_seconds=60,
        push_config={
            "push_endpoint": cloud_run_url(error_processor),
            "oidc_token": {"service_account_email": invoker_account.email},
            "attributes": {"x-goog-version": "v1"},
        },
        retry_policy={"minimum_backoff": "1s", "maximum_backoff": "5s"})

    gcp.pubsub.SubscriptionIAMMember("check_run_created_dlq_error_processor_subscription_member_account",
        subscription=dlq_subscription.name,
        role="roles/editor",
        member=invoker_member,
        project=project.project_id)
    gcp.pubsub.TopicIAMMember("error_processor_cloud_run_account_check_run_created_dlq_pubsub_subscriber",
        project=project.project_id,
        topic=check_run_created_queue_topic_dlq_id,
        role="roles/pubsub.subscriber",
        member=invoker_member)
    gcp.pubsub.TopicIAMMember("error_processor_cloud_run_account_check_run_created_dlq_pubsub_publisher",
        project=project.project_id,
        topic=check_run_created_queue_topic_dlq_id,
        role="roles/pubsub.publisher",
        member=invoker_member)
    gcp.pubsub.SubscriptionIAMMember("check_run_created_dlq_pubsub_sa_subscription_member_account",
        subscription=dlq_subscription.name,
        role="roles/pubsub.subscriber",
        member=f"serviceAccount:service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com",
        project=project.project_id)
