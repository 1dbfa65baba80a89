"""terraform/app/pipeline/modules/check-run-creator (init-queue-subscription.tf, check-run-created-pubsub-queues.tf,
cloud-run-service.tf, cloud-run-user.tf, main.tf)."""
import pulumi_gcp as gcp

from common import action_project, cloud_run_url


def check_run_creator_module(app_version, app_version_sha, app_env, app_live, app_id, minor_notification_channel,
                             init_queue_topic_id, init_queue_topic_dlq_id, processing_failure_queue_topic_id):
    project = action_project()

    # check-run-created-pubsub-queues.tf
    check_run_created = gcp.pubsub.Topic("deadpendency_action_pubsub_check_run_created",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-check-run-created")

    check_run_created_dlq = gcp.pubsub.Topic("deadpendency_action_pubsub_check_run_created_dlq",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-check-run-created-dlq")

    gcp.pubsub.TopicIAMMember("service_account_check_run_created_dlq_queue_pubsub_publisher",
        project=project.project_id,
        topic=check_run_created_dlq.id,
        role="roles/pubsub.publisher",
        member=f"serviceAccount:service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com")

    # cloud-run-user.tf
    run_account = gcp.serviceaccount.Account("check_run_creator_cloud_run_account",
        account_id=f"{app_env}-{app_live}-crc-run-account",
        display_name=f"Check Run Creator Cloud Run Account {app_env}",
        project=project.project_id)
    run_member = run_account.email.apply(lambda email: f"serviceAccount:{email}")

    gcp.pubsub.TopicIAMMember("check_run_creator_cloud_run_account_check_run_created_queue_pubsub_publisher",
        project=project.project_id,
        topic=check_run_created.name,
        role="roles/pubsub.publisher",
        member=run_member)
    gcp.pubsub.TopicIAMMember("check_run_creator_cloud_run_account_processing_failure_queue_pubsub_publisher",
        project=project.project_id,
        topic=processing_failure_queue_topic_id,
        role="roles/pubsub.publisher",
        member=run_member)
    gcp.projects.IAMMember("check_run_creator_cloud_run_account_logging_writer",
        project=project.project_id, role="roles/logging.logWriter", member=run_member)
    gcp.projects.IAMMember("check_run_creator_run_account_trace_writer",
        project=project.project_id, role="roles/cloudtrace.agent", member=run_member)
    gcp.secretmanager.SecretIamMember("check_run_creator_cloud_run_account_github_app_private_key_secret_reader",
        project=project.project_id,
        secret_id=f"{app_env}-github-app-private-key-secret",
        role="roles/secretmanager.secretAccessor",
        member=run_member)

    # cloud-run-service.tf
    check_run_creator = gcp.cloudrun.Service("deadpendency_action_check_run_creator",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-check-run-creator",
        location="us-central1",
        template={
            "spec": {
                "containers": [{
                    "image": f"gcr.io/dgtw-deadpendency-action-2/deadpendency-action-check-run-creator:{app_version_sha}",
                    "envs": [
                        {"name": "DOWNSTREAM_QUEUE", "value": check_run_created.id},
                        {"name": "FAILURE_QUEUE", "value": processing_failure_queue_topic_id},
                        {"name": "GITHUB_PRIVATE_KEY_SECRET_NAME", "value": f"{app_env}-github-app-private-key-secret"},
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

    # init-queue-subscription.tf
    invoker_account = gcp.serviceaccount.Account("init_queue_check_run_creator_invoker_account",
        account_id=f"{app_env}-{app_live}-crc-invoker-account",
        display_name=f"Check Run Creator Invoker Cloud Run Account {app_env}",
        project=project.project_id)
    invoker_member = invoker_account.email.apply(lambda email: f"serviceAccount:{email}")

    init_subscription = gcp.pubsub.Subscription("init_queue_check_run_creator_subscription",
        name=f"{app_env}-{app_live}-init-queue-check-run-creator-subscription",
        project=project.project_id,
        topic=init_queue_topic_id,
        ack_deadline_seconds=60,
        push_config={
            "push_endpoint": cloud_run_url(check_run_creator),
            "oidc_token": {"service_account_email": invoker_account.email},
            "attributes": {"x-goog-version": "v1"},
        },
        retry_policy={"minimum_backoff": "1s", "maximum_backoff": "5s"},
        dead_letter_policy={
            "dead_letter_topic": init_queue_topic_dlq_id,
            "max_delivery_attempts": 5,
        })

    gcp.pubsub.SubscriptionIAMMember("init_queue_check_run_creator_subscription_member_account",
        subscription=init_subscription.name,
        role="roles/editor",
        member=invoker_member,
        project=project.project_id)
    gcp.pubsub.TopicIAMMember("check_run_creator_cloud_run_account_init_queue_pubsub_subscriber",
        project=project.project_id,
        topic=init_queue_topic_id,
        role="roles/pubsub.subscriber",
        member=invoker_member)
    gcp.pubsub.TopicIAMMember("check_run_creator_cloud_run_account_init_dlq_queue_pubsub_publisher",
        project=project.project_id,
        topic=init_queue_topic_dlq_id,
        role="roles/pubsub.publisher",
        member=invoker_member)
    gcp.pubsub.SubscriptionIAMMember("init_queue_pubsub_sa_subscription_member_account",
        subscription=init_subscription.name,
        role="roles/pubsub.subscriber",
        member=f"serviceAccount:service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com",
        project=project.project_id)

    invoker_policy = gcp.organizations.get_iam_policy_output(bindings=[{
        "role": "roles/run.invoker",
        "members": [invoker_account.email.apply(lambda email: f"serviceAccount:{email}")],
    }])
    gcp.cloudrun.IamPolicy("deadpendency_action_check_run_creator_pubsub_invoker",
        location=check_run_creator.location,
        project=project.project_id,
        service=check_run_creator.name,
        policy_data=invoker_policy.policy_data)

    # main.tf outputs
    return {
        "check_run_created_queue_topic_id": check_run_created.id,
        "check_run_created_queue_topic_dlq_id": check_run_created_dlq.id,
    }
