# Written here after the shape of tomerleib/ransomeware-dr pulumi-cloud-function/components/config.py
import pulumi


def section(key: str, *needed: str) -> dict:
    """A structured config value of this project; fails early when a needed field is absent."""
    found = pulumi.Config().require_object(key)
    absent = [field for field in needed if field not in found]
    if absent:
        raise ValueError(f"config {key!r} lacks {', '.join(absent)}")
    return found


def flat(namespace: str, *needed: str) -> dict:
    """Plain values of another namespace (e.g. gcp), each one required."""
    cfg = pulumi.Config(namespace)
    return {field: cfg.require(field) for field in needed}
