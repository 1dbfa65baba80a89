"""What `pubsubguard apply` prints on the emulator, driven as a subprocess: the engine's refusal of a value in one
line, each resource once and only the settings that differ by default."""

from __future__ import annotations

import json

import pytest

from support import ROOT
from support.command_line import cli, project  # noqa: F401 - a fixture, used by name
from support.one_line import one_line


# --- apply's output -----------------------------------------------------------------------------------
@pytest.mark.emulator
def test_a_value_the_engine_cannot_serialize_is_one_line(emulator, project):
    """ack_deadline_seconds=float("nan") in the program: the engine's refusal in one line and exit 2,
    and nothing after it (the SDK's pending futures are retrieved, not reported at exit)."""
    (project / "Pulumi.yaml").write_text("name: nan\nruntime: python\n")  # a program of its own (the copy's
    (project / "__main__.py").write_text(  # infra/ would import the installed `infra` package, as under Pulumi)
        "import pulumi_gcp as gcp\n"
        "t = gcp.pubsub.Topic('orders', name='orders')\n"
        "gcp.pubsub.Subscription('s', name='orders-sub', topic=t.name, ack_deadline_seconds=float('nan'))\n")
    done = cli("apply", "--emulator", cwd=project, env={"PUBSUB_EMULATOR_HOST": emulator.host})
    one_line(done, 2, "pubsubguard apply: the program failed", "NaN")
    assert "Future exception" not in done.stdout + done.stderr


@pytest.mark.emulator
def test_apply_shows_each_resource_once_and_only_differences_by_default(emulator, tmp_path):
    import uuid

    from pubsubguard.core import readback
    from pubsubguard.core.plan import make_plan
    from pubsubguard.core.plan_file import retarget

    project = f"pubsubguard-c{uuid.uuid4().hex[:12]}"
    plan = retarget(make_plan("dev", ROOT), project)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    env = {"PUBSUB_EMULATOR_HOST": emulator.host, "COLUMNS": "400"}

    first = cli("apply", "--emulator", "--plan", str(plan_file), env=env)
    assert first.returncode == 0, first.stderr
    rows = [line for line in first.stdout.splitlines() if line.startswith("│ ") and line.split("│")[1].strip()]
    outcome_rows = [line.split("│")[1].strip() for line in rows if "│ subscription " in line or "│ topic " in line]
    assert len(outcome_rows) == len(set(outcome_rows)) == len(readback.declared(plan))  # each resource once
    assert "created, partly not applied" in first.stdout
    settings = {line.split("│")[2].strip() for line in rows if line.count("│") == 6}
    assert settings == {"retention_seconds"}  # only what differs (the drains' retention the emulator caps)

    everything = cli("apply", "--emulator", "--plan", str(plan_file), "--show", "all", env=env)
    assert everything.returncode == 0
    assert {"ack_deadline_seconds", "ordering", "exactly_once"} <= {
        line.split("│")[2].strip() for line in everything.stdout.splitlines() if line.count("│") == 6}
    assert len(everything.stdout.splitlines()) > 2 * len(first.stdout.splitlines())

    again = cli("apply", "--emulator", "--plan", str(plan_file), env=env)
    assert f"apply: unchanged {len(readback.declared(plan))}," in again.stdout
    assert "nothing changed" in again.stdout
    assert not any("│ topic " in line and "unchanged" in line for line in again.stdout.splitlines())
