"""Pub/Sub's documented facts: limits, names, formats, roles, type tokens, endpoints. The one source of
these for the project, a leaf package (no imports but the standard library) so that the policy pack in
its own virtualenv, the estate model (`pubsubguard.infra.estate`), the declared model and the verification job read
the same numbers. Each fact names where it comes from (`docs/pubsub-facts.md` and the Google documents
it cites). This tool's own conventions (the probe contract) live in `pubsubguard.core.probe_contract`. Beside
them, `levels`: the policy engine's enforcement levels, which the pack and the check that runs it share.
"""

from __future__ import annotations

import re

# --- Resource type tokens (pulumi-gcp 10.x) ---------------------------------------------------
TOPIC = "gcp:pubsub/topic:Topic"
SUBSCRIPTION = "gcp:pubsub/subscription:Subscription"
TOPIC_IAM_MEMBER = "gcp:pubsub/topicIAMMember:TopicIAMMember"
TOPIC_IAM_BINDING = "gcp:pubsub/topicIAMBinding:TopicIAMBinding"
TOPIC_IAM_POLICY = "gcp:pubsub/topicIAMPolicy:TopicIAMPolicy"
SUBSCRIPTION_IAM_MEMBER = "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember"
SUBSCRIPTION_IAM_BINDING = "gcp:pubsub/subscriptionIAMBinding:SubscriptionIAMBinding"
SUBSCRIPTION_IAM_POLICY = "gcp:pubsub/subscriptionIAMPolicy:SubscriptionIAMPolicy"
TOPIC_IAM_TYPES = (TOPIC_IAM_MEMBER, TOPIC_IAM_BINDING, TOPIC_IAM_POLICY)
SUBSCRIPTION_IAM_TYPES = (SUBSCRIPTION_IAM_MEMBER, SUBSCRIPTION_IAM_BINDING, SUBSCRIPTION_IAM_POLICY)
IAM_TYPES = TOPIC_IAM_TYPES + SUBSCRIPTION_IAM_TYPES

# --- Delivery types (Pub/Sub API: a subscription is pull unless one delivery config is set) --------
# The one set of names of a subscription's delivery type: the estate file's `delivery.type`, the declared
# model's `delivery_type`, the readback's `delivery`, the evidence's run.json. pulumi-gcp's input block that
# makes each (a subscription with none of them is pull), in the order they are looked for.
PULL, PUSH, BIGQUERY, CLOUD_STORAGE = "pull", "push", "bigquery", "cloud_storage"
DELIVERY_TYPES = (PULL, PUSH, BIGQUERY, CLOUD_STORAGE)
DELIVERY_INPUTS = {PUSH: "pushConfig", BIGQUERY: "bigqueryConfig", CLOUD_STORAGE: "cloudStorageConfig"}

# --- Ranges (Pub/Sub API; provider docs) -------------------------------------------------------
ACK_DEADLINE_MIN_S = 10
ACK_DEADLINE_MAX_S = 600
ACK_DEADLINE_DEFAULT_S = 10
EXACTLY_ONCE_DEFAULT_ACK_DEADLINE_S = 60
EXACTLY_ONCE_MIN_RECOMMENDED_ACK_DEADLINE_S = 60
RETENTION_MIN_S = 10 * 60  # subscription message retention: 10 minutes ..
RETENTION_MAX_S = 31 * 24 * 3600  # .. 31 days
TOPIC_RETENTION_MIN_S = 10 * 60
TOPIC_RETENTION_MAX_S = 31 * 24 * 3600
EXPIRATION_MIN_S = 24 * 3600  # expiration_policy.ttl at least 1 day; "" means never
RETRY_BACKOFF_MIN_S = 0
RETRY_BACKOFF_MAX_S = 600
MAX_DELIVERY_ATTEMPTS_MIN = 5
MAX_DELIVERY_ATTEMPTS_MAX = 100
MAX_DELIVERY_ATTEMPTS_DEFAULT = 5
FILTER_MAX_BYTES = 256
ORDERING_KEY_MAX_BYTES = 1024

# --- Names ------------------------------------------------------------------------------------
# Start with a letter; letters, digits and -_.~+%; 3..255 characters; not starting with "goog".
NAME_RULE = "3 to 255 characters: a letter first, then letters, digits or -_.~+%, not starting with 'goog'"
_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}")


def name_problem(name: object) -> str | None:
    """Why `name` is not a valid topic or subscription name, or None when it is."""
    if not isinstance(name, str):
        return f"a name must be a string, got {type(name).__name__}"
    if not _NAME_RE.fullmatch(name):
        return f"{name!r} is not a valid name ({NAME_RULE})"
    if name.lower().startswith("goog"):
        return f"{name!r} must not start with 'goog'"
    return None


# Labels (Resource Manager label rules, which Pub/Sub topics and subscriptions follow): at most 64
# per resource; keys 1..63 characters, a lowercase letter first, then lowercase letters, digits, "_"
# or "-"; values 0..63 characters of the same kinds. (The "goog" prefix is forbidden for resource
# *names*; no documented rule forbids it for label keys, and Google's own services set such labels.)
LABEL_RULE = (
    "keys 1 to 63 characters, a lowercase letter first, then lowercase letters, digits, '_' or '-'; "
    "values at most 63 characters of the same kinds; at most 64 labels"
)
LABELS_MAX = 64
LABEL_MAX_CHARS = 63


def _label_chars_ok(text: str) -> bool:
    return all((c.isalpha() and c == c.lower()) or c.isdigit() or c in "_-" for c in text)


def label_problems(labels: object) -> list[str]:
    """Why a labels mapping breaks GCP's label rules (one sentence each); empty when it does not."""
    if not isinstance(labels, dict):
        return [f"labels must be a mapping of key to value, got {type(labels).__name__}"]
    problems = []
    if len(labels) > LABELS_MAX:
        problems.append(f"{len(labels)} labels, more than {LABELS_MAX}")
    for key, value in labels.items():
        if not isinstance(key, str) or not key or len(key) > LABEL_MAX_CHARS or not _label_chars_ok(key) \
                or not (key[0].isalpha() and key[0] == key[0].lower()):
            problems.append(f"label key {key!r} is not valid ({LABEL_RULE})")
        if not isinstance(value, str):
            problems.append(f"label {key!r} has a {type(value).__name__} value; values are strings")
        elif len(value) > LABEL_MAX_CHARS or not _label_chars_ok(value):
            problems.append(f"label {key!r} has the value {value!r}, which is not valid ({LABEL_RULE})")
    return problems


REGION_RE = re.compile(r"[a-z]+(?:-[a-z]+)+[0-9]+")  # the form of a region's name
# Google Cloud's regions, where Pub/Sub has a locational endpoint REGION-pubsub.googleapis.com
# ("Available regions and zones", https://cloud.google.com/compute/docs/regions-zones, and Pub/Sub's
# locational endpoints, https://cloud.google.com/pubsub/docs/reference/service_apis_overview; as of
# 2026-11). A region launched later is added here (docs/pubsub-facts.md keeps the same list).
REGIONS = frozenset({
    "africa-south1",
    "asia-east1", "asia-east2", "asia-northeast1", "asia-northeast2", "asia-northeast3", "asia-south1",
    "asia-south2", "asia-southeast1", "asia-southeast2",
    "australia-southeast1", "australia-southeast2",
    "europe-central2", "europe-north1", "europe-north2", "europe-southwest1", "europe-west1", "europe-west2",
    "europe-west3", "europe-west4", "europe-west6", "europe-west8", "europe-west9", "europe-west10",
    "europe-west12",
    "me-central1", "me-central2", "me-west1",
    "northamerica-northeast1", "northamerica-northeast2", "northamerica-south1",
    "southamerica-east1", "southamerica-west1",
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2", "us-west3",
    "us-west4",
})


def is_region(value: object) -> bool:
    """A Google Cloud region of the documented list (not merely of a region's form: `us-east99` is not)."""
    return isinstance(value, str) and value in REGIONS


def locational_endpoint(region: str) -> str:
    """The regional (locational) endpoint that pins clients to `region` (seed 002, exactly-once)."""
    return f"{region}-pubsub.googleapis.com:443"


GLOBAL_ENDPOINT = "pubsub.googleapis.com:443"

# --- Durations ("600s" as the API and the provider write them) ---------------------------------
# The API's format for a google.protobuf.Duration in JSON: seconds with up to nine fractional
# digits and an "s" suffix ("600s", "3.5s"); "7d", "10m" or a bare "5" are rejected by the API.
API_DURATION_FORMAT = r"^\d+(\.\d{1,9})?s$"
_DURATION_RE = re.compile(r"(\d+(?:\.\d{1,9})?)s")


def parse_api_duration(value: object) -> float | None:
    """Seconds of an API duration string like "600s" or "3.5s"; None when it is not one."""
    if isinstance(value, str):
        match = _DURATION_RE.fullmatch(value)
        if match:
            return float(match.group(1))
    return None


def api_duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole}s" if whole == seconds else f"{seconds}s"


# --- Service agent (dead-lettering) -------------------------------------------------------------
def pubsub_service_agent(project_number: str) -> str:
    return f"serviceAccount:service-{project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"


SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"  # its email: ACCOUNT_ID@PROJECT.iam.gserviceaccount.com
# --- Values whose form is documented though they are known only after deploy ---------------------
# A new resource's computed outputs are unknown at preview. Some have a form their documentation fixes,
# and a preview answers them with that form and the unknown sentinel where the value is not yet known,
# so that whatever is built from them keeps what is certain (a URL's scheme, a service agent's form):
# - Cloud Run and Cloud Functions URLs are HTTPS: "https://SERVICE-HASH-REGION.a.run.app"
#   (https://cloud.google.com/run/docs/triggering/https-request; pulumi-gcp cloudrunv2.Service `uri`,
#   cloudrun.Service `statuses[].url`, cloudfunctionsv2.Function `url` and `serviceConfig.uri`,
#   cloudfunctions.Function `httpsTriggerUrl` of an HTTP-triggered function);
# - the service identity of pubsub.googleapis.com is the Pub/Sub service agent,
#   service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com (https://cloud.google.com/pubsub/docs/
#   handling-failures#grant_forwarding_permissions; pulumi-gcp projects.ServiceIdentity `email`, `member`).
# Only the part before, between and after "{}" is known: the sentinel stands where "{}" is.
HTTPS_URL = "https://{}"
SERVICE_AGENT_EMAIL = "service-{}@gcp-sa-pubsub.iam.gserviceaccount.com"
DOCUMENTED_FORMS = {
    "gcp:cloudrunv2/service:Service": {("uri",): HTTPS_URL},
    "gcp:cloudrun/service:Service": {("statuses", 0, "url"): HTTPS_URL},
    "gcp:cloudfunctionsv2/function:Function": {("url",): HTTPS_URL, ("serviceConfig", "uri"): HTTPS_URL},
}


def documented_forms(type_: str, inputs: dict) -> dict[tuple, str]:
    """{output path: form} for a new resource of `type_` with these (known) inputs."""
    if type_ == "gcp:cloudfunctions/function:Function" and inputs.get("triggerHttp") is True:
        return {("httpsTriggerUrl",): HTTPS_URL}
    if type_ == "gcp:projects/serviceIdentity:ServiceIdentity" and inputs.get("service") == "pubsub.googleapis.com":
        return {("email",): SERVICE_AGENT_EMAIL, ("member",): "serviceAccount:" + SERVICE_AGENT_EMAIL}
    return dict(DOCUMENTED_FORMS.get(type_, {}))


SERVICE_AGENT_RE = re.compile(r"serviceAccount:service-(\d+)@gcp-sa-pubsub\.iam\.gserviceaccount\.com")
PUBLISHER_ROLE = "roles/pubsub.publisher"
SUBSCRIBER_ROLE = "roles/pubsub.subscriber"
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")

# --- Region-pinning contract between the program and the pack ----------------------------------
# Labels carry the region a topic's publishers and a subscription's consumers connect to, so any
# Pulumi program that adopts them can be judged by the pack (stack outputs are not visible to it).
PUBLISHER_REGION_LABEL = "pubsubguard-publisher-region"
CONSUMER_REGION_LABEL = "pubsubguard-consumer-region"

# --- IAM and defaults the policy pack reads --------------------------------------------------------------
# Retry policy defaults when a bound is not set (Pub/Sub API).
RETRY_MIN_BACKOFF_DEFAULT_S = 10
RETRY_MAX_BACKOFF_DEFAULT_S = 600
# Roles that carry pubsub.topics.publish / pubsub.subscriptions.consume (predefined roles).
PUBLISH_ROLES = (PUBLISHER_ROLE, "roles/pubsub.editor", "roles/pubsub.admin", "roles/editor", "roles/owner")
CONSUME_ROLES = (SUBSCRIBER_ROLE, "roles/pubsub.editor", "roles/pubsub.admin", "roles/editor", "roles/owner")
# Project-level grants cover every topic and subscription of the project.
PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
PROJECT_IAM_TYPES = (PROJECT_IAM_MEMBER, PROJECT_IAM_BINDING)
IAM_POLICY_TYPES = (TOPIC_IAM_POLICY, SUBSCRIPTION_IAM_POLICY)
# Cloud Storage subscriptions (cloud_storage_config): file rotation limits.
CLOUD_STORAGE_MAX_DURATION_MIN_S = 60
CLOUD_STORAGE_MAX_DURATION_MAX_S = 600
CLOUD_STORAGE_MAX_BYTES_MIN = 1000  # 1 KB
CLOUD_STORAGE_MAX_BYTES_MAX = 10 * 1024**3  # 10 GiB
# Export subscriptions write as the Pub/Sub service agent unless they name a service account: grants
# that can give it write access to a BigQuery table or a Cloud Storage bucket.
EXPORT_GRANT_TYPES = (
    "gcp:bigquery/datasetIamMember:DatasetIamMember", "gcp:bigquery/datasetIamBinding:DatasetIamBinding",
    "gcp:bigquery/datasetIamPolicy:DatasetIamPolicy", "gcp:bigquery/iamMember:IamMember",
    "gcp:bigquery/iamBinding:IamBinding", "gcp:bigquery/iamPolicy:IamPolicy",
    "gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:storage/bucketIAMBinding:BucketIAMBinding",
    "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
)
EXPIRATION_DEFAULT_S = 31 * 24 * 3600  # no expiration_policy: expires after 31 days of inactivity
HTTPS_SCHEME = "https://"


def spoken_seconds(seconds: int) -> str:
    """A whole number of seconds as the rules' texts say it: the largest unit that divides it (600 -> "10 minutes",
    86400 -> "1 day", 2678400 -> "31 days", 45 -> "45 seconds")."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"
