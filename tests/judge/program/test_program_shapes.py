"""Odd but legal programs that `pulumi preview` runs, and broken projects, as teams write them (issue 36):
the check gives the verdict the rules give, the same in every format, at the line the program creates the
resource; a broken project gets the one line that names the actual problem."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml


def project(root: Path, source: str | bytes, pulumi_yaml: dict | str | None = None, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    text = pulumi_yaml if isinstance(pulumi_yaml, str) else yaml.safe_dump(pulumi_yaml or {"name": "team", "runtime": "python"})
    (root / "Pulumi.yaml").write_text(text)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "acme-prod"}}))
    main = root / "__main__.py"
    main.write_bytes(source if isinstance(source, bytes) else textwrap.dedent(source).lstrip().encode())
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip())
    return root


def check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", "check", *args], cwd=root, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "VIRTUAL_ENV": sys.prefix},
                          stdin=subprocess.DEVNULL)


def mandatory(document: dict) -> list[tuple[str, str]]:
    return sorted((v["policy"], v["resource_name"]) for v in document["violations"] if v["level"] == "mandatory")


COMPONENT = """
    import pulumi
    import pulumi_gcp as gcp


    class Queue(pulumi.ComponentResource):
        def __init__(self, name, opts=None):
            super().__init__("pkg:gcp:pubsub:Queue", name, None, opts)  # four parts: legal for a component
            topic = gcp.pubsub.Topic(f"{name}-topic", name=f"{name}-topic", opts=pulumi.ResourceOptions(parent=self))
            gcp.pubsub.Subscription(f"{name}-sub", name=f"{name}-sub", topic=topic.id, expiration_policy={"ttl": ""},
                                    enable_exactly_once_delivery=True,
                                    push_config={"push_endpoint": "https://q.example.com/push"},
                                    opts=pulumi.ResourceOptions(parent=self))
            self.register_outputs({})
"""


def test_a_component_of_any_type_token_is_judged_at_the_line_that_creates_the_resource(tmp_path):
    root = project(tmp_path / "team", """
        from queues import Queue

        Queue("orders")
    """, **{"queues.py": COMPONENT})
    done = check(root, "--format", "json")
    document = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    (violation,) = [v for v in document["violations"] if v["level"] == "mandatory"]
    assert (violation["policy"], violation["file"], violation["line"]) == ("no-exactly-once-on-push", "queues.py", 9)
    text = check(root)
    assert "queues.py:9: mandatory no-exactly-once-on-push" in text.stdout
    sarif = json.loads(check(root, "--format", "sarif").stdout)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "no-exactly-once-on-push"]
    location = result["locations"][0]["physicalLocation"]
    assert (location["artifactLocation"]["uri"], location["region"]["startLine"]) == ("queues.py", 9)


def test_a_program_may_write_beside_itself_and_nothing_lands_on_disk(tmp_path):
    root = project(tmp_path / "team", """
        import os, shutil
        import pulumi_gcp as gcp

        os.makedirs("build", exist_ok=True)
        with open("build/main.py", "w") as handle:
            handle.write("def main(event, context): pass\\n")
        archive = shutil.make_archive("function-source", "zip", "build")
        with open("__main__.py", "a") as handle:  # even its own file: the copy, not the project
            handle.write("# rewritten\\n")
        assert os.path.getsize(archive) > 0
        gcp.pubsub.Topic("orders", name="orders")
    """)
    before, program = sorted(p.name for p in root.iterdir()), (root / "__main__.py").read_bytes()
    done = check(root)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in root.iterdir()) == before
    assert (root / "__main__.py").read_bytes() == program


def test_a_latin_1_program_gets_one_verdict_in_every_format(tmp_path):
    source = ("# -*- coding: latin-1 -*-\n# Équipe café\nimport pulumi_gcp as gcp\n"
              "t = gcp.pubsub.Topic('orders', name='orders')\n"
              "gcp.pubsub.Subscription('eo-push', name='eo-push', topic=t.id, expiration_policy={'ttl': ''},"
              " enable_exactly_once_delivery=True, push_config={'push_endpoint': 'https://x.example.com'})"
              "  # café\n").encode("latin-1")
    root = project(tmp_path / "team", source)
    text, as_json, sarif = check(root), check(root, "--format", "json"), check(root, "--format", "sarif")
    assert (text.returncode, as_json.returncode, sarif.returncode) == (1, 1, 1), text.stderr + sarif.stderr
    assert "__main__.py:5: mandatory no-exactly-once-on-push" in text.stdout
    assert mandatory(json.loads(as_json.stdout)) == [("no-exactly-once-on-push", "eo-push")]
    assert [r["ruleId"] for r in json.loads(sarif.stdout)["runs"][0]["results"] if r["level"] == "error"] == \
        ["no-exactly-once-on-push"]


def test_a_latin_1_suppression_comment_is_read(tmp_path):
    source = ("# -*- coding: latin-1 -*-\nimport pulumi_gcp as gcp\n"
              "t = gcp.pubsub.Topic('orders', name='orders')\n"
              "gcp.pubsub.Subscription('eo-push', name='eo-push', topic=t.id, expiration_policy={'ttl': ''},"
              " enable_exactly_once_delivery=True, push_config={'push_endpoint': 'https://x.example.com'})"
              "  # pubsubguard: ignore[no-exactly-once-on-push] décidé (OPS-1)\n").encode("latin-1")
    done = check(project(tmp_path / "team", source), "--format", "json")
    assert done.returncode == 0, done.stderr
    (violation,) = [v for v in json.loads(done.stdout)["violations"] if v["policy"] == "no-exactly-once-on-push"]
    assert violation["suppressed"]["reason"] == "décidé (OPS-1)"


@pytest.mark.parametrize("pulumi_yaml, expected", [
    ("name: team\nruntime: [python]\n",
     "Pulumi.yaml: runtime: expected a runtime name (`runtime: python`) or a mapping with one"),
    ("runtime: python\n", "Pulumi.yaml: name: expected the project's name (a string), it is missing"),
    ("name: team\nruntime: python\nmain: app/\n", "Pulumi.yaml: main: 'app/' does not exist"),
])
def test_a_broken_project_file_is_one_line_naming_the_problem(tmp_path, pulumi_yaml, expected):
    done = check(project(tmp_path / "team", "import pulumi\n", pulumi_yaml))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert expected in done.stderr


def test_a_looping_main_symlink_is_named(tmp_path):
    root = project(tmp_path / "team", "import pulumi\n")
    (root / "__main__.py").unlink()
    (root / "__main__.py").symlink_to("__main__.py")
    done = check(root)
    assert done.returncode == 2 and "__main__.py is a symbolic link that loops" in done.stderr, done.stderr


def test_the_invoke_results_hint_is_given_only_for_an_error_about_an_unknown_value(tmp_path):
    unrelated = check(project(tmp_path / "a", """
        import pulumi_gcp as gcp

        project = gcp.organizations.get_project()
        gcp.pubsub.Topic("orders", name="orders").no_such_attribute
    """))
    assert unrelated.returncode == 2 and "AttributeError" in unrelated.stderr
    assert "--invoke-results" not in unrelated.stderr
    related = check(project(tmp_path / "b", """
        import pulumi_gcp as gcp

        zones = gcp.compute.get_zones(region="us-east1")
        for zone in zones.names:
            gcp.pubsub.Topic(f"orders-{zone}", name=f"orders-{zone}")
    """))
    assert related.returncode == 2 and "--invoke-results" in related.stderr, related.stderr
