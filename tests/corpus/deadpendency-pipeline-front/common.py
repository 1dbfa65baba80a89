"""Shared by the modules: data "google_project" "deadpendency_action_project" (each module declares the same one)."""
import pulumi_gcp as gcp


def action_project():
    return gcp.organizations.get_project(project_id="dgtw-deadpendency-action-2")


def cloud_run_url(service):
    # google_cloud_run_service.X.status[0].url
    return service.statuses.apply(lambda statuses: statuses[0].url)
