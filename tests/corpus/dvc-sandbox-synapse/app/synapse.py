# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/services/synapse_service.py
import pulumi
import pulumi_gcp as gcp

from bus import PROJECT, REGION

from .identity import runner

v2 = gcp.cloudrunv2

airtable_key = gcp.secretmanager.Secret("airtable-key", secret_id="AIRTABLE_INGAINER",
                                        replication={"auto": {}})

key_from_secret = v2.ServiceTemplateContainerEnvValueSourceArgs(
    secret_key_ref=v2.ServiceTemplateContainerEnvValueSourceSecretKeyRefArgs(secret=airtable_key.secret_id,
                                                                             version="latest"))
synapse = v2.Service(
    "synapse-service",
    name="synapse",
    location=REGION,
    ingress="INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER",
    template=v2.ServiceTemplateArgs(
        service_account=runner.email,
        containers=[v2.ServiceTemplateContainerArgs(
            image=f"us.gcr.io/{PROJECT}/synapse:latest",
            envs=[v2.ServiceTemplateContainerEnvArgs(name="AIRTABLE_INGAINER", value_source=key_from_secret),
                  v2.ServiceTemplateContainerEnvArgs(name="CLOUD", value="1")],
            resources=v2.ServiceTemplateContainerResourcesArgs(limits={"memory": "1024Mi", "cpu": "1"}),
        )],
    ),
)

pulumi.export("vcmate_synapse_cloud_run_name", synapse.name)
