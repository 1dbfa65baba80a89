# Written here after the shape of populationgenomics/metamist metamist_infrastructure/__main__.py
"""Stands up the ETL plant of a development project from the stack's config."""
import pulumi

from etl_plant import EtlPlant

cfg = pulumi.Config()
project = cfg.get("gcp_project")

settings = {
    "project": project,
    "region": "australia-southeast1",
    "slack_channel": cfg.get("slack_channel"),
    "slack_token_secret_name": cfg.get("slack_token_secret_name"),
    "environment": "DEVELOPMENT",
    "accessors": ["bbv"],
    "by_type": {"bbv/v1": {"parser_name": "bbv/v1", "accessors": ["bbv"],
                           "default_parameters": {"project": "milo-dev", "default_sequencing_type": "genome"}}},
    "private_repo_packages": ["metamist_private"],
}
# where the private Python packages live (an Artifact Registry repository made elsewhere)
registry = {"location": "australia-southeast1", "project": project, "name": cfg.get("etl_private_repo_name")}

if __name__ == "__main__":
    EtlPlant(settings, registry).build()
