# Written here after the shape of tomerleib/ransomeware-dr pulumi-cloud-function/__main__.py
"""Every night a scheduler publishes to a topic, and the message starts a Cloud Function (2nd gen)."""
import os

import pulumi

from blocks.code import CodeBucket, TopicFunction
from blocks.identity import Runner
from blocks.messaging import Channel, Timer
from blocks.settings import flat, section

region = flat("gcp", "region")["region"]
# the deploying shell may name the project; otherwise the stack does
project = os.environ.get("GOOGLE_PROJECT") or pulumi.Config("gcp").require("project")

sa = section("serviceaccount", "name", "description", "roles", "display_name")
ps = section("pubsub", "name", "message_retention_duration")
sched = section("cloud-scheduler", "name", "description", "schedule", "time_zone", "message_body")
store = section("storage", "name", "location")
fn = section("function", "name", "location", "description", "build_config_runtime", "build_config_entry_point",
             "timeout_seconds")

runner = Runner(sa["name"], project, sa["roles"], display_name=sa["display_name"], description=sa["description"])
channel = Channel(ps["name"], retention=ps["message_retention_duration"])
Timer(sched["name"], channel.path(project), sched["schedule"], sched["time_zone"], sched["message_body"],
      description=sched["description"])
code = CodeBucket(store["name"], "handler", store["location"])
job = TopicFunction(fn["name"], fn["location"], code, fn["build_config_runtime"], fn["build_config_entry_point"],
                    runner.account.email, channel.path(project), fn["timeout_seconds"],
                    description=fn["description"])

pulumi.export("sa_name", sa["name"])
pulumi.export("sa_email", runner.account.email)
pulumi.export("pubsub_topic_name", channel.topic.name)
pulumi.export("function_name", job.function.name)
