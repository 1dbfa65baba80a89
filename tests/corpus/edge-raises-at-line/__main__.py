"""Written here: the program raises on line 9, after declaring one topic."""
import pulumi
import pulumi_gcp as gcp

orders = gcp.pubsub.Topic("orders", name="orders")

settings = {"retention": "600s"}

raise RuntimeError("corpus edge case: the program fails on line 9 of __main__.py")
