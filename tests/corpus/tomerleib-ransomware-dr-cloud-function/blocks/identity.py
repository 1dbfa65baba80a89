# Written here after the shape of tomerleib/ransomeware-dr pulumi-cloud-function/components/sa.py
import pulumi
import pulumi_gcp as gcp


class Runner(pulumi.ComponentResource):
    """A service account and its project roles, one IAMMember each."""

    def __init__(self, account_id: str, project: str, roles: list, display_name=None, description=None, opts=None):
        super().__init__("dr:resource:Runner", account_id, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            account_id, account_id=account_id, display_name=display_name or account_id, description=description,
            disabled=False, create_ignore_already_exists=False, opts=child)
        member = self.account.email.apply(lambda email: "serviceAccount:" + email)
        for role in roles or []:
            gcp.projects.IAMMember(f"{account_id}-{role}", project=project, role=role, member=member, opts=child)
        self.register_outputs({"email": self.account.email, "name": self.account.name})
