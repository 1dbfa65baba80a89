"""Rejected by `labels-valid`: a label key with capitals, which GCP's label rules forbid."""

import pulumi_gcp as gcp

gcp.pubsub.Topic("orders", name="orders", labels={"CostCentre": "checkout"})
