"""terraform-google-modules/terraform-google-log-export, examples/pubsub/organization/main.tf, in Python.

The example calls the root module (an organization log sink) and modules/pubsub (its destination) of the same
repository; their resources for these inputs are written out below, each with the module resource it comes from.
random_string.suffix (random provider) is the config value `suffix`.
"""
import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
project_id = config.require("project_id")
parent_resource_id = config.require("parent_resource_id")
suffix = config.require("suffix")  # random_string.suffix.result


# ---- module "destination" (modules/pubsub) ---------------------------------------------------------------------
def pubsub_destination(project_id, topic_name, log_sink_writer_identity, create_subscriber=False,
                       subscriber_id="", subscription_labels=None, topic_labels=None, kms_key_name=None,
                       create_push_subscriber=False, push_endpoint="", push_subscription_expiration_ttl=None):
    subscription_labels = subscription_labels or {}
    topic_labels = topic_labels or {}

    # google_project_service.enable_destination_api
    enable_destination_api = gcp.projects.Service("enable_destination_api",
        project=project_id,
        service="pubsub.googleapis.com",
        disable_on_destroy=False,
        disable_dependent_services=False)

    # google_pubsub_topic.topic
    topic = gcp.pubsub.Topic("topic",
        name=topic_name,
        project=enable_destination_api.project,
        labels=topic_labels,
        kms_key_name=kms_key_name)

    # locals
    local_topic_name = topic.name
    local_subscriber_id = f"{topic_name}-subscriber" if subscriber_id == "" else subscriber_id
    destination_uri = pulumi.Output.concat("pubsub.googleapis.com/projects/", project_id, "/topics/", local_topic_name)

    # google_pubsub_topic_iam_member.pubsub_sink_member
    gcp.pubsub.TopicIAMMember("pubsub_sink_member",
        project=project_id,
        topic=local_topic_name,
        role="roles/pubsub.publisher",
        member=log_sink_writer_identity)

    if create_subscriber:
        # google_service_account.pubsub_subscriber
        pubsub_subscriber = gcp.serviceaccount.Account("pubsub_subscriber",
            account_id=local_subscriber_id,
            display_name=pulumi.Output.concat(local_topic_name, " Topic Subscriber"),
            project=project_id)

        # google_pubsub_subscription.pubsub_subscription
        pubsub_subscription = gcp.pubsub.Subscription("pubsub_subscription",
            name=pulumi.Output.concat(local_topic_name, "-subscription"),
            project=project_id,
            topic=local_topic_name,
            labels=subscription_labels)

        # google_pubsub_subscription_iam_member.pubsub_subscriber_role
        gcp.pubsub.SubscriptionIAMMember("pubsub_subscriber_role",
            role="roles/pubsub.subscriber",
            project=project_id,
            subscription=pubsub_subscription.id,
            member=pulumi.Output.concat("serviceAccount:", pubsub_subscriber.email))

        # google_pubsub_topic_iam_member.pubsub_viewer_role
        gcp.pubsub.TopicIAMMember("pubsub_viewer_role",
            role="roles/pubsub.viewer",
            project=project_id,
            topic=local_topic_name,
            member=pulumi.Output.concat("serviceAccount:", pubsub_subscriber.email))

    if create_push_subscriber:
        push_args = {}
        if push_subscription_expiration_ttl is not None:
            push_args["expiration_policy"] = {"ttl": push_subscription_expiration_ttl}
        gcp.pubsub.Subscription("pubsub_push_subscription",
            name=pulumi.Output.concat(local_topic_name, "-push-subscription"),
            project=project_id,
            topic=local_topic_name,
            labels=subscription_labels,
            push_config={"push_endpoint": push_endpoint},
            **push_args)

    return destination_uri, topic


# ---- module "log_export" (root module, parent_resource_type = "organization") ----------------------------------
def log_export(destination_uri, filter, log_sink_name, parent_resource_id, parent_resource_type,
               unique_writer_identity=False, include_children=False, intercept_children=False,
               description=None, disabled=False):
    assert parent_resource_type == "organization"
    # google_logging_organization_sink.sink
    sink = gcp.logging.OrganizationSink("sink",
        name=log_sink_name,
        description=description,
        org_id=parent_resource_id,
        filter=filter,
        include_children=include_children,
        intercept_children=intercept_children,
        destination=destination_uri,
        disabled=disabled)
    return sink.writer_identity


# The two module calls reference each other (destination_uri <-> writer_identity); Terraform resolves the graph
# per resource. In Pulumi the sink's destination is the topic's URI, known before the sink exists, and the topic's
# IAM member needs the sink's writer identity, so the destination URI is computed first.
topic_name = f"pubsub-org-{suffix}"
destination_uri = pulumi.Output.concat("pubsub.googleapis.com/projects/", project_id, "/topics/", topic_name)
writer_identity = log_export(
    destination_uri=destination_uri,
    filter="resource.type = gce_instance",
    log_sink_name=f"pubsub_org_{suffix}",
    parent_resource_id=parent_resource_id,
    parent_resource_type="organization",
    unique_writer_identity=True)
module_destination_uri, destination_topic = pubsub_destination(
    project_id=project_id,
    topic_name=topic_name,
    log_sink_writer_identity=writer_identity,
    create_subscriber=True)

pulumi.export("destination_uri", module_destination_uri)
