# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/services/__init__.py
import pulumi_gcp as gcp

from .deal_sync import *  # noqa: F401,F403
from .synapse import synapse

__all__ = ["synapse"]

# anyone may invoke the service (Cloud Run IAM, not Pub/Sub IAM)
gcp.cloudrun.IamMember("public-invoker", service=synapse.name, location=synapse.location,
                       role="roles/run.invoker", member="allUsers")
