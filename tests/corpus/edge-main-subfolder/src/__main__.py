"""Written here: Pulumi.yaml has main: src/, so the program is src/__main__.py (with a module beside it)."""
import pulumi

from topics import topic_with_drain

events = topic_with_drain("events")
pulumi.export("topic", events.name)
