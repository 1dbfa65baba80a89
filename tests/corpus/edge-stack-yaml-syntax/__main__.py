"""Written here: a valid program whose stack file Pulumi.dev.yaml is not valid YAML (an unclosed flow mapping)."""
import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
gcp.pubsub.Topic("orders", name="orders", labels=config.get_object("labels"))
