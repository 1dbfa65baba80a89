"""pubsubguard: declare, judge and prove Google Cloud Pub/Sub estates with delivery guarantees."""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it, `pubsubguard --version` shows it
