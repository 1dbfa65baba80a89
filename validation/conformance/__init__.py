"""The conformance scenarios: each measures one documented behaviour of the target on its own topic
(`scenarios`, on the `harness`), run alone (`pubsubguard conform`, `runner`) or beside the probe (`beside`), written
into docs/emulator.md (`docs`); which verification findings a violated scenario explains is `explains`."""
