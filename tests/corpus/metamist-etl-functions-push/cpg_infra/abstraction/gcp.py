import pulumi
import pulumi_gcp as gcp


def get_member_key(member):
    """Stand-in: the IAM member of a service account ('serviceAccount:<email>')."""
    if isinstance(member, gcp.serviceaccount.Account):
        return pulumi.Output.concat('serviceAccount:', member.email)
    return member
