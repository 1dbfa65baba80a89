"""The program's side of `pubsubguard plan` and `check`: what the Pulumi Python language host's
`pulumi-language-python-exec` does, run by the project's own interpreter in a child process.

NOT imported by pubsubguard: `pubsubguard.core.langhost` copies this file into the run's scratch directory
and starts it as a script with the team's Python, which needs nothing but the pulumi SDK. Like the
language host's exec script it reads the config from `PULUMI_CONFIG`, configures
`pulumi.runtime.Settings(monitor=..., engine=...)` with the engine's gRPC addresses (Unix sockets),
runs the program with `runpy.run_path` inside `pulumi.runtime.run_in_stack`, reports a failure with
`pulumi.log.error` (the engine's `Log`) and exits 0, or 32 after showing the error.

Preview semantics that the engine alone cannot give, applied here before the program starts (each one
only where the SDK has the part it changes; an SDK without it runs as it is):
- a value unknown at preview that the program formats into a string keeps the engine's unknown
  sentinel, so the string is unknown too;
- a concatenation (`Output.concat`) of known parts and unknown ones keeps its known parts, the sentinel
  standing for the unknown ones ("http://" + <unknown name>), as a formatted string does: the engine
  records it unknown and lets a rule judge by its known parts (a push endpoint's scheme);
- what the program cannot know offline is unknown by the types of the program's own SDK and provider
  package (the engine needs neither): an invoke the engine answers as unknown (`UNKNOWN_RESULT`) is an
  instance of its result type whose string fields carry the sentinel (the result types check the other
  fields' types: they stay empty) and whose echoed arguments are known; a nested output a new
  resource's inputs did not set (`fn.service_config.uri`) reads as unknown, as the provider's preview
  leaves computed attributes, never absent;
- a configuration value the stack's ESC environments set or may set (`ENVIRONMENT_READS`) is unknown where
  the program reads it as text, the sentinel marked with its key so that the engine names the key and the
  environments; a typed read of one nothing here gives fails in one line (`_config_from_environments`);
- a program that makes no progress (nothing constructed, no RPC answered, its thread waiting in its
  event loop or blocked in one place) for `--idle-timeout` seconds is stopped with an error naming the
  resource it waits for.
Speed-ups that change nothing a program or the engine can see: debug log lines are not sent (this
engine drops them; the SDK sent five synchronous `Log` calls per resource), the cyclic garbage collector is off
while the program runs (the SDK's per-property objects made its full passes quadratic), the SDK waits
for outstanding outputs in linear time, and a resource class's property types are derived once.

Nothing here is trusted by the engine: the verdict is computed in pubsubguard's own process from the
registrations it received; this script only makes the program run as `pulumi preview` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import runpy
import sys
import threading
import time
import traceback

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's sentinel for a value unknown at preview
ERROR_SHOWN = 32  # as the language host: an error message was shown to the user
NO_SDK = 3


class Activity:
    """What the watchdog sees: constructions started and finished (by type and name), and the last time
    anything happened."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.started = {}
        self.finished = {}
        self.count = 0

    def touch(self):
        self.last = time.monotonic()


def _patch(description, function):
    try:
        function()
    except Exception:  # noqa: BLE001 - an SDK without that part runs as it is
        pass


def _unknowns_print_as_sentinel():
    from pulumi.output import Unknown

    Unknown.__str__ = Unknown.__repr__ = lambda self: UNKNOWN
    Unknown.__format__ = lambda self, spec: UNKNOWN


UNKNOWN_RESULT = "pubsubguard:unknown-result"  # invokes.UNKNOWN_RESULT: the engine cannot know this invoke


def _unknown_fields_of_typed_values():
    import weakref

    import pulumi
    from pulumi import _types
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    translate_original, resolve_original, get_original = rpc.translate_output_properties, rpc.resolve_outputs, pulumi.get
    resolving = [0]  # > 0 while a resource's outputs are resolved (synchronous, on the event loop)
    absent_is_unknown = weakref.WeakValueDictionary()  # id -> output-type value of a new resource's outputs

    def unwrapped(typ):
        return _types.unwrap_optional_type(typ) if typ is not None else None

    def fields(typ):
        typ = unwrapped(typ)
        return _types.output_type_types(typ) if typ is not None and _types.is_output_type(typ) else None

    def translate_output_properties(output, output_transformer, typ=None, *args, **kwargs):
        if isinstance(output, dict) and output.get(UNKNOWN_RESULT) is True:
            # An invoke's result type checks each argument's type: strings carry the sentinel (any string
            # built from one is unknown), other fields stay empty; the arguments it echoes are known.
            known = {key: value for key, value in output.items() if key != UNKNOWN_RESULT}
            output = {**{name: UNKNOWN for name, field in (fields(typ) or {}).items() if unwrapped(field) is str},
                      **known}
        result = translate_original(output, output_transformer, typ, *args, **kwargs)
        if resolving[0] and isinstance(output, dict) and fields(typ):
            try:
                absent_is_unknown[id(result)] = result
            except TypeError:
                pass
        return result

    def resolve_outputs(*args, **kwargs):
        resolving[0] += 1
        try:
            return resolve_original(*args, **kwargs)
        finally:
            resolving[0] -= 1

    def get(self, name):
        # A nested field a new resource's inputs did not set is computed by the provider: unknown at
        # preview, never absent. (Filling the value itself would make the whole output unknown and hide
        # the fields that are known, such as a URL's documented form.)
        value = get_original(self, name)
        if value is None and absent_is_unknown.get(id(self)) is self:
            return Unknown()
        return value

    rpc.translate_output_properties, rpc.resolve_outputs, pulumi.get = translate_output_properties, resolve_outputs, get


ENVIRONMENT_READS = "PUBSUBGUARD_ENVIRONMENT_READS"  # project.ENVIRONMENT_READS
CONFIG_READ = "%s<config %s>"  # engine_values.CONFIG_READ: the sentinel, marked with the key it was read for
TYPED_READS = {"bool": "a boolean", "int": "an integer", "float": "a number", "object": "an object"}


class ConfigValueUnknownError(Exception):
    """A typed read of a configuration value an unread environment may set: nothing offline has its value."""


def _config_from_environments(reads):
    """Reads of configuration values the stack's ESC environments set (`{"unknown": [keys]}`, their values
    given) or may set (`{"known": [keys]}`, unread: every key but the stack file's own) are unknown at
    preview: a text read is the engine's sentinel marked with its key (`CONFIG_READ`; the engine names the
    key and the environments wherever it is unknown); `require` of a key nothing here sets still fails as
    the SDK fails it; a typed read (boolean, number, object) of an unread environment's key fails in one
    line, and of a given one is the value given (the program computes with it)."""
    from urllib.parse import quote

    import pulumi
    from pulumi.runtime.config import get_config

    given = reads.get("unknown")
    given, known = (set(given) if given is not None else None), set(reads.get("known") or ())

    def from_environment(full):
        if given is not None:
            return full in given
        return full not in known and full.split(":", 1)[0] != "pulumi"

    def read(name, original, kind, required, secret):
        def method(self, key, *args, **kwargs):
            full = self.full_key(key)
            if not from_environment(full) or (required and get_config(full) is None) or \
                    (kind is not None and given is not None):
                return original(self, key, *args, **kwargs)
            if kind is not None:
                raise ConfigValueUnknownError("Configuration value '%s' is read as %s, and offline its value is "
                                              "unknown" % (full, TYPED_READS[kind]))
            value = CONFIG_READ % (UNKNOWN, quote(full, safe=":/._-"))
            return pulumi.Output.secret(value) if secret else value

        method.__name__ = name
        return method

    for name in [n for n in vars(pulumi.Config) if n.startswith(("get", "require"))]:
        kind = next((k for k in TYPED_READS if name.endswith("_" + k)), None)
        setattr(pulumi.Config, name, read(name, getattr(pulumi.Config, name), kind, name.startswith("require"),
                                          "_secret" in name))


def _concatenation_keeps_known_parts():
    from pulumi.output import Output

    original = Output.concat

    def concat(*args):
        items = [Output.from_input(arg) for arg in args]
        joined = original(*args)

        async def partial():
            if await joined.is_known():
                return None
            parts = []
            for item in items:
                value = await item.future() if await item.is_known() else None
                parts.append(UNKNOWN if value is None else str(value))
            text = "".join(parts)
            return text if text.replace(UNKNOWN, "") else None  # nothing known: unknown, as before

        kept = asyncio.ensure_future(partial())

        async def value():
            text = await kept
            return text if text is not None else await joined.future(with_unknowns=True)

        async def is_known():
            return (await kept) is not None or await joined.is_known()

        return Output(joined.resources(), value(), is_known(), joined.is_secret())

    Output.concat = staticmethod(concat)


def _outputs_awaited_in_linear_time():
    import types

    from pulumi.runtime import stack as stack_module

    async def wait(tasks, *, timeout=None, return_when=asyncio.ALL_COMPLETED):
        if return_when == asyncio.FIRST_COMPLETED:
            return_when = asyncio.FIRST_EXCEPTION
        return await asyncio.wait(tasks, timeout=timeout, return_when=return_when)

    shim = types.ModuleType("asyncio")
    shim.__dict__.update({k: v for k, v in vars(asyncio).items() if not k.startswith("__")})
    shim.wait = wait
    stack_module.asyncio = shim


def _resource_types_once_per_class():
    from pulumi import _types

    original, derived = _types.resource_types, {}

    def resource_types(resource_cls):
        try:
            return derived[resource_cls]
        except KeyError:
            return derived.setdefault(resource_cls, original(resource_cls))

    _types.resource_types = resource_types


def _callbacks_on_unix_socket(folder):
    """The SDK's callbacks server (transforms, hooks: the engine calls back into the program) listens on
    127.0.0.1 in the program's own network namespace, which the engine cannot reach; it also listens on a
    Unix socket in the run's scratch folder, which is the target the engine is told (`engine.callbacks`)."""
    from pulumi.runtime import _callbacks

    servicer = getattr(_callbacks, "_CallbackServicer")
    original = servicer.__init__
    count = [0]

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        count[0] += 1
        target = "unix:" + os.path.join(folder, "callbacks-%d.sock" % count[0])
        self._server.add_insecure_port(target)
        self._target = target

    servicer.__init__ = __init__


def _no_debug_log():
    """The SDK sends every `log.debug` line to the engine as a synchronous `Log` call from the event
    loop (five per resource: "registering resource", "prepared", "successful", ...); this engine drops
    debug lines, so they are not sent (the program's own debug lines neither)."""
    import pulumi.log

    pulumi.log.debug = lambda *args, **kwargs: None


PROVENANCE = "pubsubguard:provenance "  # a debug line to the engine: where resources' Output inputs come from
MAX_PROVENANCE = 64 * 1024  # per resource
BATCH = 500  # resources per line


def _camel(name):
    head, *rest = str(name).split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _trace_outputs(send):
    """Where each Output comes from: a resource's output property (`id`, `email`, ...), and the `apply` /
    `Output.all` it went through. Reported for every resource input that is an Output, in a debug line
    to the engine (`PROVENANCE`), which attaches it to the inputs that are unknown at preview. A report,
    never a judgement: the rules decide from the engine's own records (property dependencies)."""
    import pulumi.resource as resource_module
    from pulumi import Output

    def origin(value):
        """(sources, via) recorded on an Output (read from its __dict__: Output lifts attribute access)."""
        if not isinstance(value, Output):  # cheap for the strings and numbers most inputs are
            return None
        found = value.__dict__.get("_pubsubguard_from")
        return found if isinstance(found, tuple) else None

    _trace_combinators(Output, origin)
    return _trace_registrations(resource_module, Output, origin, send)


def _tag(output, sources, via):
    try:
        output.__dict__["_pubsubguard_from"] = (tuple(sources), tuple(via))
    except (AttributeError, TypeError):
        pass
    return output


def _trace_combinators(Output, origin) -> None:  # noqa: N803 - the SDK's class
    """`apply` and `Output.all` pass their operands' origins on to their result."""
    apply = Output.apply

    def traced_apply(self, func, *args, **kwargs):
        result = apply(self, func, *args, **kwargs)
        found = origin(self)
        return _tag(result, found[0], found[1] + ("apply",)) if found else result

    Output.apply = traced_apply
    everything = Output.all

    def traced_all(*args, **kwargs):
        result = everything(*args, **kwargs)
        sources, via = [], []
        for value in list(args) + list(kwargs.values()):
            found = origin(value)
            if found:
                sources += [s for s in found[0] if s not in sources]
                via += [v for v in found[1] if v not in via]
        return _tag(result, sources, tuple(via) + ("all",)) if sources else result

    Output.all = staticmethod(traced_all)


def _trace_registrations(resource_module, Output, origin, send):  # noqa: N803 - the SDK's class
    """Each registration's inputs that hold an Output with an origin, batched to `send`; each output property's
    Output marked with its resource. Returns the flush of the last batch."""
    plain = (str, int, float, bool, type(None))

    def walk(value, path, found, depth=0):
        """`path` is a tuple of keys and indexes, spelled only where an Output with an origin is found
        (most inputs are plain values: spelling every path cost the plan at 1,000 topics)."""
        if isinstance(value, plain):
            return
        source = origin(value)
        if source:
            found[_spell(path)] = {"from": [{"type": t, "name": n, "output": _camel(k)} for t, n, k in source[0]],
                                   "via": list(source[1])}
        elif depth < 8 and isinstance(value, dict):
            for key, item in value.items():
                walk(item, path + (key,), found, depth + 1)
        elif depth < 8 and isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, path + (index,), found, depth + 1)
        elif depth < 8 and hasattr(type(value), "_pulumi_input_type") and hasattr(value, "__dict__"):
            for key, item in vars(value).items():
                walk(item, path + (key,), found, depth + 1)

    register = resource_module.register_resource
    pending = []

    def flush():
        """Send what was gathered, in one debug line (a synchronous Log call per resource cost the plan
        a fifth of its time)."""
        batch, pending[:] = list(pending), []
        text = pulumi_json_dumps(batch) if batch else ""
        if text and len(text) < MAX_PROVENANCE * BATCH:
            send(PROVENANCE + text)

    def traced_register(res, ty, name, *args, **kwargs):
        try:  # a report only: whatever happens here, the registration goes on untouched
            props = args[3] if len(args) > 3 else kwargs.get("props")
            found = {}
            for key, value in (props.items() if isinstance(props, dict) else ()):
                walk(value, (key,), found)
            if found:
                pending.append({"type": ty, "name": name, "inputs": found})
                if len(pending) >= BATCH:
                    flush()
        except Exception:  # noqa: BLE001
            pass
        result = register(res, ty, name, *args, **kwargs)
        try:  # each output property's Output remembers its resource (one dict write each: 8,401 resources
            # of ~20 outputs at 1,000 topics)
            for key, value in list(vars(res).items()):
                if type(value) is Output:
                    value.__dict__["_pubsubguard_from"] = (((ty, name, key.lstrip("_")),), ())
        except Exception:  # noqa: BLE001
            pass
        return result

    resource_module.register_resource = traced_register
    return flush


def _spell(path):
    """('dead_letter_policy', 'dead_letter_topic') -> 'deadLetterPolicy.deadLetterTopic'; indexes as [i]."""
    text = _camel(path[0])
    for part in path[1:]:
        text += "[%d]" % part if isinstance(part, int) else "." + _camel(part)
    return text


def pulumi_json_dumps(value):
    import json

    return json.dumps(value, sort_keys=True, default=str)


def _count_constructions(activity, max_resources):
    """Count constructions (the watchdog names what a stuck program waits for) and stop the program at
    the resource limit: a loop constructing resources runs before any of them registers, so the
    engine alone would see the limit crossed only after the program's memory ran out."""
    import pulumi
    import pulumi.resource as resource_module

    def counted(original):
        def call(res, ty, name, *args, **kwargs):
            with activity.lock:
                activity.started[(ty, name)] = activity.started.get((ty, name), 0) + 1
                activity.count += 1
                over = activity.count > max_resources
            if over:
                raise pulumi.RunError("the program registered more than {:,} resources (--max-resources "
                                      "raises the limit)".format(max_resources))
            activity.touch()
            return original(res, ty, name, *args, **kwargs)

        return call

    resource_module.register_resource = counted(resource_module.register_resource)
    resource_module.read_resource = counted(resource_module.read_resource)


def _count_answers(stub, activity):
    """The monitor's answers are progress; a registration answered finishes its construction."""
    for method in ("RegisterResource", "ReadResource", "Invoke", "RegisterResourceOutputs"):
        original = getattr(stub, method, None)
        if original is None:
            continue

        def answered(request, *args, __original=original, __method=method, **kwargs):
            try:
                return __original(request, *args, **kwargs)
            finally:
                if __method in ("RegisterResource", "ReadResource"):
                    key = (request.type, request.name)
                    with activity.lock:
                        activity.finished[key] = activity.finished.get(key, 0) + 1
                activity.touch()

        setattr(stub, method, answered)


def _watch(activity, main_thread, idle_timeout, on_stuck):
    """Sample where the program's thread is; stuck when nothing moved for `idle_timeout` seconds."""
    last_where = None
    while True:
        time.sleep(0.1)
        frame = sys._current_frames().get(main_thread.ident)
        waiting = frame is None or (frame.f_code.co_name == "select" and frame.f_code.co_filename.endswith("selectors.py"))
        if not waiting:
            where = (id(frame), frame.f_lasti, frame.f_lineno)
            if where != last_where:
                activity.touch()
            last_where = where
        if time.monotonic() - activity.last > idle_timeout:
            with activity.lock:
                pending = ["%s %r" % (ty, name) for (ty, name), count in sorted(activity.started.items())
                           if count > activity.finished.get((ty, name), 0)]
            if pending:
                what = "waiting for %s%s, whose inputs never resolved" % (
                    pending[0], " (and %d more)" % (len(pending) - 1) if len(pending) > 1 else "")
            else:
                what = "waiting on something that never completes"
            on_stuck("the program made no progress for %g s, %s" % (idle_timeout, what))
            return


def _socket_folder(monitor):
    """The folder of the engine's Unix sockets (`unix:/scratch/monitor.sock`), where the program's own go."""
    return os.path.dirname(monitor[len("unix:"):]) if monitor and monitor.startswith("unix:") else os.getcwd()


def program_error(err, root):
    """`file:line: Type: message` in one line, the line in the program's own files where it failed."""
    import pulumi

    message = str(err).strip() or err.__class__.__name__
    if isinstance(err, pulumi.RunError):  # a message for the user as it is (the SDK shows no stack trace)
        return message
    root = os.path.realpath(root) + os.sep
    place = ""
    for frame in traceback.extract_tb(err.__traceback__):
        path = os.path.realpath(frame.filename)
        if path.startswith(root):
            place = "%s:%s: " % (path[len(root):], frame.lineno)
    if isinstance(err, SyntaxError) and err.filename:
        path = os.path.realpath(err.filename)
        if path.startswith(root):
            place = "%s:%s: " % (path[len(root):], err.lineno)
        message = err.msg or message
    # one line: an SDK's message of several (its "While processing resource: ..." and then the cause) joined
    return " ".join(part.strip() for part in ("the program failed: %s%s: %s" % (
        place, err.__class__.__name__, message)).splitlines() if part.strip())


def main(argv=None):
    args = _arguments(argv)
    if args.config_file:
        import json

        with open(args.config_file) as handle:
            os.environ.update(json.load(handle))
    try:
        import pulumi
        import pulumi.runtime
    except ImportError as err:
        print("pulumi SDK not importable: %s" % err, file=sys.stderr)
        return NO_SDK

    config_env = pulumi.runtime.get_config_env()
    if hasattr(pulumi.runtime, "get_config_secret_keys_env") and hasattr(pulumi.runtime, "set_all_config"):
        pulumi.runtime.set_all_config(config_env, pulumi.runtime.get_config_secret_keys_env())
    else:
        for key, value in config_env.items():
            pulumi.runtime.set_config(key, value)

    reads = os.environ.pop(ENVIRONMENT_READS, None)
    if reads:
        import json

        _patch("environments", lambda: _config_from_environments(json.loads(reads)))
    activity = Activity()
    for description, function in (("unknowns", _unknowns_print_as_sentinel),
                                   ("unknown fields", _unknown_fields_of_typed_values),
                                   ("concatenations", _concatenation_keeps_known_parts),
                                   ("linear wait", _outputs_awaited_in_linear_time),
                                   ("types", _resource_types_once_per_class),
                                   ("debug", _no_debug_log),
                                   ("callbacks", lambda: _callbacks_on_unix_socket(_socket_folder(args.monitor))),
                                   ("count", lambda: _count_constructions(activity, args.max_resources))):
        _patch(description, function)
    settings = _settings(pulumi.runtime, args)
    _patch("answers", lambda: _count_answers(settings.monitor, activity))
    flushes = []
    _patch("provenance", lambda: flushes.append(_trace_outputs(lambda message: _log(settings, "DEBUG", message))))
    pulumi.runtime.configure(settings)
    return _run(pulumi.runtime, args, settings, activity, flushes)


def _arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Execute a Pulumi Python program (pubsubguard)")
    for option in ("--project", "--stack", "--monitor", "--engine", "--pwd", "--root_directory", "--organization"):
        parser.add_argument(option)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--dry_run", default="true")
    parser.add_argument("--idle-timeout", type=float, default=60.0)
    parser.add_argument("--max-resources", type=int, default=50000)
    parser.add_argument("--config-file", help="JSON of the environment's PULUMI_CONFIG* variables (a large "
                                              "stack config does not fit in one environment variable)")
    parser.add_argument("PROGRAM")
    return parser.parse_args(argv)


def _settings(runtime, args):
    """The SDK's `Settings` for the engine's addresses, with what this SDK version takes of them."""
    kwargs = {"monitor": args.monitor, "engine": args.engine, "project": args.project, "stack": args.stack,
              "parallel": args.parallel, "dry_run": args.dry_run == "true", "organization": args.organization,
              "root_directory": args.root_directory}
    try:
        return runtime.Settings(**kwargs)
    except TypeError:
        import inspect

        accepted = inspect.signature(runtime.Settings.__init__).parameters
        return runtime.Settings(**{k: v for k, v in kwargs.items() if k in accepted})


def _log(settings, severity: str, message: str) -> None:
    """To the engine's `Log` (`severity` an engine_pb2 name), as `pulumi.log` sends it (from any thread)."""
    from pulumi.runtime.proto import engine_pb2

    settings.engine.Log(engine_pb2.LogRequest(severity=getattr(engine_pb2, severity), message=message, urn=""))


def _run(runtime, args, settings, activity: Activity, flushes: list) -> int:
    """The program run in its stack, as the language host runs it, under the idle watchdog; its exit code."""
    sys.argv = [args.PROGRAM]
    if args.pwd:
        os.chdir(args.pwd)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(max_workers=max(args.parallel, 1) * 4)
    loop.set_default_executor(executor)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # as the language host

    def stuck(message):
        try:
            _log(settings, "ERROR", message)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(ERROR_SHOWN)

    threading.Thread(target=_watch, args=(activity, threading.current_thread(), args.idle_timeout, stuck),
                     daemon=True, name="pubsubguard-watchdog").start()
    exit_code = 1
    gc.disable()
    try:
        loop.run_until_complete(runtime.run_in_stack(lambda: runpy.run_path(args.PROGRAM, run_name="__main__")))
        exit_code = 0
    except BaseException as err:  # noqa: BLE001 - shown through the engine, as the language host does
        if isinstance(err, KeyboardInterrupt):
            raise
        try:
            _log(settings, "ERROR", program_error(err, args.root_directory or os.getcwd()))
        except Exception:  # noqa: BLE001 - the engine went away: the exit code says it
            pass
        exit_code = ERROR_SHOWN
    finally:
        for flush in flushes:
            try:
                flush()
            except Exception:  # noqa: BLE001 - a report only
                pass
        gc.enable()
        executor.shutdown(wait=False)
        sys.stdout.flush()
        sys.stderr.flush()
    return exit_code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the SDK's executor threads may still wait on RPCs: the run is over
