"""CUDA graphs (Megatron-Core --cuda-graph-impl local / transformer_engine / full_iteration, --cuda-graph-modules):
which ops a graph captures. A captured run of kernels costs the host one graph launch instead of one launch per
kernel (simulator.streams.op_costs.launch_times_s), and each kernel the GPU's shorter fixed time of a graph replay
(Calibration.graph_kernel_overhead_s, simulator.costs.kernels.kernel_overhead_s).

Per-layer scopes (local, transformer_engine), as megatron/training/arguments.py describes them: "attn" captures
TransformerLayer._forward_attention, "mlp" a dense layer's _forward_mlp, "moe" a MoE layer's _forward_mlp,
"moe_router" it up to MoELayer.router(), "moe_preprocess" up to the dispatcher's preprocess (here: the router part
too, the preprocess is not a step of its own), "mamba" a hybrid model's Mamba layer; no scope with a graph implementation captures the whole layer
("layer"). A graph cannot hold a device-to-host copy the host waits for, so the MoE part after the dispatcher's
token-count sync (dropless routing) stays eager.

"iteration" is --cuda-graph-impl full_iteration (NVIDIA/Megatron-LM e41b37002c, #4292; at d98e8a64dd
megatron/core/full_cuda_graph.py FullCudaGraphWrapper, wrapped around forward_backward_func in
megatron/training/training.py): one graph for the whole forward-backward of all micro-batches, the optimizer
step excluded. Every op moesim lists for the step is captured: the layers, the embedding and the head, on every
stream. The host replays the graph once; moesim's launch key is per layer and direction (one ``host_launch_s``
per layer's run of ops, which the layer's GPU time hides, so the host never gates the GPU). A host sync cannot be
captured: torch refuses a device-to-host wait during capture, so the MoE layers must have static shapes
(workloads/specs/validation.py ``_check_graphs`` says which Megatron flags give them).
"""

from __future__ import annotations

from collections.abc import Callable

from workloads.ops import HOST_SYNC, GraphPart, Step, evolved

ITERATION = "iteration"  # --cuda-graph-impl full_iteration: the whole forward-backward, one graph
ALL_PARTS = frozenset({GraphPart.ATTN, GraphPart.MLP, GraphPart.MOE_ROUTER, GraphPart.MOE, GraphPart.MAMBA})
SCOPE_PARTS: dict[str, frozenset[GraphPart]] = {
    "layer": ALL_PARTS,
    "attn": frozenset({GraphPart.ATTN}),
    "mlp": frozenset({GraphPart.MLP}),
    "moe": frozenset({GraphPart.MOE_ROUTER, GraphPart.MOE}),
    "moe_router": frozenset({GraphPart.MOE_ROUTER}),
    "moe_preprocess": frozenset({GraphPart.MOE_ROUTER}),
    "mamba": frozenset({GraphPart.MAMBA}),  # a hybrid model's MambaLayer (workloads/recipes/mamba.py)
    ITERATION: ALL_PARTS | {GraphPart.NONE},
}
GRAPH_SCOPES = tuple(SCOPE_PARTS)


def captured_parts(scopes: tuple[str, ...]) -> frozenset[GraphPart]:
    """The layer parts the layout's CUDA-graph scopes capture (none without scopes: eager mode)."""
    return frozenset().union(*(SCOPE_PARTS[scope] for scope in scopes))


def capture(scopes: tuple[str, ...]) -> Callable[[GraphPart], GraphPart]:
    """The graph a step of part ``part`` runs in under the layout's scopes: the step's own part when a per-layer
    scope captures it, ITERATION for every step under the full-iteration graph, NONE (eager) otherwise."""
    if ITERATION in scopes:
        return lambda part: GraphPart.ITERATION
    captured = captured_parts(scopes)
    return lambda part: part if part in captured else GraphPart.NONE


def tag_layer(attention: list[Step], ffn: list[Step], dense: bool) -> list[Step]:
    """A layer's steps marked with their part: attention, a dense MLP, or the MoE layer (its router steps
    come marked), which stops at the first host sync: what follows runs eagerly."""
    steps = [evolved(step, graph=GraphPart.ATTN) for step in attention]
    part = GraphPart.MLP if dense else GraphPart.MOE
    for step in ffn:
        if step.kind == HOST_SYNC:
            part = GraphPart.NONE
        steps.append(step if step.graph != GraphPart.NONE else evolved(step, graph=part))
    return steps
