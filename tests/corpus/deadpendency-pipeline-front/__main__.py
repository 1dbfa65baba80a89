# Written here after the shape of deadpendency/deadpendency terraform/app/pipeline (prod-a/main.tf, modules/main.tf)
"""The front of the pipeline: a public front door queues runs; a check-run creator takes them by push
and dead-letters into a topic no subscription of this stack reads; an error processor takes the
dead letters of the next stage."""
import pulumi
import pulumi_gcp as gcp

from pipeline import (HOME, Release, account, as_member, only_invoker, project_roles, push_into,
                      queue_pair, secret_reader, topic_grant, worker)

cfg = pulumi.Config()
rel = Release(env="prod", live="a", version=cfg.require("app_version"), sha=cfg.require("app_version_sha"))
APP_ID = "51614"
# the alert channels are looked up (invokes) though no resource of this slice uses them yet
alerts = {level: gcp.monitoring.get_notification_channel(project=HOME.project_id, display_name=f"{level} DA Alert")
          for level in ("Minor", "Critical")}

failed, failed_dead = queue_pair(rel, "processing-failed")

# front door: anyone may call it; it publishes runs
runs, runs_dead = queue_pair(rel, "init-run")
door_sa = account(rel, "fd-cloud-run-account", "Front Door Cloud Run Account")
door_as = as_member(door_sa)
topic_grant("door-publishes-runs", runs.name, "roles/pubsub.publisher", door_as)
project_roles("door", door_as, ["roles/logging.logWriter", "roles/cloudtrace.agent", "roles/monitoring.metricWriter"])
secret_reader("door", f"{rel.env}-github-webhook-key-secret", door_as)
door = worker(rel, "front-door", door_sa, {"GITHUB_WEBHOOK_SECRET_NAME": f"{rel.env}-github-webhook-key-secret",
                                           "DOWNSTREAM_QUEUE": runs.id})
open_to_all = gcp.organizations.get_iam_policy(bindings=[{"role": "roles/run.invoker", "members": ["allUsers"]}])
gcp.cloudrun.IamPolicy("door-is-public", project=HOME.project_id, location=door.location, service=door.name,
                       policy_data=open_to_all.policy_data)

# check-run creator: pushed from the run queue, publishes created check runs and failures
created, created_dead = queue_pair(rel, "check-run-created")
crc_sa = account(rel, "crc-run-account", "Check Run Creator Cloud Run Account")
crc_as = as_member(crc_sa)
topic_grant("crc-publishes-created", created.name, "roles/pubsub.publisher", crc_as)
topic_grant("crc-publishes-failed", failed.id, "roles/pubsub.publisher", crc_as)
project_roles("crc", crc_as, ["roles/logging.logWriter", "roles/cloudtrace.agent"])
secret_reader("crc", f"{rel.env}-github-app-private-key-secret", crc_as)
crc = worker(rel, "check-run-creator", crc_sa, {
    "DOWNSTREAM_QUEUE": created.id, "FAILURE_QUEUE": failed.id,
    "GITHUB_PRIVATE_KEY_SECRET_NAME": f"{rel.env}-github-app-private-key-secret", "APP_ID": APP_ID})
_, _, crc_caller = push_into(rel, "init-queue-check-run-creator", "crc-invoker-account",
                             "Check Run Creator Invoker Cloud Run Account", runs.id, crc, dead_letter_id=runs_dead.id)
topic_grant("crc-caller-reads-runs", runs.id, "roles/pubsub.subscriber", crc_caller)
topic_grant("crc-caller-publishes-runs-dead", runs_dead.id, "roles/pubsub.publisher", crc_caller)
only_invoker("crc-invoked-by-push", crc, crc_caller)

# error processor: pushed from the created-check-run dead letters (no dead letter of its own)
ep_sa = account(rel, "ep-run-account", "Message Replayer Cloud Run Account")
ep = worker(rel, "error-processor", ep_sa, {"FAILURE_QUEUE": failed.id, "APP_ID": APP_ID})
_, _, ep_caller = push_into(rel, "check-run-created-dlq-error-processor", "ep-invoker-account",
                            "Dependency Determiner Invoker Cloud Run Account", created_dead.id, ep)
topic_grant("ep-caller-reads-created-dead", created_dead.id, "roles/pubsub.subscriber", ep_caller)
topic_grant("ep-caller-publishes-created-dead", created_dead.id, "roles/pubsub.publisher", ep_caller)
only_invoker("ep-invoked-by-push", ep, ep_caller)
