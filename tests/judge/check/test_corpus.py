"""The check on programs other people wrote (`tests/corpus/`, sources in each `expected.yaml`): each
program's exit code and exactly its mandatory rules and "not judged" list, as written from the Pub/Sub
documentation, through the real command (offline plan of the program, the pack's own process, gRPC) —
run from the checkout's environment, and again as a team gets it: the wheel installed alone into a fresh
virtualenv, the program in a virtualenv of its own named by its Pulumi.yaml. Both must give the verdict."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from support.installed import CHECKOUT_PINS, as_team_project, environment, installed_tool, user_env
from support.nodejs_projects import as_node_project
from pubsubguard import cli
from support import ROOT

CORPUS = ROOT / "tests" / "corpus"
PROGRAMS = sorted(p.name for p in CORPUS.iterdir() if (p / "expected.yaml").exists())
EXIT = {"passed": 0, "rejected": 1, "error": 2}


def is_nodejs(name: str) -> bool:
    """A TypeScript/JavaScript program (`runtime: nodejs`): it gets the packages of tests/nodejs as its
    node_modules, installed by scripts/setup.sh, in a copy (the corpus folder stays as committed)."""
    try:
        runtime = (yaml.safe_load((CORPUS / name / "Pulumi.yaml").read_text()) or {}).get("runtime")
    except (OSError, yaml.YAMLError, AttributeError):
        return False
    return (runtime.get("name") if isinstance(runtime, dict) else runtime) == "nodejs"


def expected_of(name: str) -> dict:
    return yaml.safe_load((CORPUS / name / "expected.yaml").read_text())


def assert_as_expected(expected: dict, code: int, result: dict, err: str, out: str) -> None:
    mandatory = sorted({v["policy"] for v in result["violations"] if v["level"] == "mandatory"})
    assert (code, mandatory) == (EXIT[expected["verdict"]], sorted(expected.get("mandatory") or [])), (
        err, [v["message"] for v in result["violations"] if v["level"] == "mandatory"])
    assert "Traceback" not in err + out
    # "Not judged" is exact (issue 26): the rules that apply and could not decide, nothing else.
    assert sorted(f"{e['policy']} on {e['resource_name']}" for e in result.get("unjudged", [])) == \
        sorted(expected["not_judged"]), result.get("unjudged")
    if expected["verdict"] == "error":
        assert result["passed"] is None and result["error"]["message"]
        assert len(err.strip().splitlines()) == 1, err
    else:
        assert result["error"] is None and result["passed"] is (code == 0)


def test_the_corpus_is_large_enough():
    expected = [expected_of(name) for name in PROGRAMS]
    gathered = [e for e in expected if e["source"].get("repo")]
    assert len(gathered) >= 30 and {e["verdict"] for e in expected} == set(EXIT)


TWINS = sorted((name, expected_of(name)["twin"]) for name in PROGRAMS if expected_of(name).get("twin"))


@pytest.mark.parametrize("typescript, python", TWINS)
def test_a_typescript_twin_is_judged_as_its_python_twin(typescript, python):
    """"Not judged" is exact in both languages (issue 45): each TypeScript program written after a Python
    one expects the same verdict, mandatory rules and "not judged" list (rule on resource) as its twin,
    and `test_corpus_program` holds each to its own list."""
    assert is_nodejs(typescript) and not is_nodejs(python)
    ts, py = expected_of(typescript), expected_of(python)
    assert (ts["verdict"], sorted(ts.get("mandatory") or []), sorted(ts["not_judged"])) == \
        (py["verdict"], sorted(py.get("mandatory") or []), sorted(py["not_judged"]))


@pytest.mark.parametrize("name", PROGRAMS)
def test_corpus_program(name, tmp_path, capsys):
    expected = expected_of(name)
    report = tmp_path / "report.json"
    root = as_node_project(CORPUS / name, tmp_path / name) if is_nodejs(name) else CORPUS / name
    code = cli.main(["check", "--root", str(root), "--stack", expected["stack"], "--format", "json",
                     "--out", str(report)])
    captured = capsys.readouterr()
    assert_as_expected(expected, code, json.loads(report.read_text()), captured.err, captured.out)


@pytest.fixture(scope="module")
def user_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("user") / "cache"  # the pack's virtualenv, made by the first check


@pytest.mark.parametrize("name", PROGRAMS)
def test_corpus_program_with_the_wheel_installed_alone(name, tmp_path, user_cache):
    expected = expected_of(name)
    _, bin_dir = installed_tool()
    root = as_node_project(CORPUS / name, tmp_path / name) if is_nodejs(name) else \
        as_team_project(CORPUS / name, tmp_path / name, environment(CHECKOUT_PINS))
    report = tmp_path / "report.json"
    done = subprocess.run([str(bin_dir / "pubsubguard"), "check", "--stack", expected["stack"], "--format", "json",
                           "--out", str(report)], cwd=root, capture_output=True, text=True, timeout=300,
                          env=user_env(user_cache), stdin=subprocess.DEVNULL)
    err = "\n".join(line for line in done.stderr.splitlines()
                    if not line.startswith("pubsubguard: making the policy pack's virtualenv"))
    document = json.loads(report.read_text())
    assert_as_expected(expected, done.returncode, document, err, done.stdout)
    if document.get("program") and is_nodejs(name):  # the program ran: with its own node_modules' SDK
        assert "@pulumi/pulumi" in document["program"]["interpreter"]
    elif document.get("program"):  # the program ran: with its own virtualenv
        assert document["program"]["interpreter"].startswith(str(root / "venv"))
