# Written here after the shape of terraform-google-modules/terraform-google-log-export examples/pubsub/organization/main.tf
"""An organisation log sink that exports into a topic, with a pull subscription and a reader account."""
import pulumi
import pulumi_gcp as gcp

cfg = pulumi.Config()
project_id = cfg.require("project_id")
org = cfg.require("parent_resource_id")
tag = cfg.require("suffix")  # stands for a random string drawn once per deployment

topic_name = f"pubsub-org-{tag}"


def topic_uri(name) -> pulumi.Output:
    return pulumi.Output.concat("pubsub.googleapis.com/projects/", project_id, "/topics/", name)


# The sink needs its destination before the topic exists; the name is known, so the address is too.
sink = gcp.logging.OrganizationSink(
    "org-sink",
    name=f"pubsub_org_{tag}",
    org_id=org,
    filter="resource.type = gce_instance",
    destination=topic_uri(topic_name),
    include_children=False,
    intercept_children=False,
    disabled=False,
)

api = gcp.projects.Service("pubsub-api", project=project_id, service="pubsub.googleapis.com",
                           disable_on_destroy=False, disable_dependent_services=False)
logs = gcp.pubsub.Topic("log-topic", project=api.project, name=topic_name, labels={})

# the sink's writer identity is known only once the sink exists
gcp.pubsub.TopicIAMMember("sink-may-publish", project=project_id, topic=logs.name,
                          role="roles/pubsub.publisher", member=sink.writer_identity)

reader = gcp.serviceaccount.Account("log-reader", project=project_id, account_id=f"{topic_name}-subscriber",
                                    display_name=logs.name.apply(lambda n: f"{n} Topic Subscriber"))
reader_member = reader.email.apply("serviceAccount:{}".format)

pull = gcp.pubsub.Subscription("log-pull", project=project_id, topic=logs.name, labels={},
                               name=logs.name.apply(lambda n: n + "-subscription"))

gcp.pubsub.SubscriptionIAMMember("reader-subscribes", project=project_id, subscription=pull.id,
                                 role="roles/pubsub.subscriber", member=reader_member)
gcp.pubsub.TopicIAMMember("reader-views-topic", project=project_id, topic=logs.name,
                          role="roles/pubsub.viewer", member=reader_member)

pulumi.export("destination_uri", topic_uri(logs.name))
