"""The shared core, beneath the three parts and the command line, importing none of them: the declared
model (`declared`), the engine's part toward a Pulumi program (`project`, `langhost`, `langhost_python`,
`langhost_exec`, `langhost_node`, `engine`, `plan`, `state`), the rehearsal of `pulumi up` on the emulator
(`apply`, `rehearsal`, `readback`), where evidence and reports are stored (`storage`), the emulator (`emulator`)
and its push receiver (`push_receiver`), the probe's contract with the estate (`probe_contract`), and the errors
every layer raises (`errors`). Pub/Sub's own facts are `pubsubguard.policies.pubsub_facts`, a leaf shared with
the policy pack."""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it, `pubsubguard --version` shows it
