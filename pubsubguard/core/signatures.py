"""The signatures that mark special values in the engine's wire format (a `google.protobuf.Struct`): the
key `SIG` holds one of the others. The same as Pulumi's `sdk/go/common/resource/sig`."""

SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
BYTE_STRING_SIG = "803fd3297a5875dc03ca845dda5d2a98"  # a string whose bytes are not UTF-8: {sig, value: base64}
