"""GoogleCloudPlatform/cloud-foundation-fabric modules/pubsub (main.tf, iam.tf) for the inputs its README's IAM
examples use: topic, subscriptions, `iam` / `iam_by_principals` on the topic and `iam` on subscriptions, with the
`context` interpolation of principals ("$iam_principals:<key>") and roles ("$custom_roles:<key>")."""
import pulumi
import pulumi_gcp as gcp


class PubsubModule:
    def __init__(self, module_name, project_id, name, context=None, iam=None, iam_by_principals=None,
                 subscriptions=None, labels=None):
        context = context or {}
        iam = iam or {}
        iam_by_principals = iam_by_principals or {}
        subscriptions = subscriptions or {}
        labels = labels or {}
        # locals.ctx: {"$<kind>:<key>": value}
        ctx = {kind: {f"${kind}:{k}": v for k, v in values.items()} for kind, values in context.items()}
        ctx_principals = ctx.get("iam_principals", {})
        ctx_roles = ctx.get("custom_roles", {})
        project = ctx.get("project_ids", {}).get(project_id, project_id)

        # google_pubsub_topic.default
        self.topic = gcp.pubsub.Topic(f"{module_name}-default",
            project=project,
            name=name,
            labels=labels)

        # iam.tf locals.iam: var.iam merged with var.iam_by_principals
        principal_roles = []
        for roles in iam_by_principals.values():
            for r in roles:
                if r not in principal_roles:
                    principal_roles.append(r)
        merged = {}
        for role in list(iam) + [r for r in principal_roles if r not in iam]:
            merged[role] = list(iam.get(role, [])) + [p for p, rs in iam_by_principals.items() if role in rs]

        # google_pubsub_topic_iam_binding.authoritative
        for role, members in merged.items():
            gcp.pubsub.TopicIAMBinding(f"{module_name}-authoritative-{role}",
                project=project,
                topic=self.topic.id,
                role=ctx_roles.get(role, role),
                members=[ctx_principals.get(m, m) for m in members])

        self.subscriptions = {}
        for key, sub in subscriptions.items():
            # google_pubsub_subscription.default[key]
            s = gcp.pubsub.Subscription(f"{module_name}-default-{key}",
                project=project,
                name=key,
                topic=self.topic.id,
                labels=sub.get("labels") or labels,
                retain_acked_messages=sub.get("retain_acked_messages", False),
                enable_message_ordering=sub.get("enable_message_ordering", False),
                enable_exactly_once_delivery=sub.get("enable_exactly_once_delivery", False))
            self.subscriptions[key] = s
            # google_pubsub_subscription_iam_binding.authoritative["<subscription>.<role>"] (local.subscription_iam)
            for role, members in sub.get("iam", {}).items():
                gcp.pubsub.SubscriptionIAMBinding(f"{module_name}-sub-authoritative-{key}.{role}",
                    project=project,
                    subscription=s.id,
                    role=ctx_roles.get(role, role),
                    members=[ctx_principals.get(m, m) for m in members])
