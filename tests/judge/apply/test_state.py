"""Any team's deployed stack (issue 25): a `pulumi stack export` read as the declared estate
(`pubsubguard.core.state`), a team's plan rehearsed on the emulator as a deploy would resolve it
(`pubsubguard.core.rehearsal`), bad input refused before anything exists, and the verification job judging
the guarantees under the deployed names, with drift since deploy."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from pubsubguard import cli
from pubsubguard.core import declared, rehearsal, state
from pubsubguard.core.plan import UNKNOWN, make_plan
from support import ROOT

EXAMPLE = ROOT / "examples" / "team-orders"
STATE = EXAMPLE / "state.json"
PROJECT = "team-orders-dev"
CIPHERTEXT = json.loads(STATE.read_text())["deployment"]["resources"][0]["outputs"]["ops_webhook"]["ciphertext"]
AUTONAME = re.compile(r"[a-z-]+-[0-9a-f]{7}")


def _state_in(project: str, tmp_path: Path) -> Path:
    """The example state as deployed to another project (a fresh one: nothing of it exists anywhere)."""
    copy = tmp_path / "state.json"
    copy.write_text(STATE.read_text().replace(PROJECT, project))
    return copy


def _topics_of(project: str) -> list[str]:
    from google.cloud import pubsub_v1

    return [t.name for t in pubsub_v1.PublisherClient().list_topics(request={"project": f"projects/{project}"})]


# --- Reading a state ----------------------------------------------------------------------------------
def test_the_state_is_read_as_deployed_names_ids_and_project():
    plan = state.load(STATE, None, EXAMPLE)
    everything = declared.estate(plan)
    assert everything.project == PROJECT and everything.stack == "dev"
    assert set(everything.topics) == {"orders-6a1f3c2", "orders-dlq-0c9e4b1"}
    assert set(everything.subscriptions) == {"orders-ordered-b81e3c4", "orders-exactly-once-3f7a9d2", "orders-dlq-drain-5d2a7f0"}
    exactly_once = everything.subscriptions["orders-exactly-once-3f7a9d2"]
    assert exactly_once.topic_path == f"projects/{PROJECT}/topics/orders-6a1f3c2"
    assert exactly_once.dead_letter_topic_path == f"projects/{PROJECT}/topics/orders-dlq-0c9e4b1"
    assert exactly_once.exactly_once and exactly_once.max_delivery_attempts == 5 and exactly_once.ack_deadline_s == 60
    # the labels the resource carries on the service: the provider's attribution label included
    assert everything.topics["orders-6a1f3c2"].labels == {"team": "orders", "goog-pulumi-provisioned": "true"}
    # the service's defaults the state holds are declared values now (drift since deploy compares them)
    assert everything.subscriptions["orders-ordered-b81e3c4"].expiration_ttl == 31 * 86400
    assert everything.source["kind"] == "state" and everything.source["deployed_at"] == "2026-11-20T09:14:03.587251Z"
    assert state.describe(everything.source) == f"state {STATE} (stack dev, deployed 2026-11-20T09:14:03.587251Z)"


def test_the_stack_view_of_a_team_program_leaves_out_the_dead_letter_drain():
    stack = declared.estate(state.load(STATE, None, EXAMPLE)).declared_by_stack()
    assert set(stack.subscriptions) == {"orders-ordered-b81e3c4", "orders-exactly-once-3f7a9d2"}
    assert set(stack.topics) == {"orders-6a1f3c2"}
    drain = f"projects/{PROJECT}/subscriptions/orders-dlq-drain-5d2a7f0"
    assert stack.subscriptions["orders-exactly-once-3f7a9d2"].dead_letter_drain == drain
    assert stack.dead_letter_drains == {drain: f"projects/{PROJECT}/topics/orders-dlq-0c9e4b1"}


def test_secrets_are_never_read_and_their_place_is_recorded():
    plan = state.load(STATE, None, EXAMPLE)
    text = json.dumps(plan)
    assert CIPHERTEXT not in text and "ciphertext" not in text
    assert plan["state"]["secrets_skipped"] == ["stack outputs.ops_webhook"]


def test_resources_pending_deletion_and_references_are_read_as_a_deploy_left_them(tmp_path):
    document = json.loads(STATE.read_text())
    resources = document["deployment"]["resources"]
    old = json.loads(json.dumps(next(r for r in resources if r["urn"].endswith("::orders-ordered"))))
    old.update(delete=True, id=old["id"].replace("b81e3c4", "0000000"))
    old["outputs"]["name"] = "orders-ordered-0000000"
    resources.append(old)  # the replaced half of a replacement, still in the state
    iam = next(r for r in resources if r["type"].endswith("TopicIAMMember"))
    iam["outputs"]["topic"] = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e",
                               "urn": "urn:x", "id": f"projects/{PROJECT}/topics/orders-dlq-0c9e4b1"}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(document))
    plan = state.load(path, None, EXAMPLE)
    names = [r["inputs"].get("name") for r in plan["resources"] if r["type"] == "gcp:pubsub/subscription:Subscription"]
    assert "orders-ordered-0000000" not in names and "orders-ordered-b81e3c4" in names
    topic_iam = next(r for r in plan["resources"] if r["type"].endswith("TopicIAMMember"))
    assert topic_iam["inputs"]["topic"] == f"projects/{PROJECT}/topics/orders-dlq-0c9e4b1"


def test_an_interrupted_deploy_is_said(tmp_path):
    document = json.loads(STATE.read_text())
    document["deployment"]["pending_operations"] = [{"resource": document["deployment"]["resources"][3], "type": "creating"}]
    path = tmp_path / "state.json"
    path.write_text(json.dumps(document))
    said = state.caveats(state.load(path, None, EXAMPLE)["state"])
    assert said[0].startswith(f"the state {path} records 1 operation(s) pending: a `pulumi up` was interrupted")
    assert state.caveats(state.load(STATE, None, EXAMPLE)["state"]) == [
        "1 secret value(s) of the state were left unread (stack outputs.ops_webhook): nothing judged here depends on them"]


@pytest.mark.parametrize("layout", ["project", "project-gzip", "legacy"])
def test_the_stack_alone_finds_a_file_backends_checkpoint(layout, tmp_path, monkeypatch):
    deployment = json.loads(STATE.read_text())["deployment"]
    checkpoint = json.dumps({"version": 3, "checkpoint": {"stack": "dev", "config": {}, "latest": deployment}}).encode()
    stacks = tmp_path / "backend" / ".pulumi" / "stacks"
    path = {"project": stacks / "team-orders" / "dev.json", "project-gzip": stacks / "team-orders" / "dev.json.gz",
            "legacy": stacks / "dev.json"}[layout]
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(checkpoint) if layout.endswith("gzip") else checkpoint)
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'backend'}")
    plan = declared.plan_from(None, "dev", EXAMPLE, state="")
    assert plan["state"]["location"] == str(path)
    assert "orders-6a1f3c2" in declared.estate(plan).topics
    with pytest.raises(state.StateError, match=r"--state with --stack prod: no checkpoint at .*/team-orders/prod.json"):
        declared.plan_from(None, "prod", EXAMPLE, state="")


def test_a_state_of_another_stack_than_stack_is_refused():
    with pytest.raises(state.StateError, match=r"holds stack 'dev', not --stack 'prod'"):
        declared.plan_from(None, "prod", EXAMPLE, state=STATE)
    with pytest.raises(declared.UserError, match="--plan and --state: give one of them"):
        declared.plan_from(STATE, None, EXAMPLE, state=STATE)


# --- Bad input: one line, exit 2, nothing created ------------------------------------------------------
def _another_version(path: Path) -> None:
    document = json.loads(path.read_text())
    document["version"] = 4
    path.write_text(json.dumps(document))


def _truncated(path: Path) -> None:
    path.write_text(path.read_text()[:5000])


def _no_pubsub(path: Path) -> None:
    document = json.loads(path.read_text())
    document["deployment"]["resources"] = [
        r for r in document["deployment"]["resources"] if not r["type"].startswith("gcp:pubsub/")
    ] + [{"urn": "urn:pulumi:dev::team-orders::gcp:storage/bucket:Bucket::assets", "custom": True, "id": "assets-1",
          "type": "gcp:storage/bucket:Bucket", "outputs": {"name": "assets-1"}}]
    path.write_text(json.dumps(document))


BAD = {
    "another version": (_another_version, [], r"--state \S+state.json: version: expected 3 \(the deployment format of Pulumi 3.x\), got 4"),
    "truncated": (_truncated, [], r"--state \S+state.json: truncated at line \d+ column \d+ .*; expected the file `pulumi stack export"),
    "no pubsub": (_no_pubsub, [], r"--state \S+state.json: no Pub/Sub topic or subscription in this deployment \(gcp:storage/bucket:Bucket ×1\)"),
    "another project": (lambda path: None, ["--project", "someone-elses"],
                        r"--state \S+state.json: deployed to project bad-input-\w+, not --project someone-elses"),
}


@pytest.mark.emulator
@pytest.mark.parametrize("command, case", [("verify", case) for case in BAD] + [
    (command, case) for command in ("apply", "run") for case in BAD if case != "another project"])  # no --project there
def test_bad_state_is_one_line_exit_2_and_nothing_is_created(command, case, emulator, tmp_path, capsys):
    damage, extra, says = BAD[case]
    project = f"bad-input-{uuid.uuid4().hex[:8]}"
    path = _state_in(project, tmp_path)
    damage(path)
    argv = {
        "verify": ["verify", "--state", str(path), "--target", "emulator", "--report", str(tmp_path / "report"), *extra],
        "apply": ["apply", "--emulator", "--state", str(path), "--cwd", str(tmp_path)],
        "run": ["run", "--state", str(path), "--cwd", str(tmp_path), "--out", str(tmp_path / "report")],
    }[command]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.search(says, lines[0]), err
    assert "Traceback" not in err and CIPHERTEXT not in err
    assert _topics_of(project) == [] and _topics_of("someone-elses") == []
    assert not (tmp_path / "report").exists()


# --- A team's plan rehearsed on the emulator ----------------------------------------------------------
@pytest.fixture(scope="module")
def team_plan() -> dict:
    return make_plan("dev", EXAMPLE, python=sys.executable)  # its `venv` is what `pulumi install` would make


def test_the_offline_plan_of_a_team_program_holds_what_only_a_deploy_decides(team_plan):
    subscription = next(r for r in team_plan["resources"] if r["name"] == "orders-ordered")
    assert "name" not in subscription["inputs"] and subscription["inputs"]["topic"] == UNKNOWN
    assert rehearsal.needs_deploy(team_plan)


def test_a_rehearsal_resolves_autonames_and_references_as_a_deploy_would(team_plan):
    resolved, chosen = rehearsal.resolve(team_plan, {}, assign=True)
    by_name = {r["name"]: r for r in resolved["resources"] if r.get("custom")}  # a component is named "orders" too
    assert set(chosen.values()) == {by_name[n]["inputs"]["name"] for n in
                                    ("orders", "orders-dlq", "orders-dlq-drain", "orders-ordered", "orders-exactly-once")}
    for name in ("orders", "orders-dlq", "orders-ordered"):
        assert AUTONAME.fullmatch(by_name[name]["inputs"]["name"]) and by_name[name]["inputs"]["name"].startswith(f"{name}-")
    topic = f"projects/{PROJECT}/topics/{by_name['orders']['inputs']['name']}"
    dead_letter_topic = f"projects/{PROJECT}/topics/{by_name['orders-dlq']['inputs']['name']}"
    assert by_name["orders-ordered"]["inputs"]["topic"] == topic
    assert by_name["orders-exactly-once"]["inputs"]["deadLetterPolicy"] == {"deadLetterTopic": dead_letter_topic,
                                                                              "maxDeliveryAttempts": 5}
    assert by_name["orders-dlq-publisher"]["inputs"]["topic"] == dead_letter_topic
    assert by_name["orders-exactly-once-subscriber"]["inputs"]["subscription"] == (
        f"projects/{PROJECT}/subscriptions/{by_name['orders-exactly-once']['inputs']['name']}")
    assert UNKNOWN not in json.dumps([r["inputs"] for r in resolved["resources"] if r.get("custom")])
    again, _ = rehearsal.resolve(team_plan, {}, assign=True)
    assert {r["inputs"].get("name") for r in again["resources"]} != {r["inputs"].get("name") for r in resolved["resources"]}


def test_on_google_cloud_a_plan_cannot_know_the_deployed_names(team_plan, tmp_path):
    rehearsal.record(rehearsal.resolve(team_plan, {}, assign=True)[0], tmp_path)  # an emulator rehearsal exists
    with pytest.raises(declared.PlanValueError, match=r"plan.json: orders, .*name chosen at deploy \(autonamed\); "
                                                      r"verify the deployed stack with --state"):
        rehearsal.for_verify(team_plan, tmp_path, "gcp", "plan.json")
    resolved, names_from, _ = rehearsal.for_verify(team_plan, tmp_path, "emulator", "plan.json")
    assert names_from == str(rehearsal.record_path(tmp_path, "dev")) and not rehearsal.autonamed(resolved)


def test_a_state_is_read_through_the_storage_layer(gcs):
    from pubsubguard.core import storage

    uri = "gs://pubsubguard-test/deployments/team-orders/state.json"
    storage.write_bytes(uri, STATE.read_bytes())
    plan = state.load(uri, None, EXAMPLE)
    assert plan["state"]["location"] == uri and "orders-ordered-b81e3c4" in declared.estate(plan).subscriptions
    with pytest.raises(state.StateError, match=r"--state gs://pubsubguard-test/nothing.json: no such file"):
        state.load("gs://pubsubguard-test/nothing.json", None, EXAMPLE)


def test_a_rehearsal_recorded_with_the_sdk_mocks_urns_keeps_its_names(tmp_path):
    """Before the plan gave the engine's URNs it gave the mocks' form; a rehearsal recorded then still names
    the resources it named, under the URNs the plan now gives."""
    prefix = "urn:pulumi:dev::team::"

    def entry(urn, type_, parent=None, name=None):
        return {"urn": prefix + urn, "type": type_, "parent": parent and prefix + parent,
                "outputs": {"name": name} if name else {}}

    resources = [
        entry("pulumi:pulumi:Stack::team-dev", state.STACK_TYPE),
        entry("pulumi:pulumi:Stack$team:index:Group::group", "team:index:Group", "pulumi:pulumi:Stack::team-dev"),
        entry("team:index:Queue$gcp:pubsub/topic:Topic::group-queue-topic", "gcp:pubsub/topic:Topic",
              "team:index:Group$team:index:Queue::group-queue", "group-queue-topic-1a2b3c4"),
        entry("team:index:Group$team:index:Queue::group-queue", "team:index:Queue", "pulumi:pulumi:Stack$team:index:Group::group"),
        entry("pulumi:pulumi:Stack$gcp:pubsub/topic:Topic::orders", "gcp:pubsub/topic:Topic",
              "pulumi:pulumi:Stack::team-dev", "orders-5d6e7f8"),
    ]
    path = rehearsal.record_path(tmp_path, "dev")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 3, "deployment": {"resources": resources}}))
    assert rehearsal.recorded_names(tmp_path, "dev") == {
        prefix + "gcp:pubsub/topic:Topic::orders": "orders-5d6e7f8",
        prefix + "team:index:Group$team:index:Queue$gcp:pubsub/topic:Topic::group-queue-topic": "group-queue-topic-1a2b3c4",
    }


def test_a_reference_to_nothing_of_the_plan_stays_unknown(team_plan):
    plan = json.loads(json.dumps(team_plan))
    ordered = next(r for r in plan["resources"] if r["name"] == "orders-ordered")
    ordered["property_dependencies"]["topic"] = ["urn:pulumi:dev::elsewhere::gcp:pubsub/topic:Topic::theirs"]
    resolved, _ = rehearsal.resolve(plan, {}, assign=True)
    assert next(r for r in resolved["resources"] if r["name"] == "orders-ordered")["inputs"]["topic"] == UNKNOWN


@pytest.mark.emulator
def test_plan_apply_verify_a_team_program_on_the_emulator(emulator, tmp_path, capsys):
    from pubsubguard.validation.checks.drift import config_drift
    from pubsubguard.validation.config import RunConfig
    from pubsubguard.validation.target import declared_estate

    project = tmp_path / "team-orders"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".pubsubguard", "__pycache__", "venv"))
    (project / "venv").symlink_to(sys.prefix)  # the virtualenv its Pulumi.yaml names, as `pulumi install` makes it
    plan_file = tmp_path / "plan.json"
    assert cli.main(["plan", "--cwd", str(project), "--out", str(plan_file)]) == 0
    args = RunConfig(plan=plan_file, root=project, target="emulator")
    with pytest.raises(declared.PlanValueError, match="orders, orders-dlq.*name chosen at deploy .autonamed.; rehearse it first"):
        declared_estate(args)  # nothing rehearsed yet: verify cannot know the names

    capsys.readouterr()
    assert cli.main(["apply", "--emulator", "--plan", str(plan_file), "--cwd", str(project)]) == 0
    first = capsys.readouterr().out
    names = dict(re.findall(r"(orders[a-z-]*) -> (orders[a-z-]*-[0-9a-f]{7})", first))
    assert set(names) == {"orders", "orders-dlq", "orders-dlq-drain", "orders-ordered", "orders-exactly-once"}
    assert "apply: created 5, not applied 2" in first  # the IAM members: the emulator has no IAM
    assert cli.main(["apply", "--emulator", "--plan", str(plan_file), "--cwd", str(project)]) == 0
    assert "apply: unchanged 5, not applied 2" in capsys.readouterr().out  # the same names: nothing new

    everything, stack = declared_estate(args)
    assert set(stack.subscriptions) == {names["orders-ordered"], names["orders-exactly-once"]}
    assert everything.source["names_from"] == str(rehearsal.record_path(project, "dev"))
    assert config_drift(everything, stack) == []  # every deployed name exists as declared
    recorded = declared.estate(state.load(rehearsal.record_path(project, "dev"), None, project))
    assert set(recorded.subscriptions) == set(everything.subscriptions)  # the record is a state --state reads


# --- The deployed state verified, drift since deploy ----------------------------------------------------
@pytest.mark.emulator
def test_verify_a_deployed_state_under_its_deployed_names_with_drift_since_deploy(emulator, tmp_path, capsys):
    from google.cloud import pubsub_v1
    from google.protobuf import field_mask_pb2

    from pubsubguard.validation.report.render import access_line

    assert cli.main(["apply", "--emulator", "--state", str(STATE), "--cwd", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"declared: state {STATE} (stack dev, deployed 2026-11-20T09:14:03.587251Z)" in out
    # someone changes the subscription in the console after `pulumi up`
    ordered = f"projects/{PROJECT}/subscriptions/orders-ordered-b81e3c4"
    subscriber = pubsub_v1.SubscriberClient()
    subscriber.update_subscription(request={"subscription": {"name": ordered, "message_retention_duration": {"seconds": 3600}},
                                            "update_mask": field_mask_pb2.FieldMask(paths=["message_retention_duration"])})
    report = tmp_path / "report"
    code = cli.main(["verify", "--state", str(STATE), "--target", "emulator", "--report", str(report),
                     "--keys", "2", "--messages-per-key", "5", "--faults", "poison=0.2", "--no-progress"])
    captured = capsys.readouterr()
    assert CIPHERTEXT not in captured.out + captured.err
    result = json.loads((report / "report.json").read_text())
    assert code == result["exit_code"]
    assert set(result["subscriptions"]) == {"orders-ordered-b81e3c4", "orders-exactly-once-3f7a9d2"}
    judged = {name: sub["guarantees"] for name, sub in result["subscriptions"].items()}
    assert judged["orders-ordered-b81e3c4"]["ordering"] != "not_tested"
    assert judged["orders-exactly-once-3f7a9d2"]["exactly_once"] != "not_tested"
    assert judged["orders-exactly-once-3f7a9d2"]["dead_letter"] != "not_tested"
    assert result["subscriptions"]["orders-exactly-once-3f7a9d2"]["declared"]["dead_letter_topic"] == "orders-dlq-0c9e4b1"
    drift = [f["drift"] for f in result["config_drift"]]
    assert {"path": ordered, "setting": "retention_seconds", "declared": 604800, "actual": 3600} in drift
    source = result["parameters"]["declared_source"]
    assert source["kind"] == "state" and source["deployed_at"] == "2026-11-20T09:14:03.587251Z"
    said = f"judged against state {STATE} (stack dev, deployed 2026-11-20T09:14:03.587251Z)"
    assert said in access_line(result) and said in (report / "report.html").read_text()  # terminal and html
    assert CIPHERTEXT not in (report / "report.json").read_text() + (report / "report.html").read_text()
    assert any(o.startswith("1 secret value(s) of the state were left unread (stack outputs.ops_webhook)")
               for o in result["observations"])
