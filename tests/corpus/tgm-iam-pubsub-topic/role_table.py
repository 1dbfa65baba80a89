# Written here after the shape of terraform-google-modules/terraform-google-iam modules/helper/main.tf
"""Authoritative IAM as a table: each (topic, role) cell holds the whole member list of that role."""


def cells(topics, members_of_role):
    """{"<topic>--<role>": (topic, role, members)} for every topic and role, members without repeats."""
    table = {}
    for topic in topics:
        for role in members_of_role:
            table[f"{topic}--{role}"] = (topic, role, sorted(set(members_of_role[role]),
                                                             key=members_of_role[role].index))
    return table
