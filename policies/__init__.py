"""The policy pack, `pubsubguard.policies` when installed. Pulumi runs this folder with the pack's own
interpreter (`__main__.py`), where `pubsub_rules` and `pubsub_facts` are top-level packages; pubsubguard's
own code imports only `pubsubguard.policies.pubsub_facts`, a leaf of facts, never the rules."""
