// The program's side of `pubsubguard plan` and `check` for Node.js (`runtime: nodejs`): what
// pulumi-language-nodejs does before it hands the program to the SDK's own entry point
// (`@pulumi/pulumi/cmd/run`), run by the project's own `node` in the confined child.
//
// NOT loaded by pubsubguard: `pubsubguard.core.langhost_node` copies this file into the run's scratch
// directory and starts it as
//     node pubsubguard-language-nodejs-exec.js --config-file F --idle-timeout S --max-resources N \
//          --root-directory DIR RUN_PATH --monitor ADDR --engine ADDR --project P --stack S --dry-run ...
// where RUN_PATH is the project's own `node_modules/@pulumi/pulumi/cmd/run`. It reads the config the
// language host would put in PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS (from a file: a large stack's
// config does not fit in one environment variable), applies the preview semantics below to the
// project's own SDK, then runs `cmd/run` with the arguments the language host passes.
//
// Preview semantics the engine alone cannot give (as langhost_exec.py does for Python):
// - an invoke the engine cannot answer offline (`pubsubguard:unknown-result`) is an object whose echoed
//   arguments are known, whose string fields (by the result type the provider package declares) read as
//   the engine's unknown sentinel, so a string built from one is unknown (`service-${project.number}@...`
//   is never `service-undefined@...`), and whose other fields read as an unknown of any type (never a
//   false 0, false or []), as Python fills the result type's string fields and leaves the others empty;
// - a nested field a new resource's inputs did not set reads as that unknown of any type
//   (`fn.serviceConfig.apply(c => c.uri)` is never `undefined`), the fields they set staying known,
//   as Python's `pulumi.get` patch reads it;
// - a string the program interpolates (`pulumi.interpolate`, `pulumi.concat`) from known parts and
//   unknown ones keeps its known parts, the sentinel standing for the unknown ones ("http://" + an
//   unknown name): the engine records it unknown and lets a rule judge by its known parts (a push
//   endpoint's scheme), as for Python's `Output.concat` and f-strings;
// - where each Output input comes from (a resource's output property, the `apply` / `all` /
//   `interpolate` it went through) is reported to the engine in debug lines (`pubsubguard:provenance `),
//   which it attaches to the inputs unknown at preview: a report, never a judgement;
// - a configuration value the stack's ESC environments set or may set is unknown where the program reads
//   it as text, the sentinel marked with its key (`patchConfigFromEnvironments`, as for Python);
// - a program that makes no progress (nothing constructed, no engine call answered) for
//   `--idle-timeout` seconds is stopped with an error naming the resource it waits for;
// - constructions are counted, and the program stopped at `--max-resources`;
// - a failure is reported as `the program failed: FILE:LINE: Type: message`, the line in the
//   program's own files (the SDK's source maps give TypeScript lines).
// - the SDK's colored report of an error is made without colors where Node.js's colorizer would
//   never end on its stack (`patchInspect`): a config error is its one line, never a memory crash.
// A speed-up that changes nothing a program or the engine can see: the SDK's debug lines are not sent
// (this engine drops them; the SDK sends about fifteen asynchronous `Log` calls per resource).
// Nothing here is trusted by the engine: the verdict is computed from the registrations it received.
"use strict";

const fs = require("fs");
const path = require("path");

const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";
const UNKNOWN_RESULT = "pubsubguard:unknown-result"; // engine.UNKNOWN_RESULT
const ERROR_SHOWN = 32; // as the SDK: an error message was shown to the user

function options(argv) {
    const own = { "--config-file": "", "--idle-timeout": "60", "--max-resources": "50000", "--root-directory": "" };
    let index = 0;
    while (index < argv.length && Object.prototype.hasOwnProperty.call(own, argv[index])) {
        own[argv[index]] = argv[index + 1];
        index += 2;
    }
    return { own, runPath: argv[index], rest: argv.slice(index + 1) };
}

// Fields a program may read from an object; names no data source or output type has are left alone
// (the SDK and libraries probe objects for `then`, `__pulumiOutput`, `toJSON`, ...).
const NOT_FIELDS = new Set(["then", "toJSON", "toString", "valueOf", "constructor", "inspect", "length",
    "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "toLocaleString", "asymmetricMatch", "nodeType"]);
const isField = (target, key) => typeof key === "string" && !(key in target) && !NOT_FIELDS.has(key) &&
    /^[a-z][A-Za-z0-9]*$/.test(key);

// A value unknown at preview whose type nobody here knows (Python's `Unknown()`): the SDK's own unknown
// (an input or an `apply` result holding it is unknown), formatted into a string as the engine's
// sentinel (the string is unknown, its known parts kept), a number only as NaN (never a false 0), and
// its own fields unknown too (`fn.serviceConfig.apply(c => c.scaling.max)`).
function unknownOfAnyType(sdk) {
    const outputs = require(path.join(sdk, "output"));
    const base = Object.create(Object.getPrototypeOf(outputs.unknown));
    const hidden = (value) => ({ value, enumerable: false });
    Object.defineProperties(base, {
        __pulumiUnknown: hidden(true),
        [Symbol.toPrimitive]: hidden((hint) => (hint === "number" ? NaN : UNKNOWN)),
        toString: hidden(() => UNKNOWN),
        toJSON: hidden(() => UNKNOWN),
    });
    const unknown = new Proxy(base, {
        get: (target, key, receiver) => (isField(target, key) ? unknown : Reflect.get(target, key, receiver)),
    });
    return unknown;
}

// The string fields of a data source's result type, from the provider package's own declarations
// (`@pulumi/gcp/organizations/getProject.d.ts`: `interface GetProjectResult { readonly number: string; }`),
// as Python reads them from the result type: null where they cannot be found.
function resultStringFields(token, root) {
    const found = /^([a-z0-9-]+):([A-Za-z0-9_/]+):([A-Za-z0-9_]+)$/.exec(token || "");
    if (!found) {
        return null;
    }
    const [, pkg, module, fn] = found;
    try {
        const manifest = require.resolve(`@pulumi/${pkg}/package.json`, { paths: [root || process.cwd()] });
        const text = fs.readFileSync(path.join(path.dirname(manifest), `${module}.d.ts`), "utf8");
        const name = `${fn[0].toUpperCase()}${fn.slice(1)}Result`;
        const start = text.indexOf(`export interface ${name} {`);
        if (start < 0) {
            return null;
        }
        const end = text.indexOf("\n}", start);
        const body = text.slice(start, end < 0 ? undefined : end);
        const fields = new Set();
        for (const [, field] of body.matchAll(/^\s*readonly\s+([A-Za-z_$][\w$]*)\??\s*:\s*string\s*;\s*$/gm)) {
            fields.add(field);
        }
        return fields;
    } catch (err) {
        return null;
    }
}

// An invoke the engine cannot answer offline (`pubsubguard:unknown-result`): the arguments it echoes
// are known; a string field of the result type reads as the sentinel (a string built from it is
// unknown, and string methods work on it), any other field as the unknown of any type (never a false
// 0, [] or false); where the result type cannot be read, every field is the unknown of any type.
function unknownResult(known, stringFields, unknown) {
    return new Proxy(known, {
        get(target, key, receiver) {
            if (!isField(target, key)) {
                return Reflect.get(target, key, receiver);
            }
            return stringFields && stringFields.has(key) ? UNKNOWN : unknown;
        },
    });
}

function patchInvokes(sdk, root) {
    const rpc = require(path.join(sdk, "runtime", "rpc"));
    const settings = require(path.join(sdk, "runtime", "settings"));
    const unknown = unknownOfAnyType(sdk);
    const tokens = new WeakMap(); // the response's `return` struct -> the invoke's token
    const fields = new Map(); // token -> string fields of its result type (or null)
    const getMonitor = settings.getMonitor;
    const wrapped = new WeakSet();
    settings.getMonitor = function () {
        const monitor = getMonitor.apply(this, arguments);
        if (monitor && !wrapped.has(monitor) && typeof monitor.invoke === "function") {
            wrapped.add(monitor);
            const invoke = monitor.invoke;
            monitor.invoke = function (request, ...rest) {
                const last = rest.length - 1;
                if (typeof rest[last] === "function" && request && request.getTok) {
                    const callback = rest[last];
                    rest[last] = function (err, response) {
                        try {
                            const struct = response && response.getReturn && response.getReturn();
                            if (struct && typeof struct === "object") {
                                tokens.set(struct, request.getTok());
                            }
                        } catch (error) {
                            // the result is then read without its type
                        }
                        return callback.apply(this, arguments);
                    };
                }
                return invoke.call(this, request, ...rest);
            };
        }
        return monitor;
    };
    const original = rpc.deserializeProperties;
    rpc.deserializeProperties = function (struct, keepUnknowns) {
        const result = original.apply(this, arguments);
        if (result && typeof result === "object" && result[UNKNOWN_RESULT] === true) {
            delete result[UNKNOWN_RESULT];
            const token = struct && typeof struct === "object" ? tokens.get(struct) : undefined;
            if (token !== undefined && !fields.has(token)) {
                fields.set(token, resultStringFields(token, root));
            }
            return unknownResult(result, token !== undefined ? fields.get(token) : null, unknown);
        }
        return result;
    };
}

// A nested field a new resource's inputs did not set is computed by the provider: unknown at preview,
// never absent (`fn.serviceConfig.apply(c => c.uri)`, `fn.serviceConfig.uri`), as Python's `pulumi.get`
// patch reads it. The objects among a new custom resource's outputs read an unset field as the unknown
// of any type; the fields that are set stay as they are, so an output whose fields are all known stays
// known (a URL's documented form, `facts.documented_forms`, is one of them). The engine cannot do this
// in its answer: it has no provider schema to name the unset fields, and an unknown field in the
// answer would make the whole object unknown to the SDK, hiding the known fields.
function patchNestedOutputs(sdk) {
    const rpc = require(path.join(sdk, "runtime", "rpc"));
    const settings = require(path.join(sdk, "runtime", "settings"));
    const unknown = unknownOfAnyType(sdk);
    const absentIsUnknown = (value, depth) => {
        if (value === null || typeof value !== "object" || depth > 32) {
            return value;
        }
        if (Array.isArray(value)) {
            value.forEach((item, index) => { value[index] = absentIsUnknown(item, depth + 1); });
            return value;
        }
        if (Object.getPrototypeOf(value) !== Object.prototype) {
            return value; // an asset, a resource, an unknown: as they are
        }
        for (const key of Object.keys(value)) {
            value[key] = absentIsUnknown(value[key], depth + 1);
        }
        return new Proxy(value, {
            get: (target, key, receiver) => (isField(target, key) ? unknown : Reflect.get(target, key, receiver)),
        });
    };
    const original = rpc.resolveProperties;
    rpc.resolveProperties = function (res, resolvers, t, name, allProps, deps, err) {
        try {
            if (!err && allProps && settings.isDryRun() && res && res.__pulumiCustomResource === true) {
                for (const key of Object.keys(allProps)) {
                    if (key !== "id" && key !== "urn") {
                        allProps[key] = absentIsUnknown(allProps[key], 0);
                    }
                }
            }
        } catch (error) {
            // the outputs are resolved as they are
        }
        return original.apply(this, arguments);
    };
}

// Reads of configuration values the stack's ESC environments set or may set are unknown at preview, as
// langhost_exec.py's `_config_from_environments` makes them (`reads`: `{unknown: [keys]}` with their
// values given, `{known: [keys]}` unread): a text read is the sentinel marked with its key, `require` of
// a key nothing here sets fails as the SDK fails it, a typed read of an unread environment's key fails in
// one line and of a given one is the value given.
const ENVIRONMENT_READS = "PUBSUBGUARD_ENVIRONMENT_READS"; // project.ENVIRONMENT_READS
const TYPED_READS = { Boolean: "a boolean", Number: "a number", Object: "an object" };

function patchConfigFromEnvironments(sdk, reads) {
    const { Config } = require(path.join(sdk, "config"));
    const { getConfig } = require(path.join(sdk, "runtime", "config"));
    const { secret } = require(path.join(sdk, "output"));
    const given = reads.unknown ? new Set(reads.unknown) : null;
    const known = new Set(reads.known || []);
    const fromEnvironment = (full) => (given ? given.has(full) : !known.has(full) && full.split(":")[0] !== "pulumi");
    const names = Object.getOwnPropertyNames(Config.prototype).filter((name) => /^(get|require)/.test(name) &&
        !name.endsWith("Impl"));
    for (const name of names) {
        const original = Config.prototype[name];
        const kind = Object.keys(TYPED_READS).find((type) => name.endsWith(type));
        const required = name.startsWith("require");
        Config.prototype[name] = function (key, ...rest) {
            const full = this.fullKey(key);
            if (!fromEnvironment(full) || (required && getConfig(full) === undefined) || (kind && given)) {
                return original.call(this, key, ...rest);
            }
            if (kind) {
                const err = new Error(`Configuration value '${full}' is read as ${TYPED_READS[kind]}, and offline ` +
                    "its value is unknown");
                err.name = "ConfigValueUnknownError";
                throw err;
            }
            const value = `${UNKNOWN}<config ${encodeURIComponent(full)}>`; // engine_values.CONFIG_READ
            return name.includes("Secret") ? secret(value) : value;
        };
    }
}

function patchConcatenation(sdk) {
    const outputs = require(path.join(sdk, "output"));
    const concat = outputs.concat;
    const joinKeepingKnownParts = (parts) => {
        const items = parts.map((part) => outputs.output(part));
        const joined = concat(...parts);
        const kept = (async () => {
            if (await joined.isKnown) {
                return undefined;
            }
            const texts = [];
            for (const item of items) {
                const value = (await item.isKnown) ? await item.promise() : undefined;
                if (value !== undefined && value !== null && typeof value === "object") {
                    return undefined; // not a string's part: unknown, as before
                }
                texts.push(value === undefined ? UNKNOWN : String(value));
            }
            const text = texts.join("");
            return text.split(UNKNOWN).join("") ? text : undefined; // nothing known: unknown, as before
        })();
        const value = kept.then((text) => (text !== undefined ? text : joined.promise(true)));
        const isKnown = kept.then(async (text) => text !== undefined || (await joined.isKnown));
        return new outputs.Output(joined.resources(), value, isKnown, joined.isSecret, joined.allResources());
    };
    const patched = {
        concat: (...params) => joinKeepingKnownParts(params),
        interpolate: (literals, ...placeholders) => {
            const parts = [];
            placeholders.forEach((placeholder, index) => parts.push(literals[index], placeholder));
            parts.push(literals[literals.length - 1]);
            return joinKeepingKnownParts(parts);
        },
    };
    Object.assign(outputs, patched);
    Object.assign(require(sdk), patched); // the package's index copied them when it loaded
}

const PROVENANCE = "pubsubguard:provenance "; // engine.PROVENANCE
const BATCH = 500; // resources per line

function traceOutputs(sdk, send) {
    const outputs = require(path.join(sdk, "output"));
    const resource = require(path.join(sdk, "runtime", "resource"));
    const origins = new WeakMap(); // Output -> { from: [[type, name, property]], via: [...] }
    const isOutput = (value) => value !== null && typeof value === "object" && value.__pulumiOutput === true;
    const tag = (result, sources, via) => {
        if (isOutput(result) && sources.length) {
            origins.set(result, { from: sources, via });
        }
        return result;
    };
    const gathered = (values, step) => {
        const sources = [];
        const via = [];
        for (const value of values) {
            const found = isOutput(value) ? origins.get(value) : undefined;
            for (const source of (found ? found.from : [])) {
                if (!sources.some((s) => s.join("\0") === source.join("\0"))) {
                    sources.push(source);
                }
            }
            for (const stepped of (found ? found.via : [])) {
                if (!via.includes(stepped)) {
                    via.push(stepped);
                }
            }
        }
        return [sources, [...via, step]];
    };
    const apply = outputs.Output.prototype.apply;
    outputs.Output.prototype.apply = function (func, runWithUnknowns) {
        const result = apply.call(this, func, runWithUnknowns);
        const found = origins.get(this);
        return found ? tag(result, found.from, [...found.via, "apply"]) : result;
    };
    const wrap = (name) => {
        const original = outputs[name];
        const traced = function (...args) {
            const result = original.apply(this, args);
            const values = name === "all" ? (Array.isArray(args[0]) ? args[0] : Object.values(args[0] || {})) :
                name === "interpolate" ? args.slice(1) : args;
            const [sources, via] = gathered(values, name);
            return tag(result, sources, via);
        };
        outputs[name] = traced;
        require(sdk)[name] = traced; // the package's index copied it when it loaded
    };
    ["all", "concat", "interpolate"].forEach(wrap);
    const walk = (value, where, found, depth) => {
        if (value === null || typeof value !== "object" || depth > 8) {
            return;
        }
        const origin = isOutput(value) ? origins.get(value) : undefined;
        if (origin) {
            found[where] = { from: origin.from.map(([type, name, output]) => ({ type, name, output })),
                             via: origin.via };
        } else if (Array.isArray(value)) {
            value.forEach((item, index) => walk(item, `${where}[${index}]`, found, depth + 1));
        } else if (!isOutput(value) && Object.getPrototypeOf(value) === Object.prototype) {
            for (const [key, item] of Object.entries(value)) {
                walk(item, `${where}.${key}`, found, depth + 1);
            }
        }
    };
    let pending = [];
    let scheduled = false;
    const flush = () => {
        scheduled = false;
        const batch = pending;
        pending = [];
        if (batch.length) {
            send(PROVENANCE + JSON.stringify(batch));
        }
    };
    const register = resource.registerResource;
    resource.registerResource = function (res, parent, t, name, custom, remote, newDependency, props) {
        try { // a report only: whatever happens here, the registration goes on untouched
            const found = {};
            for (const [key, value] of Object.entries(props || {})) {
                walk(value, key, found, 0);
            }
            if (Object.keys(found).length) {
                pending.push({ type: t, name, inputs: found });
                if (pending.length >= BATCH) {
                    flush();
                } else if (!scheduled) {
                    scheduled = true;
                    setTimeout(flush, 0);
                }
            }
        } catch (err) {
            // a report only
        }
        const result = register.apply(this, arguments);
        try {
            for (const [key, value] of Object.entries(res)) {
                if (isOutput(value) && !key.startsWith("__")) {
                    origins.set(value, { from: [[t, name, key]], via: [] });
                }
            }
        } catch (err) {
            // a report only
        }
        return result;
    };
}

// The SDK's callbacks server (transforms, hooks: the engine calls back into the program) listens on
// 127.0.0.1 in the program's own network namespace, which the engine cannot reach; it also listens on a
// Unix socket in the run's scratch folder, which is the target the engine is told (`engine.callbacks`),
// as langhost_exec.py does for Python. The extra listener is unref'd as the SDK's own is, so it never
// keeps the program alive.
function patchCallbacks(sdk, folder) {
    const callbacks = require(path.join(sdk, "runtime", "callbacks"));
    const grpc = require(require.resolve("@grpc/grpc-js", { paths: [sdk] }));
    const Original = callbacks.CallbackServer;
    if (typeof Original !== "function" || !folder) {
        return;
    }
    let count = 0;
    class OnUnixSocket extends Original {
        constructor(...args) {
            super(...args);
            count += 1;
            const target = `unix:${path.join(folder, `callbacks-${count}.sock`)}`;
            const server = this._server;
            const before = new Set(server.http2Servers ? server.http2Servers.keys() : []);
            this._target = Promise.resolve(this._target).then(() => new Promise((resolve, reject) => {
                server.bindAsync(target, grpc.ServerCredentials.createInsecure(), (err) => {
                    if (err) {
                        reject(err);
                        return;
                    }
                    for (const http2 of (server.http2Servers ? server.http2Servers.keys() : [])) {
                        if (!before.has(http2) && typeof http2.unref === "function") {
                            http2.unref();
                            http2.on("session", (session) => session.unref());
                        }
                    }
                    resolve(target);
                });
            }));
        }
    }
    callbacks.CallbackServer = OnUnixSocket;
}

function socketFolder(rest) {
    const index = rest.indexOf("--monitor");
    const address = index >= 0 ? rest[index + 1] || "" : "";
    return address.startsWith("unix:") ? path.dirname(address.slice("unix:".length)) : "";
}

class Activity {
    constructor() {
        this.last = Date.now();
        this.started = new Map();
        this.finished = new Map();
        this.count = 0;
    }
    touch() {
        this.last = Date.now();
    }
}

// Constructions are counted, and the program stopped once it constructed more than `maxResources`: the
// construction over the limit and every later one are not registered (throwing from inside the SDK's
// constructor sends the SDK's own error reporting into a loop), the limit is logged as the program's
// error and the program exits. A loop that goes on constructing synchronously is stopped where it is.
function countConstructions(sdk, activity, maxResources, stop) {
    const resource = require(path.join(sdk, "runtime", "resource"));
    for (const name of ["registerResource", "readResource"]) {
        const original = resource[name];
        resource[name] = function (res, parent, t, label) {
            const key = `${t} '${label}'`;
            activity.count += 1;
            activity.touch();
            if (activity.count > maxResources) {
                const message = `the program registered more than ${maxResources.toLocaleString("en-US")} ` +
                    "resources (--max-resources raises the limit)";
                if (activity.count === maxResources + 1) {
                    stop(message);
                } else if (activity.count > 2 * maxResources + 10000) {
                    process.stderr.write(`${message}\n`);
                    process.exit(ERROR_SHOWN);
                }
                return undefined;
            }
            activity.started.set(key, (activity.started.get(key) || 0) + 1);
            return original.apply(this, arguments);
        };
    }
    const settings = require(path.join(sdk, "runtime", "settings"));
    const getMonitor = settings.getMonitor;
    const wrapped = new WeakSet();
    settings.getMonitor = function () {
        const monitor = getMonitor.apply(this, arguments);
        if (monitor && !wrapped.has(monitor)) {
            wrapped.add(monitor);
            for (const method of ["registerResource", "readResource", "invoke", "registerResourceOutputs"]) {
                const call = monitor[method];
                if (typeof call !== "function") {
                    continue;
                }
                monitor[method] = function (request, ...rest) {
                    const last = rest.length - 1;
                    if (typeof rest[last] === "function") {
                        const callback = rest[last];
                        rest[last] = function () {
                            activity.touch();
                            if ((method === "registerResource" || method === "readResource") && request.getType) {
                                const key = `${request.getType()} '${request.getName()}'`;
                                activity.finished.set(key, (activity.finished.get(key) || 0) + 1);
                            }
                            return callback.apply(this, arguments);
                        };
                    }
                    return call.call(monitor, request, ...rest);
                };
            }
        }
        return monitor;
    };
}

function watch(activity, idleTimeoutS, onStuck) {
    const timer = setInterval(() => {
        if (Date.now() - activity.last <= idleTimeoutS * 1000) {
            return;
        }
        clearInterval(timer);
        const pending = [...activity.started].filter(([key, count]) => count > (activity.finished.get(key) || 0))
            .map(([key]) => key).sort();
        const what = pending.length
            ? `waiting for ${pending[0]}${pending.length > 1 ? ` (and ${pending.length - 1} more)` : ""}, whose inputs never resolved`
            : "waiting on something that never completes";
        onStuck(`the program made no progress for ${idleTimeoutS} s, ${what}`);
    }, 100);
    timer.unref(); // never what keeps the program alive
}

// The SDK reports an unhandled error with `util.inspect(err, { colors: true })`. Node.js's colored
// stack formatting (its `markNodeModules`, Node.js 20.20 among others) never ends on a stack line whose
// `node_modules` segment has no separator after the package name (nodejs/node#64011, fixed by #64022):
// it appends to the line forever, until the memory limit aborts the program (std::bad_alloc) or, with
// no limit, V8's longest string is reached after tens of seconds. The SDK's own frames are such lines:
// its source maps name `../config.ts`, so an error thrown by `config.require` or inside an `apply` has a
// frame at `node_modules/@pulumi/config.ts:301:19`. Nothing here renders colors (the engine reads the
// report as text), so a colored inspection of a value holding such a stack is made without colors.
function colorizerLoops(line) {
    let from = 0;
    for (;;) { // Node.js's walk over the line's `node_modules` segments, without the formatting
        const at = line.indexOf("node_modules", from);
        if (at < 0) {
            return false;
        }
        const separator = line[at - 1];
        const after = line[at + 12];
        if ((separator !== "/" && separator !== "\\") || (after !== "/" && after !== "\\")) {
            from = at + 1;
            continue;
        }
        const start = at + 13;
        let end = line.indexOf(separator, start);
        if (line[start] === "@") {
            end = line.indexOf(separator, end + 1);
        }
        if (end < start) {
            return true; // the walk goes back to this segment, or before it: it never ends
        }
        from = end;
    }
}

function holdsLoopingStack(value, depth, seen) {
    if (value === null || typeof value !== "object" || depth > 4 || seen.has(value) || seen.size > 1000) {
        return false;
    }
    seen.add(value);
    if (value instanceof Error) {
        const stack = typeof value.stack === "string" ? value.stack : "";
        return stack.split("\n").some(colorizerLoops) || holdsLoopingStack(value.cause, depth + 1, seen) ||
            (Array.isArray(value.errors) && value.errors.some((item) => holdsLoopingStack(item, depth + 1, seen)));
    }
    const prototype = Object.getPrototypeOf(value);
    if (!Array.isArray(value) && prototype !== Object.prototype && prototype !== null) {
        return false; // an SDK object, a resource, an unknown: never an error's container here
    }
    return Object.values(value).some((item) => holdsLoopingStack(item, depth + 1, seen));
}

function patchInspect() {
    const util = require("util");
    const inspect = util.inspect;
    const guarded = function (value, options) {
        if (options !== null && typeof options === "object" && options.colors) {
            let loops = false;
            try {
                loops = holdsLoopingStack(value, 0, new Set());
            } catch (err) {
                loops = true; // a value whose stack cannot even be read: no colors, never a loop
            }
            if (loops) {
                return inspect.call(this, value, { ...options, colors: false });
            }
        }
        return inspect.apply(this, arguments);
    };
    for (const key of [...Object.getOwnPropertyNames(inspect), ...Object.getOwnPropertySymbols(inspect)]) {
        if (!["length", "name", "prototype"].includes(key)) {
            Object.defineProperty(guarded, key, Object.getOwnPropertyDescriptor(inspect, key));
        }
    }
    util.inspect = guarded; // before the SDK loads: its modules copy `util`'s functions when they load
}

// `the program failed: FILE:LINE: Type: message` from the SDK's report of an unhandled exception.
function programError(message, err, root) {
    const uncaught = typeof message === "string" && (message.startsWith("Running program '") ||
        (err && (message === err.stack || message === err.message)));
    if (!uncaught) {
        return message;
    }
    let place = "";
    const stack = (err && err.stack) || message;
    for (const line of String(stack).split("\n")) {
        const found = /\(?((?:file:\/\/)?\/[^():]+):(\d+):\d+\)?\s*$/.exec(line.trim());
        if (!found) {
            continue;
        }
        const file = found[1].replace(/^file:\/\//, "");
        if (root && file.startsWith(root) && !file.includes("/node_modules/")) {
            place = `${file.slice(root.length)}:${found[2]}: `;
            break;
        }
    }
    if (err && err.name === "TSError" && typeof err.diagnosticText === "string") {
        return `the program failed: ${err.diagnosticText.trim().split("\n")[0]}`;  // file(line,col): error TS...
    }
    const what = err && err.name && err.message !== undefined ? `${err.name}: ${err.message}` :
        message.split("\n").slice(1).find((line) => line.trim()) || message;
    return `the program failed: ${place}${what}`.split("\n")[0];
}

function main() {
    const { own, runPath, rest } = options(process.argv.slice(2));
    patchInspect();
    if (own["--config-file"]) {
        Object.assign(process.env, JSON.parse(fs.readFileSync(own["--config-file"], "utf8")));
    }
    const reads = process.env[ENVIRONMENT_READS];
    delete process.env[ENVIRONMENT_READS];
    const sdk = path.resolve(runPath, "..", "..");
    const root = own["--root-directory"] ? fs.realpathSync(own["--root-directory"]) + path.sep : "";
    const activity = new Activity();
    let logError = (message) => { process.stderr.write(`${message}\n`); };
    const stop = (message) => {  // the program's error, as the SDK logs one; then exit
        setTimeout(() => process.exit(ERROR_SHOWN), 2000).unref();
        Promise.resolve(logError(message)).finally(() => process.exit(ERROR_SHOWN));
    };
    for (const patch of [() => patchConcatenation(sdk), () => patchInvokes(sdk, root), () => patchNestedOutputs(sdk),
        () => patchCallbacks(sdk, socketFolder(rest)),
        () => countConstructions(sdk, activity, parseInt(own["--max-resources"], 10), stop),
        () => reads && patchConfigFromEnvironments(sdk, JSON.parse(reads))]) {
        try {
            patch();
        } catch (err) {
            // an SDK without that part runs as it is
        }
    }
    const log = require(path.join(sdk, "log"));
    logError = log.error;
    const sendDebug = log.debug;
    try {
        traceOutputs(sdk, (line) => sendDebug(line));
    } catch (err) {
        // an SDK without that part runs as it is
    }
    log.debug = () => Promise.resolve();
    let lastError;
    const remember = (err) => { lastError = err; };
    process.prependListener("uncaughtException", remember);
    process.prependListener("unhandledRejection", remember);
    log.error = function (message, ...more) {
        return logError.call(this, programError(message, lastError, root), ...more);
    };
    watch(activity, parseFloat(own["--idle-timeout"]), stop);
    process.argv = [process.argv[0], runPath, ...rest];
    require(runPath);
}

main();
