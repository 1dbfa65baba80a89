"""What a verification run is about: the declared estate (from a plan, or from the state `pulumi up`
left) and the target that holds it (the emulator on this machine, or Google Cloud), checked before
anything is created."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from pubsubguard.declared import Estate, Subscription, estate, plan_from, short_name
from validation.evidence import DeclaredSubscription
from validation.failures import VerifyError


def load_estate(args) -> tuple[Estate, Estate]:
    """The declared estate (`--plan`, `--stack` or `--state`; `--project` applied to a plan), read once:
    all of it (plumbing included), and as its stack declares it (`Estate.declared_by_stack`).

    A state is what was deployed: its project is a fact, so `--project` must name it. A plan whose names a
    deploy decides (autonames) takes them from the emulator rehearsal (`pubsubguard.rehearsal`)."""
    from pubsubguard import rehearsal
    from pubsubguard.plan import project_root

    state = getattr(args, "state", None)
    plan = plan_from(args.plan, args.stack, args.root, state)
    if "state" in plan:
        deployed = plan["state"]["projects"]
        if args.project and args.project not in deployed:
            raise VerifyError(f"--state {plan['state']['location']}: deployed to project {', '.join(deployed)}, "
                              f"not --project {args.project}; verify the state of the stack deployed there")
        source = plan["state"]
    else:
        where = str(args.plan) if args.plan else f"stack {plan['stack']!r} (planned offline)"
        plan, names_from = rehearsal.for_verify(plan, Path(args.root or project_root()), args.target, where)
        source = {"kind": "plan", "location": where, "names_from": names_from}
        if args.project and args.project != plan.get("gcp_project"):
            old = plan.get("gcp_project")
            plan = json.loads(json.dumps(plan).replace(f"projects/{old}/", f"projects/{args.project}/"))
            plan["gcp_project"] = args.project
    everything = replace(estate(plan), source=source)
    return everything, everything.declared_by_stack()


def checked(subscription: Subscription) -> DeclaredSubscription:
    """What the checks judge of a declared subscription (`evidence.DeclaredSubscription`, run.json)."""
    return DeclaredSubscription(
        name=subscription.name,
        topic=subscription.topic,
        ordering=subscription.ordering,
        exactly_once=subscription.exactly_once,
        ack_deadline_s=int(subscription.effective_ack_deadline_s),
        max_delivery_attempts=subscription.max_delivery_attempts,
        dead_letter_topic=short_name(subscription.dead_letter_topic) if subscription.dead_letter_topic else None,
        delivery_type=subscription.delivery,
    )


def resolve_target(args, declared: Estate) -> str | None:
    """The emulator host (emulator target) or None (gcp); raises when the target cannot be used."""
    if args.target == "emulator":
        from pubsubguard.emulator import running_host

        host = running_host(args.root)
        os.environ["PUBSUB_EMULATOR_HOST"] = host
        return host
    if os.environ.get("PUBSUB_EMULATOR_HOST"):
        raise VerifyError("--target gcp: PUBSUB_EMULATOR_HOST is set, so clients would talk to an emulator; unset it")
    if not declared.probe_isolation and not args.allow_shared_subscriptions:
        raise VerifyError(
            f"--target gcp: stack {declared.stack!r} does not declare probe_isolation, so its production "
            "subscriptions would also receive the probe's messages; declare `probe_isolation: true` and "
            "deploy, or pass --allow-shared-subscriptions to accept that (docs/verification.md)"
        )
    return None

