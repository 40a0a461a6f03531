"""Kumiho's messages and service, built at import from the vendored descriptor (``kumiho_proto``).

A private descriptor pool holds them, so that a process which also imports the public SDK (its own
``kumiho.proto`` in the default pool) never sees two definitions of one name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message

from appliance.grpc_api.kumiho_proto import SERIALIZED

PACKAGE = "kumiho"
SERVICE_NAME = "kumiho.KumihoService"

_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(descriptor_pb2.FileDescriptorProto.FromString(SERIALIZED))
SERVICE: ServiceDescriptor = _POOL.FindServiceByName(SERVICE_NAME)


@cache
def message(name: str) -> type[Message]:
    """The class of message ``name`` (``"ItemResponse"``, or a nested one as ``"Outer.Inner"``)."""
    made: type[Message] = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))
    return made


@dataclass(frozen=True)
class Method:
    name: str
    request: type[Message]
    response: type[Message]
    server_streaming: bool

    @property
    def path(self) -> str:
        return f"/{SERVICE_NAME}/{self.name}"


def _method(descriptor: MethodDescriptor) -> Method:
    return Method(descriptor.name, message_factory.GetMessageClass(descriptor.input_type),
                  message_factory.GetMessageClass(descriptor.output_type), descriptor.server_streaming)


METHODS: dict[str, Method] = {m.name: _method(m) for m in SERVICE.methods}
