"""A team's program runs with the team's own Python, as `pulumi preview` runs it (issue 23): the
virtualenv its Pulumi.yaml names, with the pulumi SDK and pulumi-gcp versions the team pinned (the
pulumi SDK releases of the last two years, pulumi-gcp majors 7 to 10) and a private platform library
that pubsubguard's own environment does not have. The verdict is the same on every version.

The environments are built once per machine from the package index and kept under the user's cache
directory (`~/.cache/pubsubguard-tests/`), so a second run costs nothing. The same programs are also
judged by the wheel installed alone (no pulumi-gcp beside the tool), as a team gets pubsubguard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from support.installed import environment, installed_tool, user_env

ENVIRONMENTS = {  # id: the team's pins (newest first; pubsubguard's own environment has pulumi-gcp 10)
    "pulumi-3.230-gcp-9": ("pulumi==3.230.0", "pulumi-gcp==9.20.0"),
    "pulumi-3.190-gcp-8": ("pulumi==3.190.0", "pulumi-gcp==8.41.1"),
    "pulumi-3.140-gcp-7": ("pulumi==3.140.0", "pulumi-gcp==7.38.0"),
}
LIBRARY = {  # the team's private platform library: a component, as platform teams write them
    "pyproject.toml": """
        [project]
        name = "acme-pubsub"
        version = "1.0"
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
    """,
    "acme_pubsub/__init__.py": """
        from importlib import metadata

        import pulumi
        import pulumi_gcp as gcp


        class OrderedQueue(pulumi.ComponentResource):
            def __init__(self, name, push_endpoint=None, opts=None):
                super().__init__("acme:pubsub:OrderedQueue", name, None, opts)
                child = pulumi.ResourceOptions(parent=self)
                versions = {"sdk": metadata.version("pulumi").replace(".", "-"),
                            "gcp": metadata.version("pulumi-gcp").replace(".", "-")}
                self.topic = gcp.pubsub.Topic(f"{name}-topic", name=f"{name}-topic", labels=versions, opts=child)
                self.sub = gcp.pubsub.Subscription(
                    f"{name}-sub", name=f"{name}-sub", topic=self.topic.id, enable_message_ordering=True,
                    enable_exactly_once_delivery=True, expiration_policy={"ttl": ""},
                    push_config={"push_endpoint": push_endpoint} if push_endpoint else None, opts=child)
                self.register_outputs({"topic": self.topic.name})
    """,
}
PROGRAM = """
    import pulumi
    from acme_pubsub import OrderedQueue

    orders = OrderedQueue("orders", push_endpoint="https://orders.example.com/push")
    pulumi.export("topic", orders.topic.name)
"""


def team_environment(pins: tuple[str, ...], library: Path) -> Path:
    """A virtualenv with `pins` and the private library, built once (kept by the pins' hash)."""
    return environment(pins, str(library))


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("acme")
    for name, text in LIBRARY.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


def team_project(tmp_path: Path, venv: Path | None, options: dict | None = None) -> Path:
    root = tmp_path / "team"
    root.mkdir()
    runtime = {"name": "python", "options": options if options is not None else {"virtualenv": "venv"}}
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": runtime}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    (root / "__main__.py").write_text(textwrap.dedent(PROGRAM).lstrip())
    if venv is not None:
        (root / "venv").symlink_to(venv)
    return root


def run(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", *args], cwd=root, capture_output=True, text=True,
                          timeout=300, env=env or {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_program_runs_on_the_teams_pinned_sdk_and_private_library(name, tmp_path, library):
    pins = ENVIRONMENTS[name]
    root = team_project(tmp_path, team_environment(pins, library))
    plan = run(root, "plan")
    assert plan.returncode == 0, plan.stderr
    assert plan.stderr == ""  # the project's own Python: no note about standing in
    (topic,) = [r for r in json.loads(plan.stdout)["resources"] if r["type"] == "gcp:pubsub/topic:Topic"]
    assert topic["inputs"]["labels"] == {"sdk": pins[0].split("==")[1].replace(".", "-"),
                                         "gcp": pins[1].split("==")[1].replace(".", "-")}
    assert topic["parent"].endswith("acme:pubsub:OrderedQueue::orders")
    check = run(root, "check", "--format", "json")
    document = json.loads(check.stdout)
    assert check.returncode == 1, check.stderr
    assert [(v["policy"], v["resource_name"]) for v in document["violations"] if v["level"] == "mandatory"] == \
        [("no-exactly-once-on-push", "orders-sub")]
    assert document["program"]["interpreter"].startswith(str(root / "venv"))


def test_pubsubguards_own_environment_lacks_the_library_and_says_what_to_do(tmp_path):
    root = team_project(tmp_path, None, options={})
    done = run(root, "check")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("pubsubguard: the project names no virtualenv and python3 on PATH has no pulumi SDK")
    assert lines[1] == ("pubsubguard check: the program failed: __main__.py:2: ModuleNotFoundError: "
                        "No module named 'acme_pubsub'")


def test_a_named_virtualenv_that_is_missing_is_one_line(tmp_path):
    root = team_project(tmp_path, None)
    done = run(root, "check")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"pubsubguard check: {root / 'Pulumi.yaml'}: runtime.options.virtualenv: 'venv' has "
                                   f"no Python ({root / 'venv' / 'bin' / 'python'} missing; create it with `pulumi install`)")


def test_an_active_virtualenv_and_python_override_are_used(tmp_path, library):
    venv = team_environment(ENVIRONMENTS["pulumi-3.140-gcp-7"], library)
    root = team_project(tmp_path, None, options={})
    active = run(root, "check", "--format", "json", env={**os.environ, "VIRTUAL_ENV": str(venv)})
    assert active.returncode == 1 and json.loads(active.stdout)["program"]["interpreter"].startswith(str(venv))
    given = run(root, "check", "--format", "json", "--python", str(venv / "bin" / "python"))
    assert given.returncode == 1 and given.stderr == ""
    bad = run(root, "check", "--python", str(tmp_path / "nope"))
    assert bad.returncode == 2 and bad.stderr.strip() == f"pubsubguard check: --python {tmp_path / 'nope'}: no such interpreter"


DEAD_LETTERING = """
    import pulumi_gcp as gcp

    project = gcp.organizations.get_project()
    agent = f"serviceAccount:service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
    identity = gcp.projects.ServiceIdentity("pubsub-agent", service="pubsub.googleapis.com")
    orders = gcp.pubsub.Topic("orders", name="orders")
    dead = gcp.pubsub.Topic("orders-dead-letter", name="orders-dead-letter")
    gcp.pubsub.Subscription("drain", name="drain", topic=dead.id, expiration_policy={"ttl": ""})
    worker = gcp.pubsub.Subscription("worker", name="worker", topic=orders.id, expiration_policy={"ttl": ""},
                                     dead_letter_policy={"dead_letter_topic": dead.id, "max_delivery_attempts": 10})
    gcp.pubsub.TopicIAMMember("forward", topic=dead.name, role="roles/pubsub.publisher", member=agent)
    gcp.pubsub.SubscriptionIAMMember("ack", subscription=worker.name, role="roles/pubsub.subscriber",
                                     member=identity.member)
"""


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
@pytest.mark.parametrize("tool", ["checkout", "wheel"])
def test_the_documented_dead_letter_grants_pass_whatever_is_installed_beside_the_tool(name, tool, tmp_path, library):
    """Google's documented ways to name the Pub/Sub service agent (getProject()'s number, the pubsub
    ServiceIdentity's member): granted as documented, the subscription passes, with the checkout's
    environment and with the wheel installed alone, on every pulumi-gcp major the team may pin (the wheel
    alone once recorded 'service-None@...' and rejected it)."""
    root = team_project(tmp_path, team_environment(ENVIRONMENTS[name], library))
    (root / "__main__.py").write_text(textwrap.dedent(DEAD_LETTERING).lstrip())
    if tool == "wheel":
        _, bin_dir = installed_tool()
        done = subprocess.run([str(bin_dir / "pubsubguard"), "check", "--format", "json", "--unknowns", "fail"],
                              cwd=root, capture_output=True, text=True, timeout=300,
                              env=user_env(tmp_path / "cache"))
    else:
        done = run(root, "check", "--format", "json", "--unknowns", "fail")
    document = json.loads(done.stdout)
    assert done.returncode == 0, (done.stderr, [v["message"] for v in document["violations"] if v["level"] == "mandatory"],
                                  document["unjudged"])
    assert [e["policy"] for e in document["unjudged"]] == []
