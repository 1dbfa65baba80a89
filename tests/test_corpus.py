"""The check on programs other people wrote (`tests/corpus/`, sources in each `expected.yaml`): each
program's exit code and exactly its mandatory rules, as written from the Pub/Sub documentation, through
the real command (offline plan of the program, the pack's own process, gRPC)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pubsubguard import cli

CORPUS = Path(__file__).resolve().parent / "corpus"
PROGRAMS = sorted(p.name for p in CORPUS.iterdir() if (p / "expected.yaml").exists())
EXIT = {"passed": 0, "rejected": 1, "error": 2}


def test_the_corpus_is_large_enough():
    expected = [yaml.safe_load((CORPUS / name / "expected.yaml").read_text()) for name in PROGRAMS]
    gathered = [e for e in expected if e["source"].get("repo")]
    assert len(gathered) >= 15 and {e["verdict"] for e in expected} == set(EXIT)


@pytest.mark.parametrize("name", PROGRAMS)
def test_corpus_program(name, tmp_path, capsys):
    expected = yaml.safe_load((CORPUS / name / "expected.yaml").read_text())
    report = tmp_path / "report.json"
    code = cli.main(["check", "--root", str(CORPUS / name), "--stack", expected["stack"], "--format", "json",
                     "--out", str(report)])
    captured = capsys.readouterr()
    result = json.loads(report.read_text())
    mandatory = sorted({v["policy"] for v in result["violations"] if v["level"] == "mandatory"})
    assert (code, mandatory) == (EXIT[expected["verdict"]], sorted(expected.get("mandatory") or [])), (
        captured.err, [v["message"] for v in result["violations"] if v["level"] == "mandatory"])
    assert "Traceback" not in captured.err + captured.out
    # "Not judged" is exact (issue 26): the rules that apply and could not decide, nothing else.
    assert sorted(f"{e['policy']} on {e['resource_name']}" for e in result.get("unjudged", [])) == \
        sorted(expected["not_judged"]), result.get("unjudged")
    if expected["verdict"] == "error":
        assert result["passed"] is None and result["error"]["message"]
        assert len(captured.err.strip().splitlines()) == 1, captured.err
    else:
        assert result["error"] is None and result["passed"] is (code == 0)
