"""The Pulumi engine's side of a preview, as far as a policy pack can tell: a resource monitor that
records every registration and answers the program the way `pulumi preview` does for a new stack.

- A new custom resource's id is unknown; its outputs are its inputs (known where the inputs are),
  every other output is unknown (an autonamed `name`, `id`, computed URLs), nested ones too (the
  program side reads a nested field the inputs did not set as unknown: `langhost_exec`,
  `langhost_node_exec.js`; the engine has no provider schema to name those fields); an output
  whose form is documented (a Cloud Run URL: `facts.documented_forms`) has that form, the sentinel
  where its value is not known yet.
- Inputs are recorded as the engine sends them to analyzers: unknowns as the unknown sentinel
  (a string computed from an unknown is unknown), secrets in their envelope (`pulumi.secret`,
  `secure:` config), resource references downgraded as for a provider that does not take them (a
  custom resource's id, a component's URN). References are decoded from the wire, never rehydrated,
  so nothing waits on a `getResource`.
- Invokes (data sources): results given in an invoke-results file are returned as given;
  `gcp.organizations.getIAMPolicy`, a pure function of its arguments, is evaluated here; any other
  invoke's result is unknown but for the arguments it echoes: every field of the result type (in the
  program's own provider package, filled on the program side) is unknown, so values built from it are
  unknown whatever is installed beside pubsubguard. Each such invoke is recorded.
- Resources read with `.get(...)` are recorded as external (the engine reads them from the cloud;
  offline their state is unknown).
- Calls to a component's (or a provider resource's) methods: no provider plugin runs offline, so the
  result is a given one or unknown, depending on the component and the arguments' dependencies.
"""

from __future__ import annotations

import inspect
import re
import threading
from pathlib import Path

from pubsubguard.core import callbacks, request_reader
from pubsubguard.core.project import UNKNOWN
from pubsubguard.core.recorder import STACK_TYPE, Recorder, Refused, make_urn
from pubsubguard.core.engine_values import (
    config_reads, decode, fields_of, output_dependencies, partial_string_entries, read_outputs, reference_urn, struct,
    to_dict, with_documented_forms,
)

FEATURES = (  # what the engine offers a program (`SupportsFeature`), as `pulumi preview` does: callbacks into the
    # program (transforms, hooks) are served through `callbacks`; options that matter only once a stack has a
    # state (replace_with, replacement triggers, deleted_with, aliases) are taken and recorded
    "secrets", "resourceReferences", "outputValues", "deletedWith", "aliasSpecs", "replacementTrigger", "replaceWith",
    "transforms", "invokeTransforms", "parameterization", "resourceHooks", "errorHooks", "sendsOptionsToHooks",
)
MONITOR_FEATURES = FEATURES + (  # also listed by `GetDeploymentInfo` (SDKs that ask by enum)
    "byteString", "invokeDependsOn", "invokeParent", "stateMigrations", "callOutputValues", "invokeOutputValues",
)
PROVENANCE = "pubsubguard:provenance "  # langhost_exec.PROVENANCE: the program side's report of Output origins


def services(recorder: Recorder):
    """The `ResourceMonitor` and `Engine` gRPC services the program talks to, backed by `recorder`."""
    from pulumi.runtime.proto import engine_pb2_grpc, resource_pb2_grpc

    return (_asynchronous(_Monitor, resource_pb2_grpc.ResourceMonitorServicer)(recorder),
            _asynchronous(_Engine, engine_pb2_grpc.EngineServicer)(recorder))


class _Monitor:
    """The resource monitor: registrations, reads, invokes, calls, packages and the program's callbacks."""

    def __init__(self, recorder: Recorder):
        from google.protobuf import empty_pb2
        from pulumi.runtime.proto import provider_pb2, resource_pb2

        self.recorder = recorder
        self._resource, self._provider, self._empty = resource_pb2, provider_pb2, empty_pb2.Empty
        self._features = sorted(getattr(resource_pb2, name) for name in (
            "RESOURCE_MONITOR_FEATURE_" + re.sub(r"(?<!^)([A-Z])", r"_\1", f).upper() for f in MONITOR_FEATURES)
            if hasattr(resource_pb2, name))
        self._hooks_field = "hooks" in fields_of(resource_pb2.RegisterResourceRequest())  # an SDK's protocol with hooks

    def GetDeploymentInfo(self, request, context):  # noqa: N802 - the protocol's names
        recorder = self.recorder
        return self._resource.DeploymentInfo(project=recorder.project, stack=recorder.stack, dryRun=True,
                                             supportedFeatures=self._features)

    def SupportsFeature(self, request, context):  # noqa: N802
        return self._resource.SupportsFeatureResponse(hasSupport=request.id in FEATURES)

    def RegisterResource(self, request, context):  # noqa: N802
        recorder = self.recorder
        recorder.check_registration(request, "registration")
        if request.packageRef and request.packageRef not in recorder.packages:
            recorder.fail(f"{request.type} {request.name!r}: unknown provider package {request.packageRef[:100]!r}")
        urn = make_urn(recorder.stack, recorder.project, request.parent, request.type, request.name)
        for callback in request.transforms:
            recorder.callback(callback, f"a transform of {request.type} {request.name!r}")
        inherited = recorder.inherited_transforms(request.parent)
        if request.transforms or inherited or (self._hooks_field and request.HasField("hooks")):
            return self._register_with_callbacks(request, urn, inherited)
        return self._register(request, urn)

    def ReadResource(self, request, context):  # noqa: N802
        recorder = self.recorder
        recorder.check_registration(request, "read")
        urn = make_urn(recorder.stack, recorder.project, request.parent, request.type, request.name)
        recorder.record(request, urn, decode(to_dict(request.properties)), read_id=request.id)
        return self._resource.ReadResourceResponse(urn=urn, id=request.id,  # read at preview too: its id is known
                                                   properties=struct(read_outputs(request.type, request.id)))

    def RegisterResourceOutputs(self, request, context):  # noqa: N802
        recorder = self.recorder
        if request.ByteSize() > recorder.limits.max_input_bytes:
            recorder.fail(f"the outputs of {request.urn[:200]} are {request.ByteSize():,} bytes, over the "
                          f"limit of {recorder.limits.max_input_bytes:,} (--max-input-bytes raises it)")
        parts = request.urn.split("::")
        if len(parts) > 2 and parts[2] == STACK_TYPE:
            with recorder.lock:
                recorder.outputs.update(decode(to_dict(request.outputs)))
                recorder.completed = True
        if request.urn in recorder.component_hooks:
            return self._component_after_create(request)
        return self._empty()

    def Invoke(self, request, context):  # noqa: N802
        self._within_limit(request, "an invoke")
        if self.recorder.invoke_transforms:
            return self._invoke_with_callbacks(request)
        return self._answer_invoke(request)

    def Call(self, request, context):  # noqa: N802
        self._within_limit(request, "a call")
        return self._answer_call(request)

    def RegisterPackage(self, request, context):  # noqa: N802
        ref = f"{request.name}@{request.version}"
        for kind in ("parameterization", "extension"):
            if kind in fields_of(request) and request.HasField(kind):
                ref += f"/{kind}:{getattr(request, kind).name}@{getattr(request, kind).version}"
        self.recorder.packages.add(ref)
        return self._resource.RegisterPackageResponse(ref=ref)

    def RegisterStackTransform(self, request, context):  # noqa: N802
        self.recorder.stack_transforms.append(self.recorder.callback(request, "a stack transform"))
        return self._empty()

    def RegisterStackInvokeTransform(self, request, context):  # noqa: N802
        self.recorder.invoke_transforms.append(self.recorder.callback(request, "an invoke transform"))
        return self._empty()

    def RegisterResourceHook(self, request, context):  # noqa: N802
        recorder = self.recorder
        recorder.callback(request.callback, f"the resource hook {request.name!r}")
        recorder.hooks.add(recorder.hooks.resource, request)
        return self._empty()

    def RegisterErrorHook(self, request, context):  # noqa: N802
        recorder = self.recorder
        recorder.callback(request.callback, f"the error hook {request.name!r}")
        recorder.hooks.add(recorder.hooks.error, request)
        return self._empty()

    def ExistsResource(self, request, context):  # noqa: N802 - whether it exists in the cloud: unknown offline
        return self._resource.ExistsResourceResponse(unknown=True)

    def SignalAndWaitForShutdown(self, request, context):  # noqa: N802
        return self._empty()

    def _register(self, request, urn: str):
        """Record a registration (after its transforms) and answer it."""
        recorder = self.recorder
        wire, reads = to_dict(request.object), {}
        if recorder.environments:  # reads of what an ESC environment sets or may set: their keys, then unmarked
            wire = config_reads(wire, "", reads)
        inputs = decode(wire)
        recorder.record(request, urn, inputs, partial=partial_string_entries(wire), config_reads=reads)
        if request.transforms:
            recorder.own_transforms[urn] = list(request.transforms)
        if request.type == STACK_TYPE:
            return self._resource.RegisterResourceResponse(urn=urn)
        outputs = with_documented_forms(request.type, inputs) if request.custom else inputs
        return self._resource.RegisterResourceResponse(urn=urn, id=request.importId or "", object=struct(outputs))

    async def _register_with_callbacks(self, request, urn: str, inherited: list):
        """A registration through its transforms (its own and its parents') and its hooks, then recorded."""
        recorder = self.recorder
        what = f"{request.type} {request.name!r}"
        try:
            request = await callbacks.transformed(recorder.program, request, request.transforms, inherited)
        except callbacks.CallbackError as err:
            raise Refused(f"{what}: a transform failed: {err}") from None
        hooks = recorder.hooks
        try:
            warnings = await hooks.run(recorder.program, hooks.bound(request, "before_create"), "before_create",
                                       urn=urn, registration=request)
            response = self._register(request, urn)
            after = hooks.bound(request, "after_create")
            if request.custom:
                warnings += await hooks.run(recorder.program, after, "after_create", urn=urn, registration=request,
                                            outputs=response.object)
            elif after:  # a component's run when it registers its outputs, as the engine's step does
                recorder.component_hooks[urn] = (after, request)
        except callbacks.CallbackError as err:
            raise Refused(f"{what}: {err}") from None
        for warning in warnings:
            recorder.log("warning", warning)
        return response

    async def _component_after_create(self, request):
        recorder = self.recorder
        names, registration = recorder.component_hooks.pop(request.urn)
        try:
            warnings = await recorder.hooks.run(recorder.program, names, "after_create", urn=request.urn,
                                                registration=registration, outputs=request.outputs)
        except callbacks.CallbackError as err:
            raise Refused(f"{registration.type} {registration.name!r}: {err}") from None
        for warning in warnings:
            recorder.log("warning", warning)
        return self._empty()

    def _within_limit(self, request, what: str) -> None:
        limit = self.recorder.limits.max_input_bytes
        if request.ByteSize() > limit:
            self.recorder.fail(f"{what} of {request.tok[:100]} is {request.ByteSize():,} bytes, over the limit of "
                               f"{limit:,} (--max-input-bytes raises it)")

    def _answer_call(self, request):
        """A method of a component (`__self__`, a resource reference) or of a provider resource. At preview the
        engine hands it to the provider of the method's package, which runs it in its own plugin with the
        arguments and their dependencies (pkg/resource/deploy/source_eval.go, `resmon.Call`). Offline no plugin
        runs: the result is the one given with `--invoke-results`, else unknown, as a provider answers for a
        value it cannot compute at preview; either way it depends on the receiver and on what the arguments
        depend on, so a value built from it is traced to them."""
        recorder = self.recorder
        wire = to_dict(request.args)
        receiver = reference_urn(wire.pop("__self__", None))
        if receiver is not None and receiver not in recorder.records:
            raise Refused(f"{request.tok}: unknown resource {receiver[:200]}")  # the engine's check of `__self__`
        if request.packageRef and request.packageRef not in recorder.packages:
            raise Refused(f"{request.tok}: unknown provider package {request.packageRef[:100]!r}")
        depends = {urn for deps in request.argDependencies.values() for urn in deps.urns}
        depends |= set(output_dependencies(wire)) | ({receiver} if receiver else set())
        result = recorder.call(request.tok, decode(wire))
        returned = struct(result if result is not None else {"result": UNKNOWN})
        urns = self._provider.CallResponse.ReturnDependencies(urns=sorted(depends))
        return self._provider.CallResponse(**{"return": returned},
                                           returnDependencies={key: urns for key in returned.fields} if depends else {})

    def _answer_invoke(self, request):
        depends_on = list(request.dependsOn) if "dependsOn" in fields_of(request) else []
        if depends_on and self.recorder.unresolved(depends_on):  # as the engine: pending dependencies, unknown result
            return self._resource.ResourceInvokeResponse(unknown=True)
        result = self.recorder.invoke(request.tok, decode(to_dict(request.args)))
        return self._resource.ResourceInvokeResponse(**{"return": struct(result)})

    async def _invoke_with_callbacks(self, request):
        recorder = self.recorder
        try:
            request = await callbacks.transformed_invoke(recorder.program, request, recorder.invoke_transforms)
        except callbacks.CallbackError as err:
            raise Refused(f"an invoke of {request.tok}: a transform failed: {err}") from None
        return self._answer_invoke(request)


class _Engine:
    """The engine service: the program's log (and the program side's provenance reports), its root resource."""

    def __init__(self, recorder: Recorder):
        from google.protobuf import empty_pb2
        from pulumi.runtime.proto import engine_pb2

        self.recorder, self._engine, self._empty = recorder, engine_pb2, empty_pb2.Empty
        self._severities = {engine_pb2.DEBUG: "debug", engine_pb2.INFO: "info", engine_pb2.WARNING: "warning",
                            engine_pb2.ERROR: "error"}

    def Log(self, request, context):  # noqa: N802
        severity = self._severities.get(request.severity, "info")
        if severity == "debug":
            if request.message.startswith(PROVENANCE):
                self.recorder.trace(request.message[len(PROVENANCE):])
        else:
            self.recorder.log(severity, request.message)
        return self._empty()

    def GetRootResource(self, request, context):  # noqa: N802
        return self._engine.GetRootResourceResponse(urn=self.recorder.root_urn)

    def SetRootResource(self, request, context):  # noqa: N802
        self.recorder.root_urn = request.urn
        return self._engine.SetRootResourceResponse()

    def StartDebugging(self, request, context):  # noqa: N802
        return self._empty()

    def RequirePulumiVersion(self, request, context):  # noqa: N802
        return self._engine.RequirePulumiVersionResponse()


def _asynchronous(cls, servicer):
    """`cls` as an asyncio `servicer` (its generated base, which answers what `cls` does not serve): each of
    its public methods runs inline in the server's event loop (a registration is a few dictionary operations;
    the thread hand-offs of the threaded server cost ten times that)."""
    import grpc

    def make(method):
        async def call(self, request, context):
            if isinstance(request, request_reader.Unreadable):  # the program sent what the message type cannot hold
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
            try:
                result = method(self, request, context)
                if inspect.isawaitable(result):  # a call that calls back into the program (`callbacks`)
                    result = await result
                return result
            except Refused as err:
                await context.abort(getattr(grpc.StatusCode, err.code), str(err))
            except (ValueError, TypeError, KeyError) as err:  # a message no SDK sends well-formed (e.g. a NaN
                what = " ".join(filter(None, (getattr(request, "type", ""), repr(getattr(request, "name", "")))))
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,  # number): the program's error, in its words
                                    f"the engine cannot read {what or 'the request'}: {err}")
        return call

    methods = {name: make(method) for name, method in vars(cls).items() if not name.startswith("_") and callable(method)}
    return type(cls.__name__.lstrip("_"), (cls, servicer), methods)


class Server:
    """The engine's gRPC server (grpc.aio) in a thread of its own, on two Unix sockets in a folder."""

    def __init__(self, recorder: Recorder, folder: Path):
        import asyncio

        recorder.program = callbacks.Program(folder)
        self.recorder = recorder
        self.monitor_address = f"unix:{folder / 'monitor.sock'}"
        self.engine_address = f"unix:{folder / 'engine.sock'}"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="pubsubguard-engine")
        self.thread.start()
        starting = asyncio.run_coroutine_threadsafe(self._start(recorder), self.loop)
        try:
            self.server = starting.result(30)
        except BaseException:
            # interrupted (Ctrl-C) while the loop binds the sockets: let that end before the caller removes the
            # folder under it (else gRPC's core logs its failed bind on the terminal: a second line)
            try:  # not cancelled: a cancelled future returns at once while the loop still binds
                starting.result(5)
            except BaseException:  # noqa: BLE001 - the first exception is the one that counts
                pass
            else:
                asyncio.run_coroutine_threadsafe(starting.result().stop(None), self.loop).result(5)
            raise

    async def _start(self, recorder: Recorder):
        import grpc
        from pulumi.runtime.proto import engine_pb2, resource_pb2

        size = max(64 * 1024 * 1024, 4 * recorder.limits.max_input_bytes)  # the services judge sizes themselves,
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", size),  # so a crossing is named
                                          ("grpc.max_send_message_length", size)])
        monitor, engine = services(recorder)
        request_reader.add_servicer(server, monitor, resource_pb2.DESCRIPTOR.services_by_name["ResourceMonitor"])
        request_reader.add_servicer(server, engine, engine_pb2.DESCRIPTOR.services_by_name["Engine"])
        server.add_insecure_port(self.monitor_address)
        server.add_insecure_port(self.engine_address)
        await server.start()
        return server

    def stop(self) -> None:
        import asyncio

        try:
            asyncio.run_coroutine_threadsafe(self.recorder.program.close(), self.loop).result(5)
            asyncio.run_coroutine_threadsafe(self.server.stop(None), self.loop).result(5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            if not self.thread.is_alive():
                self.loop.close()


def serve(recorder: Recorder, folder: Path) -> Server:
    """Start the engine's gRPC server (`Server`) for `recorder` on Unix sockets in `folder`."""
    return Server(recorder, folder)
