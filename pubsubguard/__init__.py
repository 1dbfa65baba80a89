"""pubsubguard: declare, judge and prove Google Cloud Pub/Sub estates with delivery guarantees.

One import name. Beneath it: `cli` and `commands` (the command line, on top), `infra` (declare: the
Pulumi program, from the repository's `infra/`), `policies` (judge: the policy pack, from `policies/`),
`check` (the engine's side of judging a team's program with the pack), `validation` (prove: the Spark
job, from `validation/`), and `core` (the shared bottom). docs/architecture.md draws it."""

from pubsubguard.core import __version__  # noqa: F401  (re-exported: `pubsubguard.__version__`)
