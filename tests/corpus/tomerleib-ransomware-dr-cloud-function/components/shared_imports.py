from typing import Optional, List
from pulumi import ComponentResource, ResourceOptions, Output, Resource, Config, Input, export
from pulumi_gcp import (
    cloudfunctionsv2,
    pubsub,
    serviceaccount,
    projects,
    storage,
    cloudscheduler
)
import pulumi
# import pulumi_std as std  (corpus: the pulumi-std provider is dropped, see expected.yaml)
import base64
import os
import zipfile 