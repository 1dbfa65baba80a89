# Written here after the shape of populationgenomics/metamist metamist_infrastructure/driver.py
"""The ETL plant: requests published to a topic are pushed to a load function (made inside an apply,
since its code needs the private package index's URL, an output); failures go to a dead-letter topic
with a pull reader; rows land in BigQuery; Slack notices have their own push path."""
import json
from functools import cached_property

import pulumi
import pulumi_gcp as gcp

from etl_plant.common import HERE, gen2_function, only_role, pubsub_agent, sa_member
from etl_plant.notices import Mode, SlackNotices

API_NEEDS = {"iam": ["cloudresourcemanager"], "secretmanager": ["cloudresourcemanager"]}


class EtlPlant:
    def __init__(self, settings: dict, registry: dict):
        self.s = settings
        self.project, self.region = settings["project"], settings["region"]
        self.registry = registry
        self._apis: dict[str, gcp.projects.Service] = {}

    def api(self, short: str) -> gcp.projects.Service:
        """An API of the project, enabled the first time something needs it."""
        if short not in self._apis:
            after = [self.api(n) for n in API_NEEDS.get(short, [])]
            self._apis[short] = gcp.projects.Service(
                f"api-{short}", project=self.project, service=f"{short}.googleapis.com", disable_on_destroy=False,
                opts=pulumi.ResourceOptions(depends_on=after))
        return self._apis[short]

    def _account(self, label: str, account_id: str) -> gcp.serviceaccount.Account:
        return gcp.serviceaccount.Account(label, account_id=account_id, project=self.project,
                                          opts=pulumi.ResourceOptions(depends_on=[self.api("iam")]))

    @cached_property
    def notifier_sa(self):
        return self._account("etl-notifier-sa", "metamist-etl-sa")

    @cached_property
    def loader_sa(self):
        return self._account("etl-loader-sa", "metamist-etl-load-sa")

    @cached_property
    def extractor_sa(self):
        return self._account("etl-extractor-sa", "metamist-etl-extract-sa")

    @cached_property
    def callers(self) -> dict:
        return {who: self._account(f"etl-caller-{who}", f"metamist-etl-{who}") for who in self.s["accessors"]}

    @cached_property
    def code_bucket(self):
        return gcp.storage.Bucket("etl-code", name="metamist-source-bucket", project=self.project,
                                  location=self.region, uniform_bucket_level_access=True)

    # --- BigQuery
    @cached_property
    def dataset(self):
        return gcp.bigquery.Dataset("etl-dataset", project=self.project, dataset_id="metamist",
                                    location=self.region, labels={"project": "metamist"},
                                    opts=pulumi.ResourceOptions(depends_on=[self.api("bigquery")]))

    def _table(self, label: str, table_id: str, columns_file: str) -> gcp.bigquery.Table:
        columns = (HERE / "tables" / columns_file).read_text()
        return gcp.bigquery.Table(label, project=self.project, dataset_id=self.dataset.dataset_id, table_id=table_id,
                                  labels={"project": "metamist"}, schema=columns, deletion_protection=False)

    @cached_property
    def rows(self):
        return self._table("etl-rows", "etl-data", "rows.json")

    @cached_property
    def log(self):
        return self._table("etl-log", "etl-logs", "log.json")

    # --- who may read which request type (a secret used as a small key-value store)
    @cached_property
    def access_secret(self):
        return gcp.secretmanager.Secret(
            "etl-access-config", project=self.project, secret_id="accessor-configuration",
            replication={"user_managed": {"replicas": [{"location": self.region}]}},
            opts=pulumi.ResourceOptions(depends_on=[self.api("secretmanager")]))

    @cached_property
    def access_version(self):
        kinds = self.s["by_type"]
        emails = {kind: pulumi.Output.all(*[self.callers[a].email for a in spec["accessors"]])
                  for kind, spec in kinds.items()}

        def document(users_by_kind: dict) -> str:
            return json.dumps({"by_type": {kind: {"parser_name": spec["parser_name"], "users": users_by_kind[kind],
                                                  "default_parameters": spec.get("default_parameters")}
                                           for kind, spec in kinds.items()}})

        return gcp.secretmanager.SecretVersion("etl-access-config-v", secret=self.access_secret.id,
                                               secret_data=pulumi.Output.all(**emails).apply(document))

    # --- Pub/Sub
    @cached_property
    def inbox(self):
        return gcp.pubsub.Topic("etl-inbox", project=self.project,
                                opts=pulumi.ResourceOptions(depends_on=[self.api("pubsub")]))

    @cached_property
    def inbox_dead(self):
        topic = gcp.pubsub.Topic("etl-inbox-dead", project=self.project,
                                 opts=pulumi.ResourceOptions(depends_on=[self.api("pubsub")]))
        gcp.pubsub.TopicIAMPolicy("etl-inbox-dead-agent-publishes", project=self.project, topic=topic.name,
                                  policy_data=only_role("roles/pubsub.publisher", pubsub_agent()))
        return topic

    @cached_property
    def inbox_dead_reader(self):
        return gcp.pubsub.Subscription("etl-inbox-dead-pull", project=self.project, topic=self.inbox_dead.name,
                                       ack_deadline_seconds=20)

    @cached_property
    def inbox_push(self):
        sub = gcp.pubsub.Subscription(
            "etl-inbox-push",
            project=self.project,
            topic=self.inbox.name,
            ack_deadline_seconds=300,
            expiration_policy={"ttl": ""},  # never expires
            retry_policy={"minimum_backoff": "10s"},
            dead_letter_policy={"dead_letter_topic": self.inbox_dead.id, "max_delivery_attempts": 5},
            push_config={
                # loader is an Output[Function]: .service_config.uri is read through the Output
                "push_endpoint": self.loader.service_config.uri,
                "oidc_token": {"service_account_email": self.extractor_sa.email},
                "attributes": {"x-goog-version": "v1"},
            },
            opts=pulumi.ResourceOptions(depends_on=[self.api("pubsub"), self.inbox_dead_reader]),
        )
        gcp.pubsub.SubscriptionIAMPolicy("etl-inbox-push-agent-subscribes", project=self.project,
                                         subscription=sub.name,
                                         policy_data=only_role("roles/pubsub.subscriber", pubsub_agent()))
        return sub

    @cached_property
    def notices(self):
        return SlackNotices(
            "etl-notices", project=self.project, region=self.region, runner=self.notifier_sa,
            bucket=self.code_bucket, channel=self.s["slack_channel"], token_project=self.project,
            token_name=self.s["slack_token_secret_name"], mode=Mode.PUSHED,
            watched=["metamist-etl-notification-func", "metamist-etl-extract", "metamist-etl-load"],
            after=[self.api("iam"), self.api("cloudfunctions"), self.api("cloudbuild"), self.api("pubsub"),
                   self.notifier_sa],
        ).build()

    # --- functions
    def _env(self) -> dict:
        def table_ref(t):
            return pulumi.Output.format("{}.{}.{}", t.project, t.dataset_id, t.table_id)

        _, notice_topic = self.notices
        return {"BIGQUERY_TABLE": table_ref(self.rows), "BIGQUERY_LOG_TABLE": table_ref(self.log),
                "PUBSUB_TOPIC": self.inbox.id, "NOTIFICATION_PUBSUB_TOPIC": notice_topic.id if notice_topic else "",
                "SM_ENVIRONMENT": self.s["environment"], "CONFIGURATION_SECRET": self.access_version.id}

    def _function(self, step: str, runner, replace=None):
        return gen2_function(f"metamist-etl-{step}", project=self.project, region=self.region,
                             bucket=self.code_bucket, folder=HERE / "code" / step, entry_point=f"etl_{step}",
                             runner=runner, env=self._env(), replace=replace,
                             depends_on=[self.api("cloudfunctions"), self.api("cloudbuild"), runner])

    @cached_property
    def extractor(self):
        return self._function("extract", self.extractor_sa)

    @cached_property
    def loader(self) -> pulumi.Output:
        index = pulumi.Output.all(self.registry["location"], self.registry["project"], self.registry["name"]).apply(
            lambda lpn: "https://{}-python.pkg.dev/{}/{}/simple/".format(*lpn))

        def with_private_index(url: str):
            base = (HERE / "code" / "load" / "requirements.txt").read_text()
            extra = "\n".join([f"--extra-index-url {url}", *self.s["private_repo_packages"]])
            return self._function("load", self.loader_sa,
                                  replace={"requirements.txt": pulumi.StringAsset(base + "\n" + extra + "\n")})

        return index.apply(with_private_index)

    # --- everything, in the order a finished deployment needs
    def build(self):
        for label, runner in (("extract", self.extractor_sa), ("load", self.loader_sa)):
            gcp.bigquery.DatasetAccess(f"etl-dataset-{label}-writes", project=self.project,
                                       dataset_id=self.dataset.dataset_id, role="WRITER", user_by_email=runner.email)
        project_grants = [("loader-bq-jobs", "roles/bigquery.jobUser", sa_member(self.loader_sa)),
                          ("extractor-editor", "roles/editor", sa_member(self.extractor_sa)),
                          ("loader-editor", "roles/editor", sa_member(self.loader_sa)),
                          ("loader-secrets", "roles/secretmanager.secretAccessor", sa_member(self.loader_sa))]
        number = gcp.organizations.get_project().number
        project_grants.append(("serverless-robot", "roles/run.serviceAgent", pulumi.Output.concat(
            "serviceAccount:service-", number, "@serverless-robot-prod.iam.gserviceaccount.com")))
        for label, role, member in project_grants:
            gcp.projects.IAMMember(f"etl-{label}", project=self.project, role=role, member=member)

        _ = (self.extractor, self.loader, self.inbox_dead_reader, self.inbox_push)

        for who, account in self.callers.items():
            member = sa_member(account)
            gcp.cloudfunctionsv2.FunctionIamMember(
                f"etl-caller-{who}-invokes", project=self.extractor.project, location=self.extractor.location,
                cloud_function=self.extractor.name, role="roles/cloudfunctions.invoker", member=member)
            gcp.cloudrun.IamMember(
                f"etl-caller-{who}-runs", project=self.extractor.project, location=self.extractor.location,
                service=self.extractor.name, role="roles/run.invoker", member=member)

        gcp.secretmanager.SecretIamMember("etl-access-config-loader", project=self.project,
                                          secret_id=self.access_secret.id, role="roles/secretmanager.secretAccessor",
                                          member=sa_member(self.loader_sa))
