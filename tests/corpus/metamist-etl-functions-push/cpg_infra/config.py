class CPGInfrastructureConfig(dict):
    """Stand-in: the config as nested attribute dictionaries (a missing key reads as None)."""

    def __getattr__(self, item):
        value = self.get(item)
        return CPGInfrastructureConfig(value) if isinstance(value, dict) else value

    def items(self):
        return [(k, CPGInfrastructureConfig(v) if isinstance(v, dict) else v) for k, v in super().items()]

    def values(self):
        return [v for _, v in self.items()]

    @classmethod
    def from_dict(cls, d):
        return cls(d)
