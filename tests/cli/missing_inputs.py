"""Every operator snug implements, with each input its schema requires left
out, or its output 0, must be refused with an error that names the node: never
a crash, a sanitizer report, or a run that goes ahead.

For each entry of `snug ops` the schema at that opset (onnx.defs; ONNX
Runtime's registry for com.microsoft) says how many leading inputs are required (min_input). For each
required input i, two models are made: one that names input i as "" (absent)
and one whose node lists only the inputs before i. The other inputs are graph
inputs of the first type the schema allows, shape [2, 3] (a scalar where the
schema's name says so is not guessed: a shape error is a clean refusal too).
`snug run` must exit with status 1 with an error naming the node; anything else (status
0, a signal, a sanitizer line) fails the test with the model saved.

  python3 tests/cli/missing_inputs.py PATH/TO/snug [--keep DIR]
"""

import os
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper
TYPES = {
    "tensor(float)": TensorProto.FLOAT,
    "tensor(double)": TensorProto.DOUBLE,
    "tensor(float16)": TensorProto.FLOAT16,
    "tensor(int64)": TensorProto.INT64,
    "tensor(int32)": TensorProto.INT32,
    "tensor(int8)": TensorProto.INT8,
    "tensor(uint8)": TensorProto.UINT8,
    "tensor(bool)": TensorProto.BOOL,
    "tensor(string)": TensorProto.STRING,
}
# Need a subgraph or a sequence/optional value to mean anything; their
# missing-input paths are the control-flow tests' (conformance) business.
SKIP = {"If", "Loop", "Scan", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength",
        "SplitToSequence", "ConcatFromSequence", "OptionalGetElement", "OptionalHasElement"}


def is_optional(formal):
    return str(formal.option).endswith("Optional")


def ort_schemas():
    from onnxruntime.capi import onnxruntime_pybind11_state as C
    table = {}
    for s in C.get_all_operator_schema():
        if s.domain == "com.microsoft":
            table.setdefault(s.name, []).append(s)
    return table


def find_schema(domain, name, since, contrib):
    if domain == "com.microsoft":
        cands = [s for s in contrib.get(name, []) if s.since_version <= since]
        return max(cands, key=lambda s: s.since_version) if cands else None
    try:
        return onnx.defs.get_schema(name, max(since, 7 if domain == "ai.onnx" else 1),
                                    "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:
        return None


def input_type(schema, formal):
    allowed = formal.types
    type_str = getattr(formal, "type_str", None) or getattr(formal, "typeStr", None)
    for c in schema.type_constraints:
        if c.type_param_str == type_str:
            allowed = c.allowed_type_strs
    for t in ("tensor(float)", "tensor(int64)", "tensor(bool)", "tensor(string)"):
        if t in allowed:
            return TYPES[t]
    for t in allowed:
        if t in TYPES:
            return TYPES[t]
    return None


def make_model(schema, domain, opset, inputs_spec, outputs=None):
    """inputs_spec: list of names ("" = absent) for the node; outputs: its
    output names (default y0, y1, ..., as many as the schema's minimum)."""
    graph_inputs = []
    for j, name in enumerate(inputs_spec):
        if not name:
            continue
        formal = schema.inputs[min(j, len(schema.inputs) - 1)]
        t = input_type(schema, formal)
        if t is None:
            return None
        graph_inputs.append(helper.make_tensor_value_info(name, t, [2, 3]))
    outs = ["y%d" % k for k in range(max(1, schema.min_output))] if outputs is None else outputs
    dom = "" if domain == "ai.onnx" else domain
    node = helper.make_node(schema.name, inputs_spec, outs, name="under_test", domain=dom)
    graph = helper.make_graph([node], "missing_input", graph_inputs,
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs if o])
    imports = [helper.make_opsetid("", opset if not dom else 17)]
    if dom:
        imports.append(helper.make_opsetid(dom, opset))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model


def main():
    snug = sys.argv[1]
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    ops = subprocess.run([snug, "ops"], check=True, capture_output=True, text=True).stdout.split("\n")
    entries = []
    for line in ops:
        f = line.split()
        if len(f) == 3:
            entries.append((f[0], f[1], int(f[2])))
    contrib = ort_schemas()
    tmp = tempfile.mkdtemp(prefix="snug-missing-")
    failures, checked = [], 0
    for domain, name, since in entries:
        if name in SKIP:
            continue
        schema = find_schema(domain, name, since, contrib)
        if schema is None:
            continue
        opset = max(since, 7) if domain == "ai.onnx" else since
        n_req = schema.min_input
        cases = []
        for i in range(n_req):
            if i < len(schema.inputs) and is_optional(schema.inputs[i]):
                continue
            names = ["x%d" % j for j in range(n_req)]
            cases += [("input %d absent" % i, names[:i] + [""] + names[i + 1:], None),
                      ("input %d short" % i, names[:i], None)]
        if schema.outputs and schema.min_output > 0 and not is_optional(schema.outputs[0]):
            names = ["" if j < len(schema.inputs) and is_optional(schema.inputs[j]) else "x%d" % j
                     for j in range(n_req)]
            cases += [("output 0 absent", names, [""]), ("no outputs", names, [])]
        for variant, spec, outs in cases:
            model = make_model(schema, domain, opset, spec, outs)
            if model is None:
                continue
            path = os.path.join(tmp, "%s_%s_%d_%s.onnx" % (domain, name, since, variant.replace(" ", "_")))
            onnx.save(model, path)
            r = subprocess.run([snug, "run", path], capture_output=True, text=True, timeout=60)
            checked += 1
            text = r.stdout + r.stderr
            bad = r.returncode != 1 or "under_test" not in r.stderr or "runtime error" in text \
                or "Sanitizer" in text
            if bad:
                failures.append("%s %s (opset %d) %s: exit %d\n    %s" %
                                (domain, name, since, variant, r.returncode,
                                 "\n    ".join(text.strip().split("\n")[:6])))
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    os.replace(path, os.path.join(keep, os.path.basename(path)))
                    continue
            os.remove(path)
    os.rmdir(tmp) if not os.listdir(tmp) else None
    print("%d models with a required input or output left out, %d not refused cleanly" % (checked, len(failures)))
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures or checked == 0 else 0)


if __name__ == "__main__":
    main()
