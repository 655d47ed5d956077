"""Records node stats with ONNX Runtime itself (session.collect_node_memory_stats_to_file)
for the stories260K fixture, as tests/plan/ort_stats_stories260K.csv. Graph
optimizations are off so ORT runs the model's own nodes (fused or folded nodes would
carry other names). ORT writes the file next to the model, so the model is copied to
a temporary folder first.
Run: $(scripts/venv.sh)/bin/python tests/plan/gen_ort_stats.py [OUT]"""
import os
import shutil
import sys
import tempfile

import numpy as np
import onnxruntime as ort

here = os.path.dirname(os.path.abspath(__file__))
model = os.path.join(here, "..", "..", "..", "shared", "fixtures", "stories260K", "stories260K_kv.onnx")
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "ort_stats_stories260K.csv")
with tempfile.TemporaryDirectory() as tmp:
    m = os.path.join(tmp, "model.onnx")
    shutil.copy(model, m)
    so = ort.SessionOptions()
    so.add_session_config_entry("session.collect_node_memory_stats_to_file", "stats.csv")
    so.enable_mem_pattern = False
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in s.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = np.array([[1, 403, 407, 261]], dtype=np.int64)
        else:
            feeds[i.name] = np.zeros([1, 4, 0, 8], dtype=np.float32)
    s.run(None, feeds)
    del s  # the file is written when the session goes away
    shutil.copy(os.path.join(tmp, "stats.csv"), out)
print("wrote", out, "with ORT", ort.__version__)
