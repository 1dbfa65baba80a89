"""The engine calling back into the program, as Pulumi's engine does at `pulumi preview`: resource and
invoke transforms, resource hooks. The program's SDK serves its callbacks (`pulumi.runtime`'s callbacks
server) and names each one by `Callback{target, token}`; the engine invokes it with a serialized request
(`pulumi.runtime.proto.callback_pb2.CallbackInvokeRequest`).

- **Where the program listens**: the program runs in its own network namespace, so the SDK's
  `127.0.0.1:PORT` is not reachable from here; the exec scripts (`langhost_exec.py`,
  `langhost_node_exec.js`) make the SDK's callbacks server also listen on a Unix socket in the run's
  scratch folder and name that as the target. The engine calls no other target (a program cannot make it
  connect anywhere else).
- **Resource transforms** run in the engine's order: the resource's own (`transforms` option), then its
  parent's, its grandparent's, ..., then the stack's (`register_resource_transform`, in the order they
  were registered). Each gets the inputs and options the previous one returned. With transforms of its
  own, the inputs are sent as output values carrying their dependencies, and the resource's dependencies
  are rebuilt from the transformed options' `depends_on` and those output values, as the engine does.
  What is recorded (and judged) is the last transform's result; the source position stays the
  resource's own.
- **Invoke transforms** (`register_invoke_transform`) run in registration order before an invoke is
  answered.
- **Resource hooks** are registered; at preview only the hooks registered with `on_dry_run` run (Pulumi's
  engine skips the others): `before_create` before a new resource is recorded, `after_create` with its
  preview outputs (a component's when it registers its outputs). A failing hook fails the resource, or
  is a warning with `ignore_errors`. Error hooks are registered and never run (nothing is created).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pubsubguard.core.project import UNKNOWN
from pubsubguard.core.signatures import OUTPUT_SIG, SECRET_SIG, SIG

SOCKET_PREFIX = "callbacks"  # the exec scripts' Unix socket: <scratch>/callbacks*.sock


class CallbackError(Exception):
    """A callback the program's server failed (its message is the program's)."""


class Program:
    """The client side of the program's callbacks server(s). Methods are coroutines of the engine's
    event loop (grpc.aio)."""

    def __init__(self, folder: Path | None):
        self.folder = str(Path(folder).resolve()) if folder is not None else None
        self.channels: dict[str, object] = {}

    def allowed(self, target: str) -> bool:
        """A socket the program made in the scratch folder itself: never a symbolic link (the folder is the
        program's to write: a link would send the engine to a socket of the host)."""
        if self.folder is None or not target.startswith("unix:"):
            return False
        path = Path(target[len("unix:"):])
        if str(path.parent) != self.folder or not path.name.startswith(SOCKET_PREFIX) or path.suffix != ".sock":
            return False
        try:
            return stat.S_ISSOCK(os.lstat(path).st_mode)
        except OSError:
            return False

    async def call(self, callback, request) -> bytes:
        import grpc
        from pulumi.runtime.proto import callback_pb2, callback_pb2_grpc

        if not self.allowed(callback.target):
            raise CallbackError(f"a callback at {callback.target[:100]!r}, where the program's callbacks server "
                                "does not listen in this offline engine")
        channel = self.channels.get(callback.target)
        if channel is None:
            channel = self.channels[callback.target] = grpc.aio.insecure_channel(callback.target, options=[
                ("grpc.max_receive_message_length", 64 * 1024 * 1024),
                ("grpc.max_send_message_length", 64 * 1024 * 1024)])
        stub = callback_pb2_grpc.CallbacksStub(channel)
        try:
            response = await stub.Invoke(callback_pb2.CallbackInvokeRequest(
                token=callback.token, request=request.SerializeToString()))
        except grpc.aio.AioRpcError as err:
            raise CallbackError(err.details() or str(err.code())) from None
        return response.response

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()
        self.channels.clear()


# --- Resource transforms ---------------------------------------------------------------------------
OPTION_FIELDS = (  # (TransformResourceOptions field, RegisterResourceRequest field)
    ("depends_on", "dependencies"), ("ignore_changes", "ignoreChanges"), ("replace_on_changes", "replaceOnChanges"),
    ("version", "version"), ("aliases", "aliases"), ("provider", "provider"), ("custom_timeouts", "customTimeouts"),
    ("plugin_download_url", "pluginDownloadURL"), ("deleted_with", "deletedWith"),
    ("additional_secret_outputs", "additionalSecretOutputs"), ("providers", "providers"),
    ("plugin_checksums", "pluginChecksums"), ("hooks", "hooks"), ("import", "importId"), ("hide_diff", "hideDiffs"),
    ("replace_with", "replace_with"), ("replacement_trigger", "replacement_trigger"), ("protect", "protect"),
    ("retain_on_delete", "retainOnDelete"),
)


def _fields(message) -> set[str]:
    return set(message.DESCRIPTOR.fields_by_name)


def _copy_field(source, source_name: str, target, target_name: str) -> None:
    """One field from `source` to `target` (repeated, map, message, optional or scalar), where both have it."""
    if source_name not in _fields(source) or target_name not in _fields(target):
        return
    field = source.DESCRIPTOR.fields_by_name[source_name]
    value = getattr(source, source_name)
    if field.label == field.LABEL_REPEATED:  # repeated fields and maps
        destination = getattr(target, target_name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            destination.clear()
            for key in value:
                destination[key] = value[key]  # map<string, string> and map<string, bytes>
        else:
            del destination[:]
            destination.extend(value)
    elif field.message_type is not None or getattr(field, "has_presence", False):
        if source.HasField(source_name):
            if field.message_type is not None:
                getattr(target, target_name).CopyFrom(value)
            else:
                setattr(target, target_name, value)
        else:
            target.ClearField(target_name)
    else:
        setattr(target, target_name, value)


def transform_options(request, options_type=None):
    """The options a resource transform receives, from the registration (as the engine builds them); with
    `options_type` (resource_pb2.ResourceOptions) those a hook receives."""
    from pulumi.runtime.proto import resource_pb2

    options = (options_type or resource_pb2.TransformResourceOptions)()
    if "parent" in _fields(options):
        options.parent = request.parent
    for option, field in OPTION_FIELDS:
        _copy_field(request, field, options, option)
    if "delete_before_replace" in _fields(options) and (request.deleteBeforeReplace or request.deleteBeforeReplaceDefined):
        options.delete_before_replace = request.deleteBeforeReplace
    return options


def with_output_values(properties, dependencies: dict[str, list[str]]):
    """The inputs as output values carrying each top-level property's dependencies (the engine does this
    before the resource's own transforms, so that a transform keeps them)."""
    from google.protobuf import json_format, struct_pb2

    values = json_format.MessageToDict(properties)
    upgraded = {}
    for key, value in values.items():
        deps = sorted(dependencies.get(key, []))
        if isinstance(value, dict) and value.get(SIG) == OUTPUT_SIG:
            merged = sorted(set(value.get("dependencies") or []) | set(deps))
            upgraded[key] = {**value, "dependencies": merged} if merged else value
        elif deps:
            output = {SIG: OUTPUT_SIG, "dependencies": deps}
            if isinstance(value, dict) and value.get(SIG) == SECRET_SIG:
                output.update(value=value.get("value"), secret=True)
            elif value != UNKNOWN:
                output["value"] = value
            upgraded[key] = output
        else:
            upgraded[key] = value
    struct = struct_pb2.Struct()
    struct.update(upgraded)
    return struct


def output_dependencies(value) -> set[str]:
    """The URNs the output values inside a property value depend on."""

    found: set[str] = set()
    if isinstance(value, dict):
        if value.get(SIG) == OUTPUT_SIG:
            found.update(str(urn) for urn in value.get("dependencies") or [])
        for item in value.values():
            found |= output_dependencies(item)
    elif isinstance(value, list):
        for item in value:
            found |= output_dependencies(item)
    return found


async def _in_turn(program: Program, chain, values, options, response_type, values_field: str, make_request):
    """Each transform of `chain` in turn, given what the previous one returned (a response that leaves a
    part unset leaves it as it was): the last (values, options)."""
    for callback in chain:
        answer = response_type()
        answer.ParseFromString(await program.call(callback, make_request(values, options)))
        if answer.HasField(values_field):
            values = getattr(answer, values_field)
        if answer.HasField("options"):
            options = answer.options
    return values, options


async def transformed(program: Program, request, transforms, parent_transforms):
    """The registration after its transforms (see the module doc): a new request, or `request` itself when
    no transform applies. `transforms` are the resource's own callbacks, `parent_transforms` those of its
    ancestors (nearest first) then the stack's."""
    from google.protobuf import json_format
    from pulumi.runtime.proto import resource_pb2

    own = list(transforms)
    chain = own + list(parent_transforms)
    if not chain:
        return request
    dependencies = {key: list(value.urns) for key, value in request.propertyDependencies.items()}
    properties = with_output_values(request.object, dependencies) if own else request.object
    properties, options = await _in_turn(
        program, chain, properties, transform_options(request), resource_pb2.TransformResponse, "properties",
        lambda properties, options: resource_pb2.TransformRequest(
            type=request.type, name=request.name, custom=request.custom, parent=request.parent,
            properties=properties, options=options))
    result = resource_pb2.RegisterResourceRequest()
    result.CopyFrom(request)
    result.object.CopyFrom(properties)
    for option, field in OPTION_FIELDS:
        if option != "depends_on":
            _copy_field(options, option, result, field)
    if "delete_before_replace" in _fields(options) and options.HasField("delete_before_replace"):
        result.deleteBeforeReplace, result.deleteBeforeReplaceDefined = options.delete_before_replace, True
    values = json_format.MessageToDict(properties)
    if own:  # rebuilt from the options and the output values, as the engine does
        all_deps = set(options.depends_on)
        result.ClearField("propertyDependencies")
        for key, value in values.items():
            deps = output_dependencies(value)
            all_deps |= deps
            result.propertyDependencies[key].urns.extend(sorted(deps))
        del result.dependencies[:]
        result.dependencies.extend(sorted(all_deps))
    else:
        for key, value in values.items():
            deps = output_dependencies(value) - set(result.propertyDependencies[key].urns)
            result.propertyDependencies[key].urns.extend(sorted(deps))
    return result


async def transformed_invoke(program: Program, request, transforms):
    """An invoke's arguments after the stack's invoke transforms, in registration order."""
    from pulumi.runtime.proto import resource_pb2

    if not transforms:
        return request
    options = resource_pb2.TransformInvokeOptions(provider=request.provider, version=request.version,
                                                  plugin_download_url=request.pluginDownloadURL)
    args, options = await _in_turn(
        program, transforms, request.args, options, resource_pb2.TransformInvokeResponse, "args",
        lambda args, options: resource_pb2.TransformInvokeRequest(token=request.tok, args=args, options=options))
    result = resource_pb2.ResourceInvokeRequest()
    result.CopyFrom(request)
    result.args.CopyFrom(args)
    result.provider, result.version = options.provider, options.version
    return result


# --- Resource hooks --------------------------------------------------------------------------------
class Hooks:
    """Hooks the program registered (`RegisterResourceHook`, `RegisterErrorHook`), by name."""

    def __init__(self):
        self.resource: dict[str, object] = {}  # name -> RegisterResourceHookRequest
        self.error: dict[str, object] = {}  # name -> RegisterErrorHookRequest

    def add(self, kind: dict, request) -> None:
        if not request.name:
            raise ValueError("a hook without a name")
        if request.name in self.resource or request.name in self.error:
            raise ValueError(f"a hook named {request.name!r} was registered twice")
        kind[request.name] = request

    def bound(self, request, stage: str) -> list[str]:
        """The names of the hooks a registration binds to `stage` ("before_create", ...)."""
        if "hooks" not in _fields(request) or not request.HasField("hooks"):
            return []
        return list(getattr(request.hooks, stage))

    async def run(self, program: Program, names: list[str], stage: str, *, urn: str, registration,
                  outputs=None) -> list[str]:
        """Run the `on_dry_run` hooks among `names` (the others do not run at preview); returns the warnings
        of hooks that failed with `ignore_errors`; raises CallbackError for one that failed otherwise."""
        from pulumi.runtime.proto import resource_pb2

        warnings = []
        for hook_name in names:
            hook = self.resource.get(hook_name)
            if hook is None:
                raise CallbackError(f"hook {hook_name!r} was not registered")
            if not hook.on_dry_run:
                continue
            message = resource_pb2.ResourceHookRequest(  # the options too: the engine offers sendsOptionsToHooks
                urn=urn, name=registration.name, type=registration.type, new_inputs=registration.object,
                new_options=transform_options(registration, resource_pb2.ResourceOptions))
            if outputs is not None:
                message.new_outputs.CopyFrom(outputs)
            answer = resource_pb2.ResourceHookResponse()
            try:
                answer.ParseFromString(await program.call(hook.callback, message))
                error = answer.error
            except CallbackError as err:
                error = str(err)
            if error:
                text = f"{stage.split('_')[0]} hook {hook_name!r} failed: {error}"
                if getattr(hook, "ignore_errors", False):
                    warnings.append(f"{urn}: {text}")
                else:
                    raise CallbackError(text)
        return warnings
