"""How the engine reads a program's requests: the protocol's services registered with readers that turn a
request the message type cannot parse into `Unreadable`, which the service answers in one line (gRPC's own
reader logs a traceback and answers "Unexpected DecodeError").

A program can send one: the Node.js SDK writes a JavaScript string as it is, and its protobuf encoder
writes half of a surrogate pair (what cutting a string through an emoji leaves) as bytes that are not
UTF-8, which a proto3 string may not hold. `pulumi preview`'s engine refuses such a request too (Go's
protobuf runtime: "string field contains invalid UTF-8", answered by gRPC as "grpc: error unmarshalling
request"); here the answer names the string's place in the request."""

from __future__ import annotations

from dataclasses import dataclass

# google.protobuf's own message types whose field names say nothing to the program's author (a Struct's
# map of fields, a Value's kinds): a path through them names keys and list indices only
_TRANSPARENT = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


@dataclass(frozen=True)
class Unreadable:
    """A request its message type could not parse, and why, in a sentence for the program's error."""
    method: str
    reason: str


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, position


def _fields(data: bytes):
    """(field number, wire type, payload of a length-delimited field or None) of a serialized message."""
    position = 0
    while position < len(data):
        tag, position = _varint(data, position)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, position = _varint(data, position)
            yield number, wire, None
        elif wire in (1, 5):
            position += 8 if wire == 1 else 4
            yield number, wire, None
        elif wire == 2:
            size, position = _varint(data, position)
            if position + size > len(data):
                raise ValueError("truncated field")
            yield number, wire, data[position:position + size]
            position += size
        else:
            raise ValueError(f"wire type {wire}")  # groups: not in the engine's protocol


def invalid_utf8_at(data: bytes, descriptor) -> str | None:
    """Where in a serialized message of type `descriptor` a string is not valid UTF-8: its path (field names,
    map keys, list indices, e.g. `object.labels.team`), or None when every string is (or the bytes are
    malformed otherwise)."""
    try:
        return _walk(data, descriptor)
    except ValueError:
        return None


def _walk(data: bytes, descriptor) -> str | None:
    """The path below this message to a string that is not UTF-8 ("" for one of a transparent type's own)."""
    transparent = descriptor.full_name in _TRANSPARENT
    counts: dict[int, int] = {}
    for number, _, payload in _fields(data):
        field = descriptor.fields_by_number.get(number)
        if payload is None or field is None:
            continue
        index = counts[number] = counts.get(number, -1) + 1
        segment = "" if transparent else field.name
        if _repeated(field):
            segment += f"[{index}]"
        if field.type == field.TYPE_STRING:
            try:
                payload.decode("utf-8")
            except UnicodeDecodeError:
                return segment
        elif field.type == field.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                found = _map_entry(payload, field.message_type)
                segment = "" if transparent else field.name
            else:
                found = _walk(payload, field.message_type)
            if found is not None:
                return _join(segment, found)
    return None


def _map_entry(data: bytes, entry) -> str | None:
    """The path below one map entry, named by its key (a key that is not UTF-8 is itself the place)."""
    key, value = "", None
    for number, _, payload in _fields(data):
        if number == 1 and payload is not None:
            try:
                key = payload.decode("utf-8")
            except UnicodeDecodeError:
                return f"a key {payload.decode('utf-8', 'replace')!r}"
        elif number == 2 and payload is not None:
            value = payload
    value_field = entry.fields_by_number[2]
    if value is None:
        return None
    if value_field.type == value_field.TYPE_STRING:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return key
        return None
    if value_field.type != value_field.TYPE_MESSAGE:
        return None
    found = _walk(value, value_field.message_type)
    return None if found is None else _join(key, found)


def _repeated(field) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29 (its `label` is deprecated)
    return flag if isinstance(flag, bool) else field.label == field.LABEL_REPEATED


def _join(segment: str, rest: str) -> str:
    if not segment or not rest:
        return segment or rest
    return segment + rest if rest.startswith("[") else f"{segment}.{rest}"


def reader(message_class, method: str):
    """The request reader of one method: the parsed message, or `Unreadable` saying why not."""
    from google.protobuf.message import DecodeError

    def read(data: bytes):
        try:
            return message_class.FromString(data)
        except DecodeError:
            where = invalid_utf8_at(data, message_class.DESCRIPTOR)
            if where is None:
                return Unreadable(method, f"the engine cannot read the {method} request: it is not a "
                                          f"{message_class.DESCRIPTOR.full_name} message")
            return Unreadable(method, f"the engine cannot read the {method} request: its string at {where} is not "
                                      "valid UTF-8 (half of a surrogate pair, as cutting a JavaScript string through "
                                      "an emoji leaves), which `pulumi preview` refuses too")
    return read


def add_servicer(server, servicer, service) -> None:
    """Register `servicer`'s unary methods for `service` (a ServiceDescriptor) on a gRPC server, as the
    generated `add_*Servicer_to_server` does, with `reader`s for the requests."""
    import grpc
    from google.protobuf import message_factory

    handlers = {}
    for method in service.methods:
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name), request_deserializer=reader(request_class, method.name),
            response_serializer=response_class.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
