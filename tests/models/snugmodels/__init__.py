"""snug's model fixtures: LLM-shaped ONNX models in the export conventions people
download (Optimum/torch, onnxruntime-genai's builder, onnxscript), built from the real
SmolLM2-135M GGUF or from random weights, with ONNX Runtime oracles beside them."""
