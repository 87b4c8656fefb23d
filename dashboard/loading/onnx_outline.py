"""The top level of an ONNX file read straight from the protobuf wire format, before ONNX
Runtime sees it (no protobuf library, no recursion, no ``onnx`` package): the graph, its
initializers (dense and sparse) with their declared shapes and the bytes or values they
store, and how deep its subgraphs nest. :func:`_check_outline` refuses what cannot be a
usable model (see :mod:`dashboard.loading.onnx`). Runs only in the isolated load process."""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass, field

from ..isolation import mapped_bytes
from .errors import LoadError

#: bits per value of each TensorProto.DataType (onnx.proto); others are not checked
_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 14: 64, 15: 128}
_BITS |= {16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4}
_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string"}
_TYPE_NAMES |= {9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16"}
#: TensorProto field that holds the values of a data type, with its bytes per packed value
#: (0: varints); only these pairs are counted exactly
_TYPED_FIELD = {1: (4, 4), 11: (10, 8), 7: (7, 0), 6: (5, 0)}
#: protobuf's default nesting limit, which ONNX Runtime's parser keeps: a ModelProto and its
#: GraphProto, then three messages per subgraph level (node, attribute, graph)
MAX_SUBGRAPH_LEVELS = (100 - 2) // 3
#: largest protobuf message (and so the largest tensor one ONNX file can hold)
EMBEDDED_LIMIT = 2**31


class _Malformed(Exception):
    """The bytes are not a protobuf message of the expected shape."""


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf, pos: int, end: int):
    """(number, wire type, value) of each field of the message in ``buf[pos:end]``: the
    integer of a varint, the (start, end) span of a length-delimited field, None otherwise."""
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value
        elif wire == 2:
            size, pos = _varint(buf, pos, end)
            if pos + size > end:
                raise _Malformed
            yield number, wire, (pos, pos + size)
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                raise _Malformed
            yield number, wire, None
        else:  # groups (3, 4) are not used by ONNX; 6, 7 do not exist
            raise _Malformed


def _signed(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def _varint_count(buf, span: tuple[int, int]) -> int:
    """Values in a packed field of varints (bytes below 0x80 end one each)."""
    return span[1] - span[0] - len(bytes(buf[span[0] : span[1]]).translate(None, _HIGH_BYTES))


_HIGH_BYTES = bytes(range(0x80))  # deleted by translate: what is left are the continuation bytes


@dataclass
class _Tensor:
    name: str = ""
    data_type: int = 0
    dims: list[int] = field(default_factory=list)
    raw: int | None = None  # bytes of raw_data, if present
    counts: dict[int, int] = field(default_factory=dict)  # values in each typed data field
    external: bool = False

    @property
    def values(self) -> int:
        return math.prod(self.dims)

    @property
    def shape(self) -> str:
        return " x ".join(f"{d:,}" for d in self.dims) or "a scalar"

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.data_type, f"data type {self.data_type}")

    def nbytes(self) -> int | None:
        bits = _BITS.get(self.data_type)
        return None if bits is None else (self.values * bits + 7) // 8


@dataclass
class _Outline:
    """What the top level of an ONNX file declares, read from its bytes."""

    ir_version: int | None = None
    opsets: dict[str, int] = field(default_factory=dict)
    initializers: list[_Tensor] = field(default_factory=list)
    sparse: list[_Tensor] = field(default_factory=list)  # dims: the dense shape; data_type of the values
    graph: tuple[int, int] | None = None


def _tensor(buf, span: tuple[int, int]) -> _Tensor:
    found = _Tensor()
    for number, wire, value in _fields(buf, *span):
        if number == 1:  # dims (packed, or one varint per field)
            if wire == 2:
                pos, end = value
                while pos < end:
                    dim, pos = _varint(buf, pos, end)
                    found.dims.append(_signed(dim))
            elif wire == 0:
                found.dims.append(_signed(value))
        elif number == 2 and wire == 0:
            found.data_type = value
        elif number == 8 and wire == 2:
            found.name = bytes(buf[value[0] : value[1]]).decode("utf-8", "replace")[:100]
        elif number == 9 and wire == 2:
            found.raw = value[1] - value[0]
        elif number == 13:
            found.external = True
        elif number == 14 and wire == 0:
            found.external = found.external or value == 1  # DataLocation.EXTERNAL
        elif number in (4, 5, 6, 7, 10, 11):
            if wire == 2 and number != 6:  # packed
                width = {4: 4, 10: 8}.get(number, 0)
                n = (value[1] - value[0]) // width if width else _varint_count(buf, value)
            else:  # one value per field (string_data is always one string per field)
                n = 1
            found.counts[number] = found.counts.get(number, 0) + n
    return found


def _outline(buf) -> _Outline:
    """The IR version, opsets and (dense and sparse) initializers of a serialized ModelProto."""
    found = _Outline()
    for number, wire, value in _fields(buf, 0, len(buf)):
        if number == 1 and wire == 0:
            found.ir_version = _signed(value)
        elif number == 7 and wire == 2:
            found.graph = value
        elif number == 8 and wire == 2:
            domain, version = "", 0
            for n, w, v in _fields(buf, *value):
                if n == 1 and w == 2:
                    domain = bytes(buf[v[0] : v[1]]).decode("utf-8", "replace")[:100]
                elif n == 2 and w == 0:
                    version = _signed(v)
            found.opsets[domain or "ai.onnx"] = version
    if found.graph is not None:
        for number, wire, value in _fields(buf, *found.graph):
            if number == 5 and wire == 2:
                found.initializers.append(_tensor(buf, value))
            elif number == 15 and wire == 2:
                sparse = _Tensor()
                for n, w, v in _fields(buf, *value):
                    if n == 1 and w == 2:  # values
                        inner = _tensor(buf, v)
                        sparse.name, sparse.data_type = inner.name, inner.data_type
                    elif n == 3:  # dims of the dense tensor
                        if w == 2:
                            pos, end = v
                            while pos < end:
                                dim, pos = _varint(buf, pos, end)
                                sparse.dims.append(_signed(dim))
                        elif w == 0:
                            sparse.dims.append(_signed(v))
                found.sparse.append(sparse)
    return found


def _subgraph_levels(buf, graph: tuple[int, int]) -> int:
    """How deep subgraphs (If branches, Loop and Scan bodies) nest below ``graph``; iterative,
    so a file nested 100,000 levels deep costs a loop, not a stack."""
    deepest = 0
    stack = [(graph, 0)]
    while stack:
        span, level = stack.pop()
        deepest = max(deepest, level)
        for number, wire, node in _fields(buf, *span):
            if number != 1 or wire != 2:  # GraphProto.node
                continue
            for n, w, attribute in _fields(buf, *node):
                if n != 5 or w != 2:  # NodeProto.attribute
                    continue
                for a, aw, value in _fields(buf, *attribute):
                    if a in (6, 11) and aw == 2:  # AttributeProto.g, .graphs
                        stack.append((value, level + 1))
    return deepest


def _memory_left() -> int | None:
    """Bytes this process may still map (its address-space limit minus what it maps now)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - mapped_bytes())


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f}"  # not reached


def _check_outline(outline: _Outline, label: str) -> None:
    """Refuse tensors that cannot be what the file says, before ONNX Runtime allocates them."""
    crafted = "A file like this is damaged or crafted; export the model again."
    for tensor in outline.initializers + outline.sparse:
        if any(d < 0 for d in tensor.dims):
            raise LoadError(
                f"{label}: the tensor {tensor.name!r} declares a negative dimension ({tensor.shape}). {crafted}",
                field="model",
            )
    for tensor in outline.initializers:
        if tensor.external:
            raise LoadError(
                f"{label} keeps tensors in separate external-data files (e.g. {tensor.name!r}), which this "
                f"server does not read; save the model as one file "
                f"(onnx.save_model(model, path, save_as_external_data=False)).",
                field="model",
            )
        expected = tensor.nbytes()
        stored = _stored(tensor)
        if expected is not None and expected > EMBEDDED_LIMIT:
            raise LoadError(
                f"{label}: the tensor {tensor.name!r} declares {tensor.shape} {tensor.type_name} values "
                f"({_size(expected)}), more than one ONNX file can hold (2 GiB), while the file stores "
                f"{stored}. {crafted}",
                field="model",
            )
        if not _stored_matches(tensor):
            raise LoadError(
                f"{label}: the tensor {tensor.name!r} declares {tensor.shape} {tensor.type_name} values "
                f"({tensor.values:,}) but the file stores {stored}. {crafted}",
                field="model",
            )
    dense = [(t, t.nbytes() or 0) for t in outline.sparse]
    total = sum(n for _, n in dense)
    left = _memory_left()
    if dense and (total > EMBEDDED_LIMIT or (left is not None and total > left)):
        tensor, nbytes = max(dense, key=lambda pair: pair[1])
        room = "" if left is None else f" (this process has about {_size(left)} left)"
        raise LoadError(
            f"{label}: the sparse tensor {tensor.name!r} declares a dense shape of {tensor.shape} "
            f"{tensor.type_name} values; ONNX Runtime expands sparse initializers when it loads a model, "
            f"which would take {_size(total)} in all, more than this server allows a model{room}. "
            f"A file like this is crafted, or needs a server with more memory (option --job-memory-mb).",
            field="model",
        )


def _stored(tensor: _Tensor) -> str:
    if tensor.raw is not None:
        return f"{tensor.raw:,} bytes"
    n = sum(tensor.counts.values())
    return f"{n:,} value{'s' if n != 1 else ''}"


def _stored_matches(tensor: _Tensor) -> bool:
    """Whether the values stored match the declared shape, where that can be told exactly."""
    expected = tensor.nbytes()
    if tensor.raw is not None:
        return expected is None or tensor.raw == expected or tensor.data_type == 8
    if not tensor.counts:
        return tensor.values == 0
    typed = _TYPED_FIELD.get(tensor.data_type)
    if typed is not None and set(tensor.counts) == {typed[0]}:
        return tensor.counts[typed[0]] == tensor.values
    if tensor.data_type == 8:  # strings: one per value
        return tensor.counts.get(6, 0) == tensor.values
    return True  # another storage (float16 in int32_data, ...): ONNX Runtime checks it
