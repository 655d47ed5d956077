"""A small ONNX graph builder with pluggable naming conventions.

A node is added in a scope (e.g. ("model", "layers.0", "self_attn", "q_proj")); the
naming policy turns scope + op type into the node name and output names the way a given
exporter does."""
from __future__ import annotations

import contextlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Naming:
    """torch.onnx (TorchScript) / Optimum: '/model/layers.0/self_attn/q_proj/MatMul',
    repeated ops in one scope get '_1', '_2'; outputs '<node>_output_0'."""
    leading = "/"

    def node_name(self, scope: tuple[str, ...], op: str, count: int) -> str:
        base = self.leading + "/".join(scope + (op,)) if scope else self.leading + op
        return base if count == 0 else f"{base}_{count}"

    def output_name(self, node_name: str, op: str, index: int, counter: int) -> str:
        return f"{node_name}_output_{index}"

    def const_name(self, scope: tuple[str, ...], counter: int) -> str:
        return f"onnx::Constant_{counter}"


class GenaiNaming(Naming):
    """onnxruntime-genai model builder: outputs '<node>/output_N', constants under
    /model/constants/<TYPE>/<shape or value>."""

    def output_name(self, node_name: str, op: str, index: int, counter: int) -> str:
        return f"{node_name}/output_{index}"

    def const_name(self, scope, counter):
        return None  # chosen from the value in Graph.const


class OnnxscriptNaming(Naming):
    """onnxscript / torch.onnx dynamo: node names scoped 'model/layers.0/self_attn/...'
    without a leading slash; values named after the op with a global counter."""
    leading = ""

    def output_name(self, node_name: str, op: str, index: int, counter: int) -> str:
        return f"val_{counter}"

    def const_name(self, scope, counter):
        return f"val_{counter}"


_NP_TO_ONNX_TYPE_NAME = {np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32",
                         np.dtype(np.float32): "FLOAT", np.dtype(np.bool_): "BOOL"}


class Graph:
    def __init__(self, naming: Naming):
        self.naming = naming
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[tuple[str, np.ndarray]] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._scope: tuple[str, ...] = ()
        self._counts: dict[str, int] = {}
        self._value_counter = 0
        self._consts: dict[tuple, str] = {}
        self._init_names: set[str] = set()

    @contextlib.contextmanager
    def scope(self, *parts: str):
        saved = self._scope
        self._scope = saved + tuple(p for p in parts if p)
        try:
            yield
        finally:
            self._scope = saved

    def _next_value(self) -> int:
        self._value_counter += 1
        return self._value_counter

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, domain: str = "",
           outputs: list[str] | None = None, name_op: str | None = None, **attrs):
        """Add a node; returns its output name (n_out == 1) or list of names."""
        key = self.naming.node_name(self._scope, name_op or op_type, 0)
        count = self._counts.get(key, 0)
        self._counts[key] = count + 1
        name = self.naming.node_name(self._scope, name_op or op_type, count)
        if outputs is None:
            outputs = [None] * n_out
        # None: a name from the naming policy; "{node}" in a name: the node's name
        outputs = [self.naming.output_name(name, op_type, i, self._next_value()) if o is None
                   else o.replace("{node}", name) for i, o in enumerate(outputs)]
        node = helper.make_node(op_type, inputs, outputs, name=name, domain=domain or None, **attrs)
        if not domain:
            node.ClearField("domain")
        self.nodes.append(node)
        return outputs[0] if len(outputs) == 1 else outputs

    def initializer(self, name: str, array: np.ndarray) -> str:
        if name in self._init_names:
            raise ValueError(f"duplicate initializer {name}")
        self._init_names.add(name)
        self.initializers.append((name, np.ascontiguousarray(array)))
        return name

    def const(self, value, dtype=np.int64) -> str:
        """A small constant, shared by value."""
        arr = np.array(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key in self._consts:
            return self._consts[key]
        name = self.naming.const_name(self._scope, self._next_value())
        if name is None:  # genai builder style
            tname = _NP_TO_ONNX_TYPE_NAME[arr.dtype]
            shown = repr(arr.item()) if arr.ndim == 0 else str(arr.tolist()).replace(" ", "")
            name = f"/model/constants/{tname}/{shown}"
        self.initializer(name, arr)
        self._consts[key] = name
        return name

    def input(self, name: str, elem_type: int, shape: list) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, name: str, elem_type: int, shape: list) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))

    def save(self, path: str, graph_name: str, opsets: dict[str, int], ir_version: int,
             producer: tuple[str, str], external_data: bool = False, align: int = 0,
             threshold: int = 1024, strip_names: bool = False) -> None:
        """Write model.onnx (and model.onnx.data when external_data): tensors of at
        least `threshold` bytes go to the data file, written straight from numpy so a
        multi-GB model is never serialized in memory. align > 0 pads each external
        tensor's offset to a multiple of align (0: packed tightly, as onnx.save does)."""
        import os
        tensors = []
        data_name = os.path.basename(path) + ".data"
        data_path = os.path.join(os.path.dirname(path), data_name)
        fdata = open(data_path, "wb") if external_data else None
        try:
            offset = 0
            for name, arr in self.initializers:
                if fdata is None or arr.nbytes < threshold:
                    tensors.append(numpy_helper.from_array(arr, name))
                    continue
                if align and offset % align:
                    pad = align - offset % align
                    fdata.write(b"\0" * pad)
                    offset += pad
                t = TensorProto()
                t.name = name
                t.data_type = helper.np_dtype_to_tensor_dtype(arr.dtype)
                t.dims.extend(arr.shape)
                t.data_location = TensorProto.EXTERNAL
                for k, v in (("location", data_name), ("offset", str(offset)), ("length", str(arr.nbytes))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
                fdata.write(memoryview(arr.reshape(-1).view(np.uint8)))
                offset += arr.nbytes
                tensors.append(t)
        finally:
            if fdata:
                fdata.close()
        nodes = self.nodes
        if strip_names:
            nodes = []
            for n in self.nodes:
                c = onnx.NodeProto()
                c.CopyFrom(n)
                c.ClearField("name")
                nodes.append(c)
        g = helper.make_graph(nodes, graph_name, self.inputs, self.outputs, tensors)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                              ir_version=ir_version, producer_name=producer[0],
                              producer_version=producer[1])
        if not external_data and os.path.exists(data_path):
            os.remove(data_path)
        with open(path, "wb") as f:
            f.write(m.SerializeToString())


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
INT32 = TensorProto.INT32
