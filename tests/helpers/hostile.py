"""Hostile models for tests: importable in the child processes that load them."""

import os
import signal

import numpy as np


class SuicidalRegressor:
    """Fits nothing; its predict kills its own process (as a crafted native crash would)."""

    feature_names_in_ = np.array(["X1", "X2", "X3"], dtype=object)
    n_features_in_ = 3

    def fit(self, X, y):
        return self

    def predict(self, X):
        os.kill(os.getpid(), signal.SIGKILL)


def endless_onnx(iterations: int = 2**62) -> bytes:
    """A regressor whose graph loops 2^62 times (the audit's ONNX ``Loop`` model); with fewer
    ``iterations`` a slow model (10^6: about 0.3 s a call, whatever the batch)."""
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["v_in"], ["v_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["M"], value=helper.make_tensor("m", TensorProto.INT64, [], [iterations])),
            helper.make_node("Constant", [], ["c"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
            helper.make_node("Loop", ["M", "c", "X"], ["looped"], body=body),
            helper.make_node("ReduceSum", ["looped", "axes"], ["variable"], keepdims=0),
        ],
        "endless",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None])],
        initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


# --- crafted ONNX files (issue 29, "Crafted ONNX beyond the first round") --------------------
# Each returns the bytes of a regressor that takes one [None, 3] float tensor "X" and, unless it
# is broken on purpose, predicts the row sums x1 + x2 + x3 (so a successful load can be checked).


def _onnx_model(nodes, *, initializer=(), sparse=(), inputs=None, output_type=None, opsets=(("", 17),), ir=8):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        list(nodes),
        "crafted",
        inputs if inputs is not None else [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("variable", output_type or TensorProto.FLOAT, [None])],
        initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [1]), *initializer],
        sparse_initializer=list(sparse),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = ir
    return model


def _row_sums(source="X", target="variable"):
    from onnx import helper

    return helper.make_node("ReduceSum", [source, "axes"], [target], keepdims=0)


def huge_initializer_onnx(dims=(10**6, 10**6), raw: bytes = b"") -> bytes:
    """An initializer "W" declared ``dims`` float (4 TB for the default) holding ``raw`` only;
    the prediction adds its sum to every row."""
    from onnx import TensorProto, helper

    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=list(dims), raw_data=raw)
    nodes = [
        helper.make_node("ReduceSum", ["W"], ["w"], keepdims=0),
        helper.make_node("Add", ["X", "w"], ["Z"]),
        _row_sums("Z"),
    ]
    return _onnx_model(nodes, initializer=[weight]).SerializeToString()


def sparse_initializer_onnx(dims=(10**6, 10**6)) -> bytes:
    """A sparse initializer "W" of dense shape ``dims`` holding one value, 1.0, at position 0;
    ONNX Runtime expands it to its dense shape when it loads the model. With ``dims`` (3,) the
    model predicts x1 + 1 + x2 + x3."""
    from onnx import TensorProto, helper

    values = helper.make_tensor("W", TensorProto.FLOAT, [1], [1.0])
    indices = helper.make_tensor("W_indices", TensorProto.INT64, [1], [0])
    sparse = helper.make_sparse_tensor(values, indices, list(dims))
    if len(dims) == 1:
        nodes = [helper.make_node("Add", ["X", "W"], ["Z"]), _row_sums("Z")]
    else:
        nodes = [helper.make_node("ReduceSum", ["W"], ["w"], keepdims=0), helper.make_node("Add", ["X", "w"], ["Z"])]
        nodes.append(_row_sums("Z"))
    return _onnx_model(nodes, sparse=[sparse]).SerializeToString()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field: how a message holds another one."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _with_graph(node, attribute: str, graph: bytes) -> bytes:
    """``node`` serialized with a graph attribute holding ``graph`` (serialized bytes). Built by
    hand: the protobuf library refuses to build or parse messages nested over 100 deep."""
    from onnx import AttributeProto

    attr = AttributeProto(name=attribute, type=AttributeProto.GRAPH).SerializeToString()
    return node.SerializeToString() + _field(5, attr + _field(6, graph))  # NodeProto.attribute, AttributeProto.g


def _graph_with(graph, *nodes: bytes) -> bytes:
    return graph.SerializeToString() + b"".join(_field(1, n) for n in nodes)  # GraphProto.node


def nested_onnx(depth: int, kind: str = "If") -> bytes:
    """``depth`` nested ``If`` nodes (each then-branch holds the next; the innermost computes
    the row sums) or ``Loop`` nodes (one iteration each, the innermost body computes them)."""
    from onnx import TensorProto, helper

    def info(name, elem=TensorProto.FLOAT, shape=None):
        return helper.make_tensor_value_info(name, elem, shape)

    constants = [
        helper.make_node("Constant", [], ["cond"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("o", TensorProto.INT64, [], [1])),
    ]
    if kind == "If":
        inner = helper.make_graph([_row_sums("X", "out0")], "leaf", [], [info("out0")]).SerializeToString()
        for level in range(1, depth + 1):
            other = helper.make_graph([_row_sums("X", f"e{level}")], f"else{level}", [], [info(f"e{level}")])
            out = f"out{level}" if level < depth else "variable"
            top = _with_graph(helper.make_node("If", ["cond"], [out], else_branch=other), "then_branch", inner)
            inner = _graph_with(helper.make_graph([], f"then{level}", [], [info(out)]), top)
        tail: list[bytes] = []
    else:

        def body(level):
            return helper.make_graph(
                [helper.make_node("Identity", [f"c{level}"], [f"co{level}"])],
                f"body{level}",
                [info(f"i{level}", TensorProto.INT64, []), info(f"c{level}", TensorProto.BOOL, [])],
                [info(f"co{level}", TensorProto.BOOL, []), info(f"s{level}")],
            )

        inner = _graph_with(body(0), _row_sums("X", "s0").SerializeToString())
        for level in range(1, depth):
            loop = helper.make_node("Loop", ["one", "cond"], [f"s{level}"])
            inner = _graph_with(body(level), _with_graph(loop, "body", inner))
        top = _with_graph(helper.make_node("Loop", ["one", "cond"], ["scan"]), "body", inner)
        tail = [helper.make_node("Reshape", ["scan", "flat"], ["variable"]).SerializeToString()]
    model = _onnx_model(constants, initializer=[helper.make_tensor("flat", TensorProto.INT64, [1], [-1])])
    graph = _graph_with(model.graph, top, *tail)
    model.ClearField("graph")
    return model.SerializeToString() + _field(7, graph)  # ModelProto.graph


def batch_shape_onnx(kind: str) -> bytes:
    """Row sums, then: "one" their total, shape [1]; "scalar" their total, shape [];
    "double" them twice, shape [2N]; "first5" the first five only (right for five rows or fewer)."""
    from onnx import TensorProto, helper

    nodes = [_row_sums("X", "s")]
    extra = []
    if kind == "one":
        nodes += [helper.make_node("ReduceSum", ["s"], ["t"], keepdims=1)]
        nodes += [helper.make_node("Reshape", ["t", "one"], ["variable"])]
        extra = [helper.make_tensor("one", TensorProto.INT64, [1], [1])]
    elif kind == "scalar":
        nodes += [helper.make_node("ReduceSum", ["s"], ["variable"], keepdims=0)]
    elif kind == "double":
        nodes += [helper.make_node("Concat", ["s", "s"], ["variable"], axis=0)]
    elif kind == "first5":
        extra = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in [("start", 0), ("end", 5), ("ax0", 0)]]
        nodes += [helper.make_node("Slice", ["s", "start", "end", "ax0"], ["variable"])]
    else:
        raise ValueError(kind)
    return _onnx_model(nodes, initializer=extra).SerializeToString()


def string_output_onnx(numeric: bool) -> bytes:
    """A regressor whose one output is text: the row sums as text ("3.5") or "high" for every row."""
    from onnx import TensorProto, helper

    nodes = [_row_sums("X", "s")]
    if numeric:
        nodes.append(helper.make_node("Cast", ["s"], ["variable"], to=TensorProto.STRING))
    else:
        text = helper.make_tensor("t", TensorProto.STRING, [1], [b"high"])
        nodes += [helper.make_node("Constant", [], ["text"], value=text), helper.make_node("Shape", ["s"], ["n"])]
        nodes.append(helper.make_node("Expand", ["text", "n"], ["variable"]))
    return _onnx_model(nodes, output_type=TensorProto.STRING).SerializeToString()


def log_onnx(shift: bool = False) -> bytes:
    """log(x1) + x2 + x3 (NaN where x1 < 0, -inf where x1 == 0); with ``shift``,
    log(x1 - x2 + 1) + x3: finite on data where x2 < x1 + 1, NaN for permuted rows that break it."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Split", ["X", "split"], ["a", "b", "c"], axis=1)]
    if shift:
        nodes += [helper.make_node("Sub", ["a", "b"], ["d"]), helper.make_node("Add", ["d", "one"], ["e"])]
        nodes += [helper.make_node("Log", ["e"], ["l"]), helper.make_node("Add", ["l", "c"], ["z"])]
    else:
        nodes += [helper.make_node("Log", ["a"], ["l"]), helper.make_node("Sum", ["l", "b", "c"], ["z"])]
    nodes.append(helper.make_node("Squeeze", ["z", "axes"], ["variable"]))
    extra = [helper.make_tensor("split", TensorProto.INT64, [3], [1, 1, 1])]
    extra.append(helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]))
    return _onnx_model(nodes, initializer=extra).SerializeToString()


def many_inputs_onnx(n: int) -> bytes:
    """``n`` separate [None, 1] inputs x0 ... x{n-1}; predicts their sum."""
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(f"x{j}", TensorProto.FLOAT, [None, 1]) for j in range(n)]
    nodes = [helper.make_node("Sum", [f"x{j}" for j in range(n)], ["z"])]
    nodes.append(helper.make_node("Squeeze", ["z", "axes"], ["variable"]))
    return _onnx_model(nodes, inputs=inputs).SerializeToString()


def chain_onnx(n: int) -> bytes:
    """The row sums through a chain of ``n`` Neg nodes (n even: the row sums again)."""
    from onnx import helper

    nodes = [_row_sums("X", "v0")]
    nodes += [helper.make_node("Neg", [f"v{j}"], [f"v{j + 1}"]) for j in range(n)]
    nodes.append(helper.make_node("Identity", [f"v{n}"], ["variable"]))
    return _onnx_model(nodes).SerializeToString()


def versions_onnx(ir: int = 8, opset: int = 17, op: str = "Identity", domain: str = "") -> bytes:
    """The row sums stamped with IR version ``ir`` and default-domain ``opset``, passed through
    the operator ``op`` of ``domain`` (an opset of that domain is imported)."""
    from onnx import helper

    nodes = [_row_sums("X", "s"), helper.make_node(op, ["s"], ["variable"], domain=domain)]
    opsets = (("", opset),) + (((domain, 1),) if domain else ())
    return _onnx_model(nodes, opsets=opsets, ir=ir).SerializeToString()


def allocating_onnx(dims=(10**6, 10**6)) -> bytes:
    """Small on disk, but each prediction fills a ``dims`` float tensor (ConstantOfShape)."""
    from onnx import TensorProto, helper

    zero = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["W"], value=zero),
        helper.make_node("ReduceSum", ["W"], ["w"], keepdims=0),
        helper.make_node("Add", ["X", "w"], ["Z"]),
        _row_sums("Z"),
    ]
    shape = helper.make_tensor("shape", TensorProto.INT64, [len(dims)], list(dims))
    return _onnx_model(nodes, initializer=[shape]).SerializeToString()
