class CPGInfrastructure:
    """Stand-in: only named in a local variable annotation of metamist_infrastructure.driver."""

    class GroupProvider:
        class Group:
            class GroupMember:
                pass
