"""Pulumi ESC environments a stack file imports (`environment:`, issue 64). Offline nothing can open them:
the first screen says which the stack imports and that their values were not read; a key only they could
supply fails in one line naming the key and the environments (never Pulumi's advice to `pulumi config
set` a value that lives in ESC); `--environment-values FILE` reads what `esc open ORG/ENV --format json`
prints, its `pulumiConfig` merged under the stack file's own values, every value kept secret."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from support.programs import line_of, node_project, pubsubguard

PROGRAM = """
    import pulumi
    import pulumi_gcp as gcp

    config = pulumi.Config()
    gcp.pubsub.Topic("orders", name=config.require("ordersTopic"), labels={"region": config.get("region") or "none"})
"""
ESC_OPEN = {  # the shape of `esc open acme/pubsub-dev --format json`: the environment's values, evaluated
    "pulumiConfig": {"ordersTopic": "orders-from-esc-7f3a", "region": "europe-west4", "gcp:project": "proj-esc"},
    "environmentVariables": {"GOOGLE_PROJECT": "proj-esc"},
}


UNREAD_LINE = ("environments: acme/common, acme/pubsub-dev, imported by Pulumi.dev.yaml: their values were NOT read "
               "(offline nothing opens them: a key the stack file does not set is unknown here, and missing where "
               "the program requires it; --environment-values FILE gives them)")
GIVEN_LINE = ("environments: acme/pubsub-dev, their values from --environment-values esc.json (every value kept "
              "secret; a value the program reads from them as text is unknown to the rules)")


def project(tmp_path: Path, stack: dict, program: str = PROGRAM, config: dict | None = None) -> Path:
    root = tmp_path / "team"
    root.mkdir(parents=True)
    runtime = {"name": "python", "options": {"virtualenv": sys.prefix}}
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": runtime, **({"config": config} if config else {})}))
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    (root / "__main__.py").write_text(textwrap.dedent(program).lstrip())
    return root


def check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", "check", "-s", "dev", *args], cwd=root,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def failed(root: Path, *args: str) -> str:
    """The check's one line on stderr (exit 2)."""
    done = check(root, *args)
    assert done.returncode == 2, done.stdout
    [line] = done.stderr.strip().splitlines()
    return line


def test_a_key_only_an_environment_supplies_is_one_line_naming_it_and_the_environments(tmp_path):
    root = project(tmp_path, {"environment": ["acme/common", "acme/pubsub-dev"], "config": {"gcp:project": "proj-a"}})
    done = check(root)
    assert done.returncode == 2
    assert done.stdout.splitlines()[2] == UNREAD_LINE
    [line] = done.stderr.strip().splitlines()
    assert line == (
        "pubsubguard check: the program failed: configuration value 'team:ordersTopic' is not in Pulumi.dev.yaml: "
        "only the stack's environments acme/common, acme/pubsub-dev (imported by Pulumi.dev.yaml; not read offline: "
        "give their values with --environment-values FILE, what `esc open ORG/ENV --format json` prints) could supply it")


def test_the_definition_form_and_a_declared_key_name_the_environments(tmp_path):
    stack = {"environment": {"imports": ["acme/common", {"acme/pubsub-dev": {"merge": False}}]},
             "config": {"gcp:project": "proj-a"}}
    root = project(tmp_path, stack, config={"ordersTopic": {"type": "string"}})
    assert failed(root) == (
        "pubsubguard check: Pulumi.dev.yaml: configuration value 'team:ordersTopic' (declared in Pulumi.yaml without a "
        "default) is not in the stack file: only its environments acme/common, acme/pubsub-dev could supply it, and "
        "offline their values are not read (give them with --environment-values FILE, what `esc open ORG/ENV "
        "--format json` prints)")


def test_environment_values_merge_under_the_stack_files_own_and_stay_secret(tmp_path):
    root = project(tmp_path, {"environment": ["acme/pubsub-dev"], "config": {"gcp:project": "proj-a",
                                                                            "team:region": "europe-west1"}})
    (root / "esc.json").write_text(json.dumps(ESC_OPEN))
    done = check(root, "--environment-values", "esc.json", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["environments"] == {"imports": ["acme/pubsub-dev"], "values_from": "esc.json"}
    text = check(root, "--environment-values", "esc.json")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[2] == GIVEN_LINE
    assert ("__main__.py:5: pubsub-names-valid (mandatory) on Topic orders: name (from config team:ordersTopic, set "
            "by environment acme/pubsub-dev)") in text.stdout  # read from the environment: unknown to the rules
    for shown in (done.stdout, done.stderr, text.stdout, text.stderr):
        assert "orders-from-esc-7f3a" not in shown and "europe-west4" not in shown
    plan = subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "dev"], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert plan.returncode == 2  # without the environment's values the program cannot run


def test_bad_environment_input_is_one_line_before_the_program_runs(tmp_path):
    root = project(tmp_path, {"environment": ["acme/pubsub-dev"], "config": {"gcp:project": "proj-a"}})
    (root / "broken.json").write_text("{not json")
    (root / "list.json").write_text(json.dumps({"pulumiConfig": ["ordersTopic"]}))
    assert check(root, "--environment-values", "broken.json").stderr.strip().startswith(
        "pubsubguard check: --environment-values broken.json: not JSON (")
    assert check(root, "--environment-values", "list.json").stderr.strip() == (
        "pubsubguard check: --environment-values list.json: pulumiConfig: expected an object of configuration keys "
        "to values, got a list")
    bad = project(tmp_path / "bad", {"environment": 5})
    assert check(bad).stderr.strip() == (
        "pubsubguard check: Pulumi.dev.yaml: environment: expected a list of environment names (`environment: "
        "[org/env]`) or a mapping with `imports:`, got 5")
    plain = project(tmp_path / "plain", {"config": {"gcp:project": "proj-a"}})
    (plain / "esc.json").write_text(json.dumps(ESC_OPEN))
    assert check(plain, "--environment-values", "esc.json").stderr.strip() == (
        "pubsubguard check: --environment-values esc.json: Pulumi.dev.yaml imports no environment (its "
        "`environment:` lists the ones whose values this gives)")


def test_a_typescript_program_missing_a_key_an_environment_supplies(tmp_path):
    root = node_project(tmp_path, """
        const config = new pulumi.Config();
        new gcp.pubsub.Topic("orders", { name: config.require("ordersTopic") });
        """)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"environment": ["acme/pubsub-dev"],
                                                          "config": {"gcp:project": "proj-a"}}))
    done = check(root)
    assert done.returncode == 2
    line = next(n for n, text in enumerate((root / "index.ts").read_text().splitlines(), 1) if "config.require" in text)
    assert done.stderr.strip().splitlines() == [
        f"pubsubguard check: the program failed: index.ts:{line}: configuration value 'team-ts:ordersTopic' is not in "
        "Pulumi.dev.yaml: only the stack's environment acme/pubsub-dev (imported by Pulumi.dev.yaml; not read offline: "
        "give their values with --environment-values FILE, what `esc open ORG/ENV --format json` prints) could supply it"]
    (root / "esc.json").write_text(json.dumps({"pulumiConfig": {"ordersTopic": "orders-from-esc-7f3a"}}))
    given = check(root, "--environment-values", "esc.json")
    assert given.returncode == 0, given.stderr
    assert "orders-from-esc-7f3a" not in given.stdout + given.stderr


PUSH = """
    import pulumi
    import pulumi_gcp as gcp

    config = pulumi.Config()
    topic = gcp.pubsub.Topic("orders", name="orders", message_retention_duration=config.require("retention"))
    gcp.pubsub.Subscription("orders-push", name="orders-push", topic=topic.id, expiration_policy={"ttl": ""},
                            push_config={"push_endpoint": config.get("pushEndpoint", "https://push.acme.example/hook"),
                                         "oidc_token": {"service_account_email": "push@proj-a.iam.gserviceaccount.com"}})
"""
TWO = {"environment": ["acme/common", "acme/pubsub-dev"], "config": {"gcp:project": "proj-a"}}


def test_a_value_an_unread_environment_may_set_is_unknown_with_its_key_and_environments(tmp_path):
    """`config.get(key, default)` and a key with only the project's default: the deploy reads what the environments
    set, if they set it; offline the default would be judged in its place. Unknown instead, naming the key and the
    environments, and `--unknowns fail` closes the gate on the mandatory rule it keeps from deciding."""
    root = project(tmp_path, TWO, program=PUSH, config={"retention": "600s"})
    text = check(root)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[2] == UNREAD_LINE
    origin = "which environments acme/common, acme/pubsub-dev may set: not read offline"
    assert [line for line in text.stdout.splitlines() if line.startswith("  ")] == [
        f"  __main__.py:5: durations-api-format (mandatory) on Topic orders: messageRetentionDuration (from config "
        f"team:retention, {origin})",
        f"  __main__.py:6: push-endpoint-https (mandatory) on Subscription orders-push: pushConfig.pushEndpoint (from "
        f"config team:pushEndpoint, {origin})",
        f"  __main__.py:5: retention-in-range (mandatory) on Topic orders: messageRetentionDuration (from config "
        f"team:retention, {origin})"]
    document = json.loads(check(root, "--format", "json").stdout)
    (entry,) = [e for e in document["unjudged"] if e["policy"] == "push-endpoint-https"]
    assert entry["unknown_inputs"] == {"pushConfig.pushEndpoint": [
        {"config": "team:pushEndpoint", "environments": ["acme/common", "acme/pubsub-dev"], "values_from": None}]}
    plan = json.loads(subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "dev"], cwd=root,
                                     capture_output=True, text=True, timeout=300, check=True).stdout)
    (topic,) = [r for r in plan["resources"] if r["name"] == "orders"]
    assert topic["unknowns"] == {"messageRetentionDuration": [
        {"config": "team:retention", "environments": ["acme/common", "acme/pubsub-dev"], "values_from": None}]}
    closed = check(root, "--unknowns", "fail")
    assert closed.returncode == 1, closed.stderr
    assert closed.stdout.rstrip().splitlines()[-1] == (
        "REJECTED: 0 mandatory, 1 advisory violation, 3 mandatory not judged (--unknowns fail).")
    plain = project(tmp_path / "plain", {"config": {"gcp:project": "proj-a"}}, program=PUSH, config={"retention": "600s"})
    assert json.loads(check(plain, "--format", "json").stdout)["unjudged"] == []  # without environments: judged


def test_a_typed_read_an_unread_environment_may_set_is_one_line(tmp_path):
    program = PUSH.replace('config.require("retention")', 'f"{config.get_int(\'retentionSeconds\') or 600}s"')
    root = project(tmp_path, TWO, program=program)
    assert failed(root) == (
        "pubsubguard check: the program failed: __main__.py:5: configuration value 'team:retentionSeconds' is read as "
        "an integer, and offline its value is unknown: Pulumi.dev.yaml does not set it, and the stack's environments "
        "acme/common, acme/pubsub-dev (imported by Pulumi.dev.yaml; not read offline: give their values with "
        "--environment-values FILE, what `esc open ORG/ENV --format json` prints) may")
    (root / "esc.json").write_text(json.dumps({"pulumiConfig": {"retentionSeconds": 900}}))
    given = check(root, "--environment-values", "esc.json", "--format", "json")
    assert given.returncode == 0, given.stderr  # given, a typed read is the value given: the program computes with it
    assert "900s" not in given.stdout


def test_plan_takes_the_environment_values_as_check_does_and_keeps_them_secret(tmp_path):
    program = """
        import pulumi
        import pulumi_gcp as gcp

        config = pulumi.Config()
        for name in config.get_object("topics") or ["fallback"]:
            gcp.pubsub.Topic(name, name=name, labels={"owner": config.get("owner") or "none"})
    """
    root = project(tmp_path, {"environment": ["acme/pubsub-dev"], "config": {"team:owner": "orders-team"}},
                   program=program)
    (root / "esc.json").write_text(json.dumps({"pulumiConfig": {
        "topics": ["orders-from-esc-7f3a"], "gcp:project": "proj-esc-91c2", "owner": "someone-else"}}))
    helps = [subprocess.run([sys.executable, "-m", "pubsubguard", command, "--help"], capture_output=True, text=True,
                            check=True).stdout for command in ("plan", "check")]
    said = [" ".join(h.split("\n  --environment-values FILE", 1)[1].split("\n\n", 1)[0].split("\n  -", 1)[0].split())
            for h in helps]
    assert said[0] == said[1] and "every value is kept secret" in said[0]
    unread = subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "dev"], cwd=root, capture_output=True,
                            text=True, timeout=300)
    assert unread.returncode == 2  # no topics: the program's get_object is unknown without the environment's values
    assert unread.stderr.splitlines()[0] == (
        "plan: environments: acme/pubsub-dev, imported by Pulumi.dev.yaml: their values were NOT read (offline nothing "
        "opens them: a key the stack file does not set is unknown here, and missing where the program requires it; "
        "--environment-values FILE gives them)")
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "dev", "--environment-values", "esc.json",
                           "--out", "plan.json"], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "plan: " + GIVEN_LINE
    written = (root / "plan.json").read_text()
    for value in ("orders-from-esc-7f3a", "proj-esc-91c2"):
        assert value not in written + done.stderr
    plan = json.loads(written)
    assert plan["secrets"] == "redacted" and plan["gcp_project"] == "[secret]"
    (topic,) = [r for r in plan["resources"] if r["type"] == "gcp:pubsub/topic:Topic"]
    assert topic["inputs"]["labels"] == {"owner": "orders-team"}  # the stack file's own value wins, known
    assert topic["inputs"]["name"] == {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                                       "value": "[secret]"}
    judged = check(root, "--plan", "plan.json", "--format", "json")
    assert judged.returncode == 0, judged.stderr  # read back, what was kept secret is unknown, never "[secret]"
    document = json.loads(judged.stdout)
    assert [e["properties"] for e in document["unjudged"] if e["policy"] == "pubsub-names-valid"] == [["name"]]
    shown = subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "dev", "--environment-values",
                            "esc.json", "--show-secrets"], cwd=root, capture_output=True, text=True, timeout=300)
    assert json.loads(shown.stdout)["gcp_project"] == "proj-esc-91c2"


def test_a_typescript_program_reads_what_an_environment_sets_or_may_set_as_unknown(tmp_path):
    root = node_project(tmp_path, """
        const config = new pulumi.Config();
        const topic = new gcp.pubsub.Topic("orders", { name: config.get("ordersTopic") ?? "orders" });
        new gcp.pubsub.Subscription("orders-push", { name: "orders-push", topic: topic.id, expirationPolicy: { ttl: "" },
            pushConfig: { pushEndpoint: config.get("pushEndpoint") ?? "https://push.acme.example/hook",
                          oidcToken: { serviceAccountEmail: "push@proj-a.iam.gserviceaccount.com" } } });
        """)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(TWO))
    unread = pubsubguard(root, "check", "-s", "dev")
    assert unread.returncode == 0, unread.stderr
    origin = "which environments acme/common, acme/pubsub-dev may set: not read offline"
    topic, subscription = line_of(root, '"orders", {'), line_of(root, '"orders-push", {')
    assert [line for line in unread.stdout.splitlines() if line.startswith("  ")] == [
        f"  index.ts:{topic}: pubsub-names-valid (mandatory) on Topic orders: name (from config team-ts:ordersTopic, "
        f"{origin})",
        f"  index.ts:{subscription}: push-endpoint-https (mandatory) on Subscription orders-push: pushConfig.pushEndpoint "
        f"(from config team-ts:pushEndpoint, {origin})"]
    (root / "esc.json").write_text(json.dumps({"pulumiConfig": {"ordersTopic": "orders-from-esc-7f3a"}}))
    given = pubsubguard(root, "check", "-s", "dev", "--environment-values", "esc.json", "--format", "json")
    assert given.returncode == 0, given.stderr
    assert "orders-from-esc-7f3a" not in given.stdout + given.stderr
    assert [(e["policy"], e["unknown_inputs"]) for e in json.loads(given.stdout)["unjudged"]] == [  # the endpoint:
        ("pubsub-names-valid", {"name": [{"config": "team-ts:ordersTopic", "values_from": "esc.json",  # judged
                                          "environments": ["acme/common", "acme/pubsub-dev"]}]})]
    source = (root / "index.ts").read_text()
    (root / "index.ts").write_text(source.replace('expirationPolicy: { ttl: "" },',
                                                  'expirationPolicy: { ttl: "" }, ackDeadlineSeconds: config.getNumber("ack") ?? 60,'))
    [line] = pubsubguard(root, "check", "-s", "dev").stderr.strip().splitlines()
    assert line == (
        f"pubsubguard check: the program failed: index.ts:{subscription}: configuration value 'team-ts:ack' is read as "
        "a number, and offline its value is unknown: Pulumi.dev.yaml does not set it, and the stack's environments "
        "acme/common, acme/pubsub-dev (imported by Pulumi.dev.yaml; not read offline: give their values with "
        "--environment-values FILE, what `esc open ORG/ENV --format json` prints) may")


def test_the_values_file_is_neither_readable_by_the_program_nor_shown(tmp_path):
    """What `esc open --format json` prints holds more than the pulumiConfig the program is given (its
    environmentVariables may hold the cloud credentials the environment opens): the confined program cannot
    read the file, at its path or in the project's throwaway copy, and every value of it is masked."""
    program = """
        import os
        import pulumi_gcp as gcp

        for name, path in (("relative", "esc.json"), ("absolute", os.path.abspath("esc.json"))):
            try:
                text = open(path).read()
            except OSError:
                text = "unreadable"
            gcp.pubsub.Topic(name, name=text or "empty")
            print(text)
    """
    root = project(tmp_path, {"environment": ["acme/pubsub-dev"], "config": {"gcp:project": "proj-a"}}, program=program)
    token = "ya29.esc-opened-token-5d1e"
    (root / "esc.json").write_text(json.dumps({"pulumiConfig": {"region": "europe-west4"},
                                               "environmentVariables": {"GOOGLE_OAUTH_ACCESS_TOKEN": token}}))
    plan = subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "dev", "--environment-values", "esc.json"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr
    names = {r["name"]: r["inputs"]["name"] for r in json.loads(plan.stdout)["resources"] if r["custom"]}
    assert names == {"relative": "unreadable", "absolute": "unreadable"}
    for form in ("text", "json", "sarif"):
        done = check(root, "--environment-values", "esc.json", "--format", form)
        assert done.returncode in (0, 1), done.stderr
        assert token not in done.stdout + done.stderr and "europe-west4" not in done.stdout + done.stderr
    assert (root / "esc.json").read_text().count(token) == 1  # the file itself untouched
