"""Options parsed once (issue 66): `RunConfig` holds the parsed values (`Faults`, the loaded schedule, the endpoint map),
and `pubsubguard run` hands its verify step a `RunConfig` it builds, not command-line text parsed again: that value
is the one `pubsubguard verify` makes of the same options."""

from __future__ import annotations

from pathlib import Path

import pytest

from pubsubguard.cli import build_parser
from pubsubguard.validation.config import RunConfig
from pubsubguard.validation.probe.faults import Faults

from support import ROOT


@pytest.fixture
def schedule(tmp_path) -> Path:
    path = tmp_path / "schedule.yaml"
    path.write_text("faults:\n  - {kind: kill_stream, subscription: orders-ordered, after_s: 1}\n")
    return path


def test_the_options_are_values_once_parsed(schedule):
    args = build_parser().parse_args(["verify", "-C", str(ROOT), "--faults", "nack=0.1,crash=1", "--nemesis",
                                      str(schedule), "--endpoint", "us-east1=127.0.0.1:8601",
                                      "--endpoint", "global=localhost:8600"])
    config = RunConfig.from_options(args)
    assert config.faults == Faults(nack=0.1, crash=1)
    assert config.nemesis.source == str(schedule) and [e.kind for e in config.nemesis.entries] == ["kill_stream"]
    assert config.endpoint == {"us-east1-pubsub.googleapis.com:443": "127.0.0.1:8601",
                               "pubsub.googleapis.com:443": "localhost:8600"}


def test_without_the_options_the_values_are_the_configs_defaults():
    args = build_parser().parse_args(["verify", "-C", str(ROOT)])
    assert RunConfig.from_options(args) == RunConfig(root=args.root)


def test_a_region_mapped_twice_is_refused_at_the_command_line(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["verify", "--endpoint", "us-east1=127.0.0.1:1", "--endpoint", "us-east1=127.0.0.1:2"])
    assert done.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "argument --endpoint: region us-east1 given twice" in line


def test_run_hands_verify_the_config_verify_makes_of_the_same_options(schedule, tmp_path):
    from pubsubguard.commands.run import _verify_config

    plan, report = tmp_path / "plan.json", tmp_path / "report"
    plan.write_text("{}")
    given = ["--faults", "nack=0.1,expire=0.03", "--keys", "3", "--messages-per-key", "4", "--rate", "50",
             "--drain-timeout", "40", "--master", "local[2]", "--endpoint", "us-east1=127.0.0.1:8601"]
    run_args = build_parser().parse_args(["run", "-C", str(ROOT), "--nemesis", str(schedule), *given])
    verify_args = build_parser().parse_args(
        ["verify", "-C", str(ROOT), "--plan", str(plan), "--target", "emulator", "--report", str(report), "--conform",
         "--nemesis", str(schedule.absolute()), *given])
    assert _verify_config(run_args, {"plan": plan}, report) == RunConfig.from_options(verify_args)
