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
