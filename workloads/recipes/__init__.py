"""Per-layer op recipes: attention (GQA, MLA, CP), the MoE and dense FFN, the router, activations, the
cross-entropy, FP8 quantization, and the TP / Ulysses collective pairs around a block. Ops carry shapes and bytes,
never times. May import: workloads.ops, workloads.specs, workloads.ep.
"""
