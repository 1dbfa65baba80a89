"""What a verification run is about: the declared estate (from a plan, or from the state `pulumi up`
left) and the target that holds it (the emulator on this machine, or Google Cloud), checked before
anything is created."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from pubsubguard.core.declared import Estate, Subscription, estate, plan_from, short_name
from pubsubguard.core.errors import VerifyError

from .config import RunConfig
from .evidence.records import DeclaredSubscription


def declared_estate(config: RunConfig, plan: dict | None = None) -> tuple[Estate, Estate]:
    """The declared estate (`--plan`, `--stack` or `--state`; `--project` applied to a plan), read once:
    all of it (plumbing included), and as its stack declares it (`Estate.declared_by_stack`). `plan`: the
    plan or state the command already read for `config` (`declared.plan_from`); None: read here.

    A state is what was deployed: its project is a fact, so `--project` must name it. A plan whose names a
    deploy decides (autonames) takes them from the emulator rehearsal (`pubsubguard.core.rehearsal`)."""
    from pubsubguard.core import rehearsal
    from pubsubguard.core.plan_file import retarget
    from pubsubguard.core.project import project_root

    if plan is None:
        plan = plan_from(config.plan, config.stack, config.root, config.state)
    if "state" in plan:
        deployed = plan["state"]["projects"]
        if config.project and config.project not in deployed:
            raise VerifyError(f"--state {plan['state']['location']}: deployed to project {', '.join(deployed)}, "
                              f"not --project {config.project}; verify the state of the stack deployed there")
        source = plan["state"]
    else:
        where = str(config.plan) if config.plan else f"stack {plan['stack']!r} (planned offline)"
        plan, names_from, stood_in = rehearsal.for_verify(plan, Path(config.root or project_root()), config.target, where)
        source = {"kind": "plan", "location": where, "names_from": names_from, "stood_in": stood_in}
        if config.project and config.project != plan.get("gcp_project"):
            plan = retarget(plan, config.project)
    everything = replace(estate(plan), source=source)
    return everything, everything.declared_by_stack()


def checked(subscription: Subscription) -> DeclaredSubscription:
    """What the checks judge of a declared subscription (`evidence.DeclaredSubscription`, run.json)."""
    return DeclaredSubscription(
        name=subscription.name,
        topic=subscription.topic,
        ordering=subscription.ordering,
        exactly_once=subscription.exactly_once,
        ack_deadline_s=int(subscription.ack_deadline_s),
        max_delivery_attempts=subscription.max_delivery_attempts,
        dead_letter_topic=short_name(subscription.dead_letter_topic_path) if subscription.dead_letter_topic_path else None,
        delivery_type=subscription.delivery_type,
    )


def resolve_target(config: RunConfig, declared: Estate) -> str | None:
    """The emulator host (emulator target) or None (gcp); raises when the target cannot be used."""
    if config.target == "emulator":
        from pubsubguard.core.emulator import running_host

        host = running_host(config.root)
        os.environ["PUBSUB_EMULATOR_HOST"] = host
        return host
    if os.environ.get("PUBSUB_EMULATOR_HOST"):
        raise VerifyError("--target gcp: PUBSUB_EMULATOR_HOST is set, so clients would talk to an emulator; unset it")
    if not declared.probe_isolation and not config.allow_shared_subscriptions:
        raise VerifyError(
            f"--target gcp: stack {declared.stack!r} does not declare probe_isolation, so its production "
            "subscriptions would also receive the probe's messages; declare `probe_isolation: true` and "
            "deploy, or pass --allow-shared-subscriptions to accept that (docs/verification.md)"
        )
    return None

