"""What a new user met in `pubsubguard check`'s output (issue 45, item 7): each defect reproduced here
before it was fixed. SARIF rules carry their fact and fix in their own help (no path into pubsubguard's
repository), the text format gives every resource its own file:line, a failing program is said once,
and a misspelt option points at the command's own help."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from support.programs import pubsubguard, python_line, python_twin

FOUR_EXPIRING = """
    import pulumi_gcp as gcp

    orders = gcp.pubsub.Topic("orders", name="orders")
    gcp.pubsub.Subscription("orders-a", name="orders-a", topic=orders.id)
    gcp.pubsub.Subscription("orders-b", name="orders-b", topic=orders.id)
    gcp.pubsub.Subscription("orders-c", name="orders-c", topic=orders.id)
    gcp.pubsub.Subscription("orders-d", name="orders-d", topic=orders.id)
"""


def test_sarif_rules_carry_their_fact_and_fix_in_their_own_help(tmp_path):
    root = python_twin(tmp_path, FOUR_EXPIRING)
    done = pubsubguard(root, "check", "-s", "dev", "--format", "sarif")
    assert done.returncode == 0, done.stderr
    rules = {rule["id"]: rule for rule in json.loads(done.stdout)["runs"][0]["tool"]["driver"]["rules"]}
    for rule in rules.values():
        assert "docs/" not in json.dumps(rule), rule["id"]  # a path in pubsubguard's repository, not the user's
        assert rule["help"]["text"] != rule["fullDescription"]["text"], rule["id"]
    push = rules["no-exactly-once-on-push"]["help"]
    assert "push does not support it" in push["text"]  # the fact
    assert "Prohibits exactly-once delivery on push subscriptions" in push["text"]  # the fix
    assert "**" in push["markdown"]


def test_text_gives_every_resource_of_a_repeated_advisory_its_own_line(tmp_path):
    root = python_twin(tmp_path, FOUR_EXPIRING)
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 0, done.stderr
    for name in ("orders-a", "orders-b", "orders-c", "orders-d"):
        line = python_line(root, f'"{name}"')
        assert f"__main__.py:{line}: advisory  subscription-expires:" in done.stdout, (name, done.stdout)
    assert "and 1 more" not in done.stdout


def test_a_failing_program_is_said_once_under_a_header_that_counts_right(tmp_path):
    root = python_twin(tmp_path, """
        import pulumi_gcp as gcp

        raise ValueError("no estate file")
    """)
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2
    both = done.stdout + done.stderr
    assert both.count("no estate file") == 1, both
    assert "1 resources" not in done.stdout
    [line] = done.stderr.strip().splitlines()
    assert "__main__.py:3: ValueError: no estate file" in line


def test_a_misspelt_option_points_at_the_commands_own_help(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--frmat", "sarif"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "--frmat" in line and "`pubsubguard check --help`" in line, line
    assert "--format" in line  # the option meant


UNKNOWN_ENDPOINTS = """
    import pulumi_gcp as gcp

    handler = gcp.cloudfunctions.Function("handler", runtime="python312", entry_point="main",
                                          event_trigger={"event_type": "e", "resource": "r"},
                                          source_archive_bucket="b", source_archive_object="o")
    orders = gcp.pubsub.Topic("orders", name="orders")
    oidc = {"service_account_email": "push@proj-a.iam.gserviceaccount.com"}
    gcp.pubsub.Subscription("orders-a", name="orders-a", topic=orders.id, expiration_policy={"ttl": ""},
                            push_config={"push_endpoint": handler.https_trigger_url, "oidc_token": oidc})
    gcp.pubsub.Subscription("orders-b", name="orders-b", topic=orders.id, expiration_policy={"ttl": ""},
                            push_config={"push_endpoint": handler.https_trigger_url, "oidc_token": oidc})
    gcp.pubsub.Subscription("orders-c", name="orders-c", topic=orders.id, expiration_policy={"ttl": ""},
                            push_config={"push_endpoint": handler.https_trigger_url, "oidc_token": oidc})
    gcp.pubsub.Subscription("orders-d", name="orders-d", topic=orders.id, expiration_policy={"ttl": ""},
                            push_config={"push_endpoint": handler.https_trigger_url, "oidc_token": oidc})
    gcp.pubsub.Subscription("orders-e", name="orders-e", topic=orders.id, expiration_policy={"ttl": ""},
        dead_letter_policy={"dead_letter_topic": "projects/shared/topics/dlq", "max_delivery_attempts": 5})
"""

NOT_JUDGED_ROW = re.compile(r"^  (?P<file>[^:]+):(?P<line>\d+): (?P<policy>[a-z0-9-]+)(?P<mandatory> \(mandatory\))? "
                            r"on (?P<type>\S+) (?P<name>\S+): (?P<inputs>.+)$")


def not_judged_rows(text: str) -> list[re.Match]:
    """The rows of the text format's "Not judged" section."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Not judged"))
    rows = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        rows.append(NOT_JUDGED_ROW.match(line))
    assert all(rows), lines[start:]
    return rows


def test_not_judged_in_the_text_names_every_resource_with_its_blocking_inputs_as_the_json_does(tmp_path):
    """Issue 45: "Not judged" is exact. The text format folded one rule's resources ("push-endpoint-https on
    orders-a, orders-b, orders-c and 1 more") and named no input; now each (rule, resource) has its own row
    at the resource's file:line with the inputs that blocked it and where their unknowns come from: the
    JSON's `unjudged` list, row for row."""
    root = python_twin(tmp_path, UNKNOWN_ENDPOINTS)
    text = pubsubguard(root, "check", "-s", "dev")
    assert text.returncode == 1, text.stderr
    document = json.loads(pubsubguard(root, "check", "-s", "dev", "--format", "json").stdout)
    rows = not_judged_rows(text.stdout)
    shown = sorted((row["file"], int(row["line"]), row["policy"], row["name"],
                    tuple(re.sub(r" \(from .*\)$", "", part) for part in row["inputs"].split("; "))) for row in rows)
    listed = sorted((e["file"], e["line"], e["policy"], e["resource_name"], tuple(e["properties"]))
                    for e in document["unjudged"])
    assert shown == listed
    pushing = {row["name"]: row for row in rows if row["policy"] == "push-endpoint-https"}
    assert sorted(pushing) == ["orders-a", "orders-b", "orders-c", "orders-d"]
    for name, row in pushing.items():
        assert int(row["line"]) == python_line(root, f'"{name}"')
        assert row["inputs"] == "pushConfig.pushEndpoint (from Function handler.httpsTriggerUrl)"
        assert row["mandatory"] == (" (mandatory)" if document["levels"]["push-endpoint-https"] == "mandatory" else None)
    assert "1 more" not in text.stdout
    header = next(line for line in text.stdout.splitlines() if line.startswith("Not judged"))
    assert "2 rules on 5 resources" in header
