"""The conformance scenarios, each citing its fact in docs/pubsub-facts.md, registered with
`pubsubguard.validation.conformance.harness.scenario` when their module is imported: exactly-once
(`exactly_once`), ordering (`ordering`), redelivery (`redelivery`), dead-lettering (`dead_letter`), what the API
refuses and keeps and the publisher client (`api`). Imported in this order, the order they are listed in
(conformance.json, docs/emulator.md); they run together (the runner's pool), one that disturbs the target after
the others."""

from . import exactly_once, ordering, redelivery, dead_letter, api  # noqa: F401  (importing them registers their scenarios)
