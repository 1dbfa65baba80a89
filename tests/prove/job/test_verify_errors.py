"""Bad input to `pubsubguard verify`: a clear message, exit code 2, nothing created."""

from __future__ import annotations

import pytest

from pubsubguard import cli
from pubsubguard.validation.probe.faults import FaultSpecError, parse_faults
from pubsubguard.validation.checks.findings import GUARANTEES


@pytest.mark.parametrize(
    "spec, says",
    [
        ("nack", "'nack' is not name=value"),
        ("nack=2", "nack=2: expected a fraction from 0 to 1"),
        ("nack=x", "nack='x': expected a fraction"),
        ("crash=1.5", "crash='1.5': expected a whole number"),
        ("explode=1", "unknown fault 'explode'"),
        ("nack=0.1,nack=0.2", "'nack' given twice"),
        ("nack=0.7,expire=0.5", "exceeds 1"),
    ],
)
def test_malformed_faults_name_the_item(spec, says):
    with pytest.raises(FaultSpecError) as err:
        parse_faults(spec)
    assert says in str(err.value)


def test_faults_parse():
    faults = parse_faults("nack=0.1, expire=0.05,poison=0.01,crash=1")
    assert (faults.nack, faults.expire, faults.poison, faults.crash) == (0.1, 0.05, 0.01, 1)
    assert parse_faults("") == parse_faults(None)


def test_cli_malformed_faults_exit_2_no_leftovers(tmp_path, capsys):
    report = tmp_path / "report"
    code = cli.main(["verify", "--faults", "nack=lots", "--report", str(report)])
    assert code == 2
    assert "--faults: nack='lots'" in capsys.readouterr().err
    assert not report.exists()


def test_cli_unknown_stack_exit_2(tmp_path, capsys):
    report = tmp_path / "report"
    code = cli.main(["verify", "--stack", "nosuchstack", "--report", str(report)])
    assert code == 2
    assert "no such stack 'nosuchstack'" in capsys.readouterr().err
    assert not report.exists()


def test_cli_unreachable_target_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    report = tmp_path / "report"
    code = cli.main(["verify", "--stack", "dev", "--report", str(report)])
    assert code == 2
    assert "PUBSUB_EMULATOR_HOST=127.0.0.1:1: no Pub/Sub emulator answers there" in capsys.readouterr().err
    assert not report.exists()


def test_cli_gcp_without_probe_isolation_refused(tmp_path, capsys, monkeypatch):
    from pubsubguard.core.plan import make_plan

    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    plan = make_plan("dev")
    plan["outputs"]["probe_isolation"] = False
    plan_file = tmp_path / "plan.json"
    import json

    plan_file.write_text(json.dumps(plan))
    # Credentials are found (not used: the refusal comes before any client exists).
    key = tmp_path / "adc.json"
    key.write_text(json.dumps({"type": "authorized_user", "client_id": "x", "client_secret": "x", "refresh_token": "x"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    code = cli.main(["verify", "--plan", str(plan_file), "--target", "gcp", "--report", str(tmp_path / "r")])
    assert code == 2
    assert "does not declare probe_isolation" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_verify_reads_its_plan_once_and_hands_it_down(tmp_path, capsys, monkeypatch):
    """`verify --plan FILE` without --report reads the plan to learn its stack (the default report directory)
    and hands it to the job, which does not read it again."""
    import json

    from pubsubguard.core import plan_file as plan_files
    from pubsubguard.core.plan import make_plan

    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    plan = make_plan("dev")
    plan["outputs"]["probe_isolation"] = False  # refused once the estate is read: nothing is created
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    key = tmp_path / "adc.json"
    key.write_text(json.dumps({"type": "authorized_user", "client_id": "x", "client_secret": "x", "refresh_token": "x"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    reads = []
    load_plan = plan_files.load_plan
    monkeypatch.setattr(plan_files, "load_plan", lambda *a, **k: reads.append(a) or load_plan(*a, **k))
    code = cli.main(["verify", "-C", str(tmp_path), "--plan", str(plan_file), "--target", "gcp"])
    assert code == 2 and "does not declare probe_isolation" in capsys.readouterr().err
    assert reads == [(plan_file,)]


def test_from_evidence_without_evidence(tmp_path, capsys):
    code = cli.main(["verify", "--from-evidence", str(tmp_path)])
    assert code == 2
    assert "no run.json" in capsys.readouterr().err


def test_expire_only_within_the_first_deadline():
    from pubsubguard.validation.probe.faults import Faults, delivery_action

    faults = Faults(expire=1.0)
    assert delivery_action(faults, "run", "sub", "m1", "t:1") == "expire"
    # A delivery later than one deadline after its publish (e.g. the expired message's redelivery) is acked.
    assert delivery_action(faults, "run", "sub", "m1", "t:2", may_expire=False) == "ack"
    assert delivery_action(Faults(nack=1.0), "run", "sub", "m1", "t:2", may_expire=False) == "nack"


def test_summary_is_not_truncated_when_stdout_is_not_a_terminal(capsys, tmp_path):
    from pubsubguard.validation.report.terminal import print_summary

    name = "orders-ordered-exactly-once-with-a-long-name"
    result = {"run_id": "0123456789abcdef", "target": "emulator", "verdict": "violated", "observations": [],
              "verdict_reason": "violated: orders-ordered-exactly-once-with-a-long-name.ordering",
              "subscriptions": {name: {"guarantees": {g: "violated" for g in GUARANTEES},
                                       "findings": {"stale_ack_accepted": [{}], "out_of_order": [{}, {}]},
                                       "figures": {"delivered": 200, "latency_p50_ms": 1234.5,
                                                   "latency_p95_ms": 2345.6, "latency_p99_ms": 3456.7}}}}
    print_summary(result, tmp_path)
    out = capsys.readouterr().out
    assert name in out and "out_of_order×2" in out and "stale_ack_accepted×1" in out and "1234/2346/3457" in out, out
    assert "violated" in out and "…" not in out, out


def test_an_unexpected_error_in_the_spark_submit_entry_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    """A bug in the job (here: a run that raises) is not a violation: one line, exit 2 (1 means violated to
    a CI gate); PUBSUBGUARD_DEBUG=1 gives the traceback."""
    from pubsubguard.validation import job

    def broken(config, spark=None):
        raise RuntimeError("boom")

    monkeypatch.setattr(job, "run", broken)
    monkeypatch.delenv("PUBSUBGUARD_DEBUG", raising=False)
    assert job.main(["--from-evidence", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("verify: unexpected error: RuntimeError: boom (a bug;"), err
    monkeypatch.setenv("PUBSUBGUARD_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        job.main(["--from-evidence", str(tmp_path)])


def test_the_summary_leads_with_what_does_not_hold_and_folds_a_large_estates_holding_rows(capsys, tmp_path):
    """An estate of 100 topics prints 300 rows in name order, the violated ones scattered among them: the
    terminal's summary says the counts first, lists violated then inconclusive subscriptions before the rest,
    and beyond SUMMARY_ROWS folds the subscriptions where every tested guarantee holds into one line."""
    from pubsubguard.validation.report.terminal import SUMMARY_ROWS, print_summary

    def sub(status: str) -> dict:
        return {"guarantees": {g: (status if g == "ordering" else "holds") for g in GUARANTEES},
                "findings": {"out_of_order": [{}]} if status != "holds" else {}, "figures": {"delivered": 10}}

    subs = {f"t{i:03d}": sub("violated" if i % 50 == 7 else "inconclusive" if i == 60 else "holds")
            for i in range(SUMMARY_ROWS + 60)}
    result = {"run_id": "0123456789abcdef", "target": "emulator", "verdict": "violated", "observations": [],
              "verdict_reason": "violated", "subscriptions": subs}
    print_summary(result, tmp_path)
    out = capsys.readouterr().out
    assert f"{len(subs)} subscriptions: 2 with a guarantee violated, 1 inconclusive, {len(subs) - 3} holding" in out
    rows = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert rows == ["t007", "t057", "t060", f"… {len(subs) - 3} more"], rows
    few = {name: subs[name] for name in ("t000", "t007", "t060")}
    print_summary({**result, "subscriptions": few}, tmp_path)
    rows = [line.split("│")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert rows == ["t007", "t060", "t000"], rows  # a small estate keeps every row, the failing ones first
