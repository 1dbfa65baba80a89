"""Stand-ins for the buildflow names the provider modules import (types, strategies, primitives), written for
the corpus: the primitives keep the fields and topic_id the providers read, the rest are placeholders."""
import dataclasses
import enum
from typing import Optional

GCPProjectID = str
GCPRegion = str
GCSBucketName = str
PubSubTopicID = str
PubSubTopicName = str
PubSubSubscriptionName = str
FilePath = str


class GCPCredentials:
    pass


class PulumiProvider:
    pass


class SinkProvider:
    pass


class SourceProvider:
    pass


class GCPPubSubTopicSink:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class GCPPubSubSubscriptionSource(GCPPubSubTopicSink):
    pass


class GCSBucketSink(GCPPubSubTopicSink):
    pass


class GCSFileChangeStreamSource(GCPPubSubTopicSink):
    pass


class FileFormat(enum.Enum):
    PARQUET = 1
    CSV = 2
    JSON = 3


class GCSChangeStreamEventType(enum.Enum):
    OBJECT_FINALIZE = 1
    OBJECT_DELETE = 2
    OBJECT_ARCHIVE = 3
    OBJECT_METADATA_UPDATE = 4


@dataclasses.dataclass
class GCPPubSubTopic:
    project_id: GCPProjectID
    topic_name: PubSubTopicName

    @property
    def topic_id(self) -> PubSubTopicID:
        return f"projects/{self.project_id}/topics/{self.topic_name}"


@dataclasses.dataclass
class GCPPubSubSubscription:
    project_id: GCPProjectID
    subscription_name: PubSubSubscriptionName
    topic: Optional[GCPPubSubTopic] = None


@dataclasses.dataclass
class GCSBucket:
    project_id: GCPProjectID
    bucket_name: GCSBucketName
