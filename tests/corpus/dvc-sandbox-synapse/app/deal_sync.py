# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/services/sync_deal_subscription.py
import pulumi_gcp as gcp

from bus import COMMON, PROJECT, RESULTS, debug_reader

from .identity import runner
from .synapse import synapse

ROUTE = "v1/integrations/sync/deal"

# failed pushes land here; a debug reader lets someone look at them
failed_name = f"{RESULTS}-dlq-sync-deal"
failed_topic = gcp.pubsub.Topic(failed_name, name=failed_name, project=PROJECT)
failed_debug = debug_reader(failed_name)

deal_push = gcp.pubsub.Subscription(
    f"{RESULTS}-subscription-sync-deal",
    name=f"{RESULTS}-subscription-sync-deal",
    topic=RESULTS,
    push_config={
        "push_endpoint": synapse.uri.apply(lambda base: "/".join([base, ROUTE])),
        "oidc_token": {"service_account_email": runner.email},
        "no_wrapper": {"write_metadata": True},
    },
    retry_policy={"minimum_backoff": "10s", "maximum_backoff": "600s"},
    dead_letter_policy={"dead_letter_topic": failed_topic.name, "max_delivery_attempts": 3},
    **COMMON,
)

__all__ = ["deal_push"]
