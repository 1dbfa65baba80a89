"""terraform/app/pipeline/modules/front-door (init-pubsub-queues.tf, cloud-run-service.tf, cloud-run-user.tf, main.tf)."""
import pulumi_gcp as gcp

from common import action_project


def front_door_module(app_version, app_version_sha, app_env, app_live):
    project = action_project()

    # init-pubsub-queues.tf
    init_run = gcp.pubsub.Topic("deadpendency_action_pubsub_init_run",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-init-run")

    init_run_dlq = gcp.pubsub.Topic("deadpendency_action_pubsub_init_run_dlq",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-init-run-dlq")

    gcp.pubsub.TopicIAMMember("service_account_init_dlq_queue_pubsub_publisher",
        project=project.project_id,
        topic=init_run_dlq.id,
        role="roles/pubsub.publisher",
        member=f"serviceAccount:service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com")

    # cloud-run-user.tf
    front_door_account = gcp.serviceaccount.Account("front_door_cloud_run_account",
        account_id=f"{app_env}-{app_live}-fd-cloud-run-account",
        display_name=f"Front Door Cloud Run Account {app_env}",
        project=project.project_id)
    front_door_member = front_door_account.email.apply(lambda email: f"serviceAccount:{email}")

    gcp.pubsub.TopicIAMMember("front_door_cloud_run_account_init_queue_pubsub_publisher",
        project=project.project_id,
        topic=init_run.name,
        role="roles/pubsub.publisher",
        member=front_door_member)
    gcp.projects.IAMMember("front_door_cloud_run_account_logging_writer",
        project=project.project_id, role="roles/logging.logWriter", member=front_door_member)
    gcp.projects.IAMMember("front_door_cloud_run_account_trace_writer",
        project=project.project_id, role="roles/cloudtrace.agent", member=front_door_member)
    gcp.projects.IAMMember("front_door_cloud_run_account_metric_writer",
        project=project.project_id, role="roles/monitoring.metricWriter", member=front_door_member)
    gcp.secretmanager.SecretIamMember("front_door_cloud_run_account_github_webhook_secret_reader",
        project=project.project_id,
        secret_id=f"{app_env}-github-webhook-key-secret",
        role="roles/secretmanager.secretAccessor",
        member=front_door_member)

    # cloud-run-service.tf
    front_door = gcp.cloudrun.Service("deadpendency_action_front_door",
        project=project.project_id,
        name=f"{app_env}-{app_live}-deadpendency-action-front-door",
        location="us-central1",
        template={
            "spec": {
                "containers": [{
                    "image": f"gcr.io/dgtw-deadpendency-action-2/deadpendency-action-front-door:{app_version_sha}",
                    "envs": [
                        {"name": "GITHUB_WEBHOOK_SECRET_NAME", "value": f"{app_env}-github-webhook-key-secret"},
                        {"name": "DOWNSTREAM_QUEUE", "value": init_run.id},
                        {"name": "APP_VERSION", "value": app_version},
                        {"name": "APP_ENV", "value": app_env},
                        {"name": "APP_LIVE", "value": app_live},
                    ],
                }],
                "service_account_name": front_door_account.email,
                "timeout_seconds": 60,
            },
            "metadata": {"labels": {"app_env": app_env}},
        },
        traffics=[{"percent": 100, "latest_revision": True}])

    noauth = gcp.organizations.get_iam_policy(bindings=[{
        "role": "roles/run.invoker",
        "members": ["allUsers"],
    }])
    gcp.cloudrun.IamPolicy("deadpendency_action_front_door_noauth",
        location=front_door.location,
        project=project.project_id,
        service=front_door.name,
        policy_data=noauth.policy_data)

    # main.tf outputs
    return {
        "init_queue_topic_id": init_run.id,
        "init_queue_topic_dlq_id": init_run_dlq.id,
    }
