"""The SDK policies of the pack (needs pulumi_policy: runs in the pack's own virtualenv)."""

from __future__ import annotations

from pubsub_rules.catalog import PACK_DESCRIPTION, PACK_NAME, RULES
from pubsub_rules.values import in_request, request_scope, same_for_same_object


def policies():
    return [rule.policy() for rule in RULES]


def decode_once() -> None:
    """The policy SDK turns a request's properties into a dict, then into fresh containers
    (`deserialize_properties`), then wraps them in read-only proxies (`unknown_checking_proxy`), once per
    policy (`Analyze`: 33 times per resource; `AnalyzeStack`: once per stack policy and resource). Each
    step depends only on its input, so each distinct message is converted once and every policy gets the
    same proxies. No rule writes to its properties (rules read them through `values.plain_props`, which
    copies them into plain data once), so sharing changes no result: the pack's tests judge the same
    cases either way. Measured: `benchmarks/bench_check.py` (see README)."""
    import functools
    import types

    from pulumi_policy import policy as sdk

    if getattr(sdk, "_pubsubguard_decode_once", False):
        return  # already in place (a second call would wrap the wrappers)
    sdk._pubsubguard_decode_once = True
    json_format = getattr(sdk, "json_format", None)
    if json_format is None or not callable(getattr(json_format, "MessageToDict", None)):
        return  # another SDK layout: leave it as it is
    original = json_format.MessageToDict
    struct_type = None
    try:
        from google.protobuf import struct_pb2

        struct_type = struct_pb2.Struct
    except ImportError:  # pragma: no cover
        return

    @functools.lru_cache(maxsize=1 << 16)
    def from_bytes(data: bytes) -> dict:
        message = struct_type()
        message.ParseFromString(data)
        return original(message)

    # By identity within one request (`once_per_request` opens its scope), by bytes across requests.
    def message_to_dict(message, *args, **kwargs):
        if args or kwargs or not isinstance(message, struct_type):
            return original(message, *args, **kwargs)
        return in_request(message_to_dict, message, lambda: from_bytes(message.SerializeToString(deterministic=True)))

    shim = types.ModuleType(json_format.__name__)
    shim.__dict__.update({k: v for k, v in vars(json_format).items() if not k.startswith("__")})
    shim.MessageToDict = message_to_dict
    sdk.json_format = shim
    for name in ("deserialize_properties", "unknown_checking_proxy"):
        if callable(getattr(sdk, name, None)):
            setattr(sdk, name, same_for_same_object(getattr(sdk, name)))
    once_per_request(sdk)


def once_per_request(sdk) -> None:
    """Within one request, the SDK converts each resource again for every policy (`AnalyzeStack`: all
    of the stack's resources, once per stack policy), and its options and provider likewise. Each
    request is answered in a scope (`values.request_scope`) in which a message's conversions are made
    once: its properties (above), its options and provider (`_get_resource_options`,
    `_get_provider_resource`, which depend on the message only), and the stack policies' plain view of
    the stack (`rule.py`). Nothing is remembered from one request to the next, so a request is judged
    exactly as it would be alone. The SDK's per-request `inspect.signature` of pulumi's Settings class
    (`_configure_runtime_settings`) is computed once: a Signature is immutable.
    Measured: `benchmarks/bench_check.py` (docs/performance.md)."""
    import functools

    servicer = getattr(sdk, "_PolicyAnalyzerServicer", None)
    if servicer is None:
        return  # another SDK layout: leave it as it is

    def in_scope(method):
        @functools.wraps(method)
        def answer(self, request, context):
            with request_scope():
                return method(self, request, context)

        return answer

    def per_message(method):
        @functools.wraps(method)
        def converted(self, message):
            return in_request(converted, message, lambda: method(self, message))

        return converted

    for name, wrap in (("Analyze", in_scope), ("AnalyzeStack", in_scope),
                       ("_get_resource_options", per_message), ("_get_provider_resource", per_message)):
        if callable(getattr(servicer, name, None)):
            setattr(servicer, name, wrap(getattr(servicer, name)))
    if callable(getattr(sdk, "signature", None)):
        sdk.signature = functools.lru_cache(maxsize=16)(sdk.signature)


def build_pack():
    """Start the pack's Analyzer server: prints its port and blocks (what the Pulumi CLI runs)."""
    from pulumi_policy import EnforcementLevel, PolicyPack

    decode_once()
    return PolicyPack(
        name=PACK_NAME,
        description=PACK_DESCRIPTION,
        enforcement_level=EnforcementLevel.ADVISORY,
        policies=policies(),
    )
