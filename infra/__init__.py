"""Declare: the Pulumi program (`__main__.py`), its estate model and its components."""
