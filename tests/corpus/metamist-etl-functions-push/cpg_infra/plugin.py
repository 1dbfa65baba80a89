class CpgInfrastructurePlugin:
    """Stand-in: a plugin is built with the infrastructure driver and the config."""

    def __init__(self, infrastructure, config):
        self.infrastructure = infrastructure
        self.config = config

    def main(self):
        pass

    def on_group_finalisation(self):
        pass
