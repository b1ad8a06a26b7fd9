"""An independent Chakra ET codec for the tests: Google's ``protobuf`` runtime with message
classes built from a descriptor transcribed from mlcommons/chakra ``schema/protobuf/et_def.proto``
(no protoc needed), and chakra's framing (``encodeMessage`` / ``decodeMessage`` of
``src/third_party/utils/protolib.py``: a varint32 length before each message).

``optnet.chakra_et`` is a hand-written wire-format codec; this module shares no code with it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("google.protobuf", reason="protobuf (the test extra) is not installed")

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402
from google.protobuf.internal import decoder, encoder  # noqa: E402

F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "int32": F.TYPE_INT32,
    "int64": F.TYPE_INT64,
    "uint32": F.TYPE_UINT32,
    "uint64": F.TYPE_UINT64,
    "sint32": F.TYPE_SINT32,
    "sint64": F.TYPE_SINT64,
    "fixed32": F.TYPE_FIXED32,
    "fixed64": F.TYPE_FIXED64,
    "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
}
# et_def.proto AttributeProto: oneof value { double_val = 3; DoubleList double_list = 4; ... }
_ATTR_ORDER = [
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
    "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
]  # fmt: skip


def _build():
    fd = descriptor_pb2.FileDescriptorProto(
        name="et_def_test.proto", package="ChakraProtoMsg", syntax="proto3"
    )

    def msg(name):
        m = fd.message_type.add()
        m.name = name
        return m

    def add(m, name, number, type_, label=F.LABEL_OPTIONAL, type_name=None, oneof=None):
        f = m.field.add(name=name, number=number, type=type_, label=label)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof
        return f

    for s in _ATTR_ORDER:
        lst = msg(s.capitalize() + "List")
        add(lst, "values", 1, _SCALARS[s], F.LABEL_REPEATED)
    attr = msg("AttributeProto")
    add(attr, "name", 1, F.TYPE_STRING)
    add(attr, "doc_string", 2, F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, s in enumerate(_ATTR_ORDER):
        add(attr, f"{s}_val", 3 + 2 * i, _SCALARS[s], oneof=0)
        add(
            attr,
            f"{s}_list",
            4 + 2 * i,
            F.TYPE_MESSAGE,
            type_name=f".ChakraProtoMsg.{s.capitalize()}List",
            oneof=0,
        )
    meta = msg("GlobalMetadata")
    add(meta, "version", 1, F.TYPE_STRING)
    add(meta, "attr", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    nt = fd.enum_type.add(name="NodeType")
    for i, n in enumerate(
        [
            "INVALID_NODE",
            "METADATA_NODE",
            "MEM_LOAD_NODE",
            "MEM_STORE_NODE",
            "COMP_NODE",
            "COMM_SEND_NODE",
            "COMM_RECV_NODE",
            "COMM_COLL_NODE",
        ]
    ):
        nt.value.add(name=n, number=i)
    ct = fd.enum_type.add(name="CollectiveCommType")
    for i, n in enumerate(
        [
            "ALL_REDUCE",
            "REDUCE",
            "ALL_GATHER",
            "GATHER",
            "SCATTER",
            "BROADCAST",
            "ALL_TO_ALL",
            "REDUCE_SCATTER",
            "REDUCE_SCATTER_BLOCK",
            "BARRIER",
        ]
    ):
        ct.value.add(name=n, number=i)
    io = msg("IOInfo")
    for i, n in enumerate(["values", "shapes", "types"]):
        add(io, n, i + 1, F.TYPE_STRING)
    node = msg("Node")
    add(node, "id", 1, F.TYPE_UINT64)
    add(node, "name", 2, F.TYPE_STRING)
    add(node, "type", 3, F.TYPE_ENUM, type_name=".ChakraProtoMsg.NodeType")
    add(node, "ctrl_deps", 4, F.TYPE_UINT64, F.LABEL_REPEATED)
    add(node, "data_deps", 5, F.TYPE_UINT64, F.LABEL_REPEATED)
    add(node, "start_time_micros", 6, F.TYPE_UINT64)
    add(node, "duration_micros", 7, F.TYPE_UINT64)
    add(node, "inputs", 8, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    add(node, "outputs", 9, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    add(node, "attr", 10, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".ChakraProtoMsg.AttributeProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    get = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get is None:
        get = message_factory.MessageFactory(pool).GetPrototype
    return (
        get(pool.FindMessageTypeByName("ChakraProtoMsg.GlobalMetadata")),
        get(pool.FindMessageTypeByName("ChakraProtoMsg.Node")),
        get(pool.FindMessageTypeByName("ChakraProtoMsg.AttributeProto")),
        pool,
    )


GlobalMetadata, Node, AttributeProto, POOL = _build()


def encode(messages) -> bytes:
    """protolib.encodeMessage for each message."""
    out = b""
    for m in messages:
        data = m.SerializeToString()
        out += encoder._VarintBytes(len(data)) + data
    return out


def decode(data: bytes):
    """protolib.decodeMessage in a loop: (GlobalMetadata, [Node])."""
    pos, msgs = 0, []
    while pos < len(data):
        size, pos = decoder._DecodeVarint32(data, pos)
        msgs.append(data[pos : pos + size])
        pos += size
    meta = GlobalMetadata()
    meta.ParseFromString(msgs[0])
    nodes = []
    for m in msgs[1:]:
        n = Node()
        n.ParseFromString(m)
        nodes.append(n)
    return meta, nodes


def attrs(node) -> dict:
    """name -> value of a protobuf Node's attributes (the set oneof member)."""
    out = {}
    for a in node.attr:
        which = a.WhichOneof("value")
        v = getattr(a, which)
        out[a.name] = list(v.values) if which.endswith("_list") else v
    return out
