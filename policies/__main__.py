"""The pubsubguard Pub/Sub policy pack. The Pulumi CLI runs this directory as
`<venv python> -u -m pulumi.policy <engine address> <this directory>`; the rules live in the
importable package `pubsub_rules/` beside this file (see README.md)."""

from pubsub_rules.pack import build_pack

build_pack()
