# Written here after the shape of tomerleib/ransomeware-dr pulumi-cloud-function/components/pubsub.py and scheduler.py
import base64

import pulumi
import pulumi_gcp as gcp

_NO_OPTS = pulumi.ResourceOptions()  # one shared default instance, made when the module loads


class Channel(pulumi.ComponentResource):
    def __init__(self, name: str, retention=None, opts=None):
        super().__init__("dr:resource:Channel", name, {}, opts)
        self.topic = gcp.pubsub.Topic(name, name=name, message_retention_duration=retention,
                                      opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"name": self.topic.name, "id": self.topic.id})

    def path(self, project: str) -> pulumi.Output:
        return pulumi.Output.all(project, self.topic.name).apply(lambda pn: "projects/{}/topics/{}".format(*pn))


class Timer(pulumi.ComponentResource):
    """A Cloud Scheduler job publishing a fixed body to a topic."""

    def __init__(self, name: str, topic_path, schedule: str, time_zone: str, body: str, description=None,
                 region=None, opts: pulumi.ResourceOptions = _NO_OPTS):
        super().__init__("dr:resource:Timer", name, {}, opts)
        self.job = gcp.cloudscheduler.Job(
            f"{name}-job", name=name, description=description, schedule=schedule, time_zone=time_zone,
            region=region,
            pubsub_target={"topic_name": topic_path, "data": base64.b64encode(body.encode()).decode()},
            opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"id": self.job.id, "state": self.job.state})
