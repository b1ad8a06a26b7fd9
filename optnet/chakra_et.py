"""Chakra execution traces (ET): a small reader and writer of the protobuf wire format.

The schema is mlcommons/chakra ``schema/protobuf/et_def.proto`` (proto3, package
``ChakraProtoMsg``): a file is one ``GlobalMetadata`` message followed by ``Node`` messages,
each prefixed with its length as a varint (``encodeMessage`` / ``decodeMessage`` in chakra
``src/third_party/utils/protolib.py``; the C++ side is ``ProtoOutputStream::write`` in
``src/third_party/utils/protoio.cc``). A file may be gzip-compressed (``openFileRd`` there).

Only the protobuf wire format (https://protobuf.dev/programming-guides/encoding/) is used, so
optnet needs no ``protobuf`` package: varints (wire type 0), 64-bit (1), length-delimited (2)
and 32-bit (5) fields; repeated scalars are read packed or unpacked, and written packed, as proto3
does. Unknown fields are skipped, as protobuf parsers do.

Field numbers (et_def.proto):

- ``GlobalMetadata``: version 1 (string), attr 2 (AttributeProto).
- ``Node``: id 1, name 2, type 3 (NodeType), ctrl_deps 4, data_deps 5 (repeated uint64),
  start_time_micros 6, duration_micros 7 (uint64), inputs 8, outputs 9 (IOInfo), attr 10.
- ``IOInfo``: values 1, shapes 2, types 3 (strings).
- ``AttributeProto``: name 1, doc_string 2, then the ``value`` oneof: fields 3..32 as in
  :data:`ATTR_FIELDS` (each scalar kind and its ``*List`` message, whose values are field 1).
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: NodeType enum of et_def.proto.
NODE_TYPES: dict[int, str] = {
    0: "INVALID_NODE",
    1: "METADATA_NODE",
    2: "MEM_LOAD_NODE",
    3: "MEM_STORE_NODE",
    4: "COMP_NODE",
    5: "COMM_SEND_NODE",
    6: "COMM_RECV_NODE",
    7: "COMM_COLL_NODE",
}
NODE_TYPE_IDS: dict[str, int] = {v: k for k, v in NODE_TYPES.items()}

#: CollectiveCommType enum of et_def.proto.
COMM_TYPES: dict[int, str] = {
    0: "ALL_REDUCE",
    1: "REDUCE",
    2: "ALL_GATHER",
    3: "GATHER",
    4: "SCATTER",
    5: "BROADCAST",
    6: "ALL_TO_ALL",
    7: "REDUCE_SCATTER",
    8: "REDUCE_SCATTER_BLOCK",
    9: "BARRIER",
}
COMM_TYPE_IDS: dict[str, int] = {v: k for k, v in COMM_TYPES.items()}

#: AttributeProto ``value`` oneof: field number -> (JSON/proto name, scalar type, is a list).
ATTR_FIELDS: dict[int, tuple[str, str, bool]] = {
    3: ("double_val", "double", False),
    4: ("double_list", "double", True),
    5: ("float_val", "float", False),
    6: ("float_list", "float", True),
    7: ("int32_val", "int32", False),
    8: ("int32_list", "int32", True),
    9: ("int64_val", "int64", False),
    10: ("int64_list", "int64", True),
    11: ("uint32_val", "uint32", False),
    12: ("uint32_list", "uint32", True),
    13: ("uint64_val", "uint64", False),
    14: ("uint64_list", "uint64", True),
    15: ("sint32_val", "sint32", False),
    16: ("sint32_list", "sint32", True),
    17: ("sint64_val", "sint64", False),
    18: ("sint64_list", "sint64", True),
    19: ("fixed32_val", "fixed32", False),
    20: ("fixed32_list", "fixed32", True),
    21: ("fixed64_val", "fixed64", False),
    22: ("fixed64_list", "fixed64", True),
    23: ("sfixed32_val", "sfixed32", False),
    24: ("sfixed32_list", "sfixed32", True),
    25: ("sfixed64_val", "sfixed64", False),
    26: ("sfixed64_list", "sfixed64", True),
    27: ("bool_val", "bool", False),
    28: ("bool_list", "bool", True),
    29: ("string_val", "string", False),
    30: ("string_list", "string", True),
    31: ("bytes_val", "bytes", False),
    32: ("bytes_list", "bytes", True),
}
ATTR_FIELD_IDS: dict[str, int] = {v[0]: k for k, v in ATTR_FIELDS.items()}

_VARINT = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool"})
_FIXED64 = {"double": "<d", "fixed64": "<Q", "sfixed64": "<q"}
_FIXED32 = {"float": "<f", "fixed32": "<I", "sfixed32": "<i"}


class ChakraFormatError(ValueError):
    """Bytes that are not a Chakra ET as et_def.proto defines it; the message says where."""


@dataclass
class Attr:
    """One ``AttributeProto``: ``kind`` is the oneof field's name (``int64_val``, ``bool_list``,
    ...), ``value`` a Python scalar or list."""

    name: str
    kind: str
    value: Any


@dataclass
class Node:
    """One ``Node`` of et_def.proto (type as the NodeType name)."""

    id: int
    name: str = ""
    type: str = "INVALID_NODE"
    ctrl_deps: list[int] = field(default_factory=list)
    data_deps: list[int] = field(default_factory=list)
    start_time_micros: int = 0
    duration_micros: int = 0
    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    attr: list[Attr] = field(default_factory=list)

    def get(self, name: str, default: Any = None) -> Any:
        """The value of attribute ``name`` (the first, as protobuf's feeders read it)."""
        for a in self.attr:
            if a.name == name:
                return a.value
        return default


@dataclass
class Trace:
    """One ET file: the GlobalMetadata (version, attributes) and the nodes in file order."""

    version: str = ""
    attr: list[Attr] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)


# --- writing -----------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int32/int64 negatives: ten-byte two's complement
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(0x80 | bits)
        else:
            out.append(bits)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _zigzag(value: int, bits: int) -> int:
    return (value << 1) ^ (value >> (bits - 1))


def _scalar_payload(kind: str, value: Any) -> tuple[int, bytes]:
    """(wire type, bytes) of one scalar of ``kind``."""
    if kind in _VARINT:
        if kind == "bool":
            v = 1 if value else 0
        elif kind == "sint32":
            v = _zigzag(int(value), 32)
        elif kind == "sint64":
            v = _zigzag(int(value), 64)
        else:
            v = int(value)
            if kind.startswith("uint") and v < 0:
                raise ValueError(f"{kind} cannot hold {v}")
        return 0, _varint(v)
    if kind in _FIXED64:
        return 1, struct.pack(_FIXED64[kind], value)
    if kind in _FIXED32:
        return 5, struct.pack(_FIXED32[kind], value)
    if kind == "string":
        data = str(value).encode("utf-8")
        return 2, _varint(len(data)) + data
    if kind == "bytes":
        data = bytes(value)
        return 2, _varint(len(data)) + data
    raise ValueError(f"unknown scalar type {kind!r}")


def _field(number: int, kind: str, value: Any) -> bytes:
    wire, payload = _scalar_payload(kind, value)
    return _key(number, wire) + payload


def _message_field(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _packed(number: int, kind: str, values: Iterable[Any]) -> bytes:
    values = list(values)
    if not values:
        return b""
    if kind in ("string", "bytes"):  # not packable: one field per element
        return b"".join(_field(number, kind, v) for v in values)
    body = b"".join(_scalar_payload(kind, v)[1] for v in values)
    return _message_field(number, body)


def encode_attr(a: Attr) -> bytes:
    """``AttributeProto`` bytes of ``a``."""
    if a.kind not in ATTR_FIELD_IDS:
        raise ValueError(f"attribute {a.name!r}: unknown value kind {a.kind!r}")
    number = ATTR_FIELD_IDS[a.kind]
    _, scalar, is_list = ATTR_FIELDS[number]
    out = _field(1, "string", a.name) if a.name else b""
    if is_list:
        out += _message_field(number, _packed(1, scalar, a.value))
    else:
        out += _field(number, scalar, a.value)
    return out


def encode_metadata(version: str = "", attr: Iterable[Attr] = ()) -> bytes:
    """``GlobalMetadata`` bytes."""
    out = _field(1, "string", version) if version else b""
    return out + b"".join(_message_field(2, encode_attr(a)) for a in attr)


def encode_node(n: Node) -> bytes:
    """``Node`` bytes (proto3: fields at their default value are not written)."""
    out = _field(1, "uint64", n.id) if n.id else b""
    if n.name:
        out += _field(2, "string", n.name)
    t = NODE_TYPE_IDS[n.type]
    if t:
        out += _field(3, "int32", t)
    out += _packed(4, "uint64", n.ctrl_deps) + _packed(5, "uint64", n.data_deps)
    if n.start_time_micros:
        out += _field(6, "uint64", n.start_time_micros)
    if n.duration_micros:
        out += _field(7, "uint64", n.duration_micros)
    for number, io in ((8, n.inputs), (9, n.outputs)):
        if io:
            body = b"".join(
                _field(i, "string", io[k])
                for i, k in ((1, "values"), (2, "shapes"), (3, "types"))
                if io.get(k)
            )
            out += _message_field(number, body)
    return out + b"".join(_message_field(10, encode_attr(a)) for a in n.attr)


def delimited(messages: Iterable[bytes]) -> bytes:
    """Messages each prefixed with its varint length (protolib ``encodeMessage``)."""
    return b"".join(_varint(len(m)) + m for m in messages)


def encode_trace(trace: Trace) -> bytes:
    """A whole ET file: the metadata, then every node."""
    return delimited(
        [encode_metadata(trace.version, trace.attr), *(encode_node(n) for n in trace.nodes)]
    )


# --- reading -----------------------------------------------------------------------------------


def _read_varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ChakraFormatError(f"{where}: truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ChakraFormatError(f"{where}: varint longer than 10 bytes at byte {pos}")


def _fields(buf: bytes, where: str) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, raw value) of each field: int for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos, where)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ChakraFormatError(f"{where}: field number 0 at byte {pos}")
        if wire == 0:
            value, pos = _read_varint(buf, pos, where)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            size, pos = _read_varint(buf, pos, where)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ChakraFormatError(f"{where}: unsupported wire type {wire} (field {number})")
        if pos > len(buf):
            raise ChakraFormatError(f"{where}: field {number} runs past the end of its message")
        yield number, wire, value


def _signed(v: int, bits: int) -> int:
    v &= (1 << 64) - 1
    if bits == 32:
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >> 31 else v
    return v - (1 << 64) if v >> 63 else v


def _scalar(kind: str, wire: int, raw: Any, where: str) -> Any:
    if kind in _VARINT:
        if wire != 0:
            raise ChakraFormatError(f"{where}: {kind} needs wire type 0, got {wire}")
        if kind == "bool":
            return raw != 0
        if kind in ("int32", "int64"):
            return _signed(raw, 32 if kind == "int32" else 64)
        if kind in ("sint32", "sint64"):
            return (raw >> 1) ^ -(raw & 1)
        return raw & (0xFFFFFFFF if kind == "uint32" else (1 << 64) - 1)
    if kind in _FIXED64:
        if wire != 1 or len(raw) != 8:
            raise ChakraFormatError(f"{where}: {kind} needs wire type 1")
        return struct.unpack(_FIXED64[kind], raw)[0]
    if kind in _FIXED32:
        if wire != 5 or len(raw) != 4:
            raise ChakraFormatError(f"{where}: {kind} needs wire type 5")
        return struct.unpack(_FIXED32[kind], raw)[0]
    if wire != 2:
        raise ChakraFormatError(f"{where}: {kind} needs wire type 2, got {wire}")
    if kind == "string":
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise ChakraFormatError(f"{where}: string field is not UTF-8") from None
    return bytes(raw)


def _repeated(kind: str, wire: int, raw: Any, where: str) -> list[Any]:
    """Elements of one occurrence of a repeated scalar field, packed or not."""
    if wire == 2 and kind not in ("string", "bytes"):
        out, pos = [], 0
        while pos < len(raw):
            if kind in _VARINT:
                v, pos = _read_varint(raw, pos, where)
                out.append(_scalar(kind, 0, v, where))
            else:
                size, w = (8, 1) if kind in _FIXED64 else (4, 5)
                out.append(_scalar(kind, w, raw[pos : pos + size], where))
                pos += size
        if pos != len(raw):
            raise ChakraFormatError(f"{where}: packed field has a partial element")
        return out
    return [_scalar(kind, wire, raw, where)]


def decode_attr(buf: bytes, where: str) -> Attr:
    a = Attr("", "", None)
    for number, wire, raw in _fields(buf, where):
        if number == 1:
            a.name = _scalar("string", wire, raw, where)
        elif number in ATTR_FIELDS:
            kind, scalar, is_list = ATTR_FIELDS[number]
            a.kind = kind
            if is_list:
                values: list[Any] = []
                for n2, w2, r2 in _fields(raw, where):
                    if n2 == 1:
                        values += _repeated(scalar, w2, r2, where)
                a.value = values
            else:
                a.value = _scalar(scalar, wire, raw, where)
    return a


def decode_metadata(buf: bytes, where: str) -> tuple[str, list[Attr]]:
    version, attrs = "", []
    for number, wire, raw in _fields(buf, where):
        if number == 1:
            version = _scalar("string", wire, raw, where)
        elif number == 2:
            attrs.append(decode_attr(raw, f"{where} attr"))
    return version, attrs


def decode_node(buf: bytes, where: str) -> Node:
    n = Node(0)
    for number, wire, raw in _fields(buf, where):
        if number == 1:
            n.id = _scalar("uint64", wire, raw, where)
        elif number == 2:
            n.name = _scalar("string", wire, raw, where)
        elif number == 3:
            t = _scalar("int32", wire, raw, where)
            n.type = NODE_TYPES.get(t, f"UNKNOWN_{t}")
        elif number == 4:
            n.ctrl_deps += _repeated("uint64", wire, raw, where)
        elif number == 5:
            n.data_deps += _repeated("uint64", wire, raw, where)
        elif number == 6:
            n.start_time_micros = _scalar("uint64", wire, raw, where)
        elif number == 7:
            n.duration_micros = _scalar("uint64", wire, raw, where)
        elif number in (8, 9):
            io = n.inputs if number == 8 else n.outputs
            for n2, w2, r2 in _fields(raw, where):
                if n2 in (1, 2, 3):
                    io[("values", "shapes", "types")[n2 - 1]] = _scalar("string", w2, r2, where)
        elif number == 10:
            n.attr.append(decode_attr(raw, f"{where} attr"))
    return n


def split_delimited(data: bytes, where: str) -> list[bytes]:
    """The messages of a length-delimited stream (protolib ``decodeMessage`` in a loop)."""
    out, pos = [], 0
    while pos < len(data):
        size, pos = _read_varint(data, pos, where)
        if pos + size > len(data):
            raise ChakraFormatError(
                f"{where}: message {len(out)} claims {size} bytes but only "
                f"{len(data) - pos} remain (not a Chakra ET, or truncated)"
            )
        out.append(data[pos : pos + size])
        pos += size
    return out


def decode_trace(data: bytes, where: str = "trace") -> Trace:
    """A whole ET file (gzip-compressed or not): metadata, then nodes."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ChakraFormatError(f"{where}: bad gzip data ({exc})") from None
    messages = split_delimited(data, where)
    if not messages:
        raise ChakraFormatError(f"{where}: empty (no GlobalMetadata message)")
    version, attrs = decode_metadata(messages[0], f"{where} GlobalMetadata")
    nodes = [decode_node(m, f"{where} node message {i + 1}") for i, m in enumerate(messages[1:])]
    return Trace(version, attrs, nodes)
