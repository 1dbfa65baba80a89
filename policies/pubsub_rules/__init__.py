"""Pub/Sub rules of the pubsubguard policy pack; `facts` is importable without pulumi-policy."""
