# Written here after the shape of populationgenomics/metamist metamist_infrastructure/driver.py (its helpers)
"""Helpers shared by the ETL plant and its Slack notices."""
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

HERE = Path(__file__).parent
FUNCTION_RUNTIME = "python311"


def sa_member(account: gcp.serviceaccount.Account) -> pulumi.Output:
    return pulumi.Output.concat("serviceAccount:", account.email)


def pubsub_agent() -> pulumi.Output:
    """The project's Pub/Sub service agent, as an IAM member (the project number is read by an invoke)."""
    number = gcp.organizations.get_project().number
    return pulumi.Output.concat("serviceAccount:service-", number, "@gcp-sa-pubsub.iam.gserviceaccount.com")


def only_role(role: str, member) -> str:
    """An IAM policy document with one binding, made by a plain (not _output) invoke."""
    return gcp.organizations.get_iam_policy(bindings=[{"role": role, "members": [member]}]).policy_data


def code_archive(folder: Path, suffixes=(".py", ".txt", ".json"), replace=None) -> pulumi.AssetArchive:
    """The folder's files with the given suffixes; `replace` overrides entries by name."""
    found = {str(p.relative_to(folder)): pulumi.FileAsset(str(p))
             for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix in suffixes}
    return pulumi.AssetArchive({**found, **(replace or {})})


def gen2_function(name: str, *, project: str, region: str, bucket: gcp.storage.Bucket, folder: Path,
                  entry_point: str, runner: gcp.serviceaccount.Account, env, depends_on, replace=None,
                  suffixes=(".py", ".txt", ".json")) -> gcp.cloudfunctionsv2.Function:
    code = gcp.storage.BucketObject(f"{name}-code", bucket=bucket.name, source=code_archive(folder, suffixes, replace),
                                    opts=pulumi.ResourceOptions(replace_on_changes=["*"]))
    return gcp.cloudfunctionsv2.Function(
        name,
        name=name,
        project=project,
        location=region,
        build_config={
            "runtime": FUNCTION_RUNTIME,
            "entry_point": entry_point,
            "environment_variables": {},
            "docker_repository": f"projects/{project}/locations/australia-southeast1/repositories/gcf-artifacts",
            "source": {"storage_source": {"bucket": bucket.name, "object": code.name}},
        },
        service_config={
            "service_account_email": runner.email,
            "environment_variables": env,
            "timeout_seconds": 540,
            "available_memory": "2Gi",
            "available_cpu": "1",
            "min_instance_count": 0,
            "max_instance_count": 1,  # one at a time
            "ingress_settings": "ALLOW_ALL",
            "all_traffic_on_latest_revision": True,
        },
        opts=pulumi.ResourceOptions(depends_on=depends_on),
    )
