"""CUDA graphs (Megatron-Core --cuda-graph-impl local / transformer_engine, --cuda-graph-scope): which ops
a graph captures. A captured run of kernels costs the host one graph launch instead of one launch per
kernel (simulator.streams.op_costs.OpCosts), and each kernel the GPU's shorter fixed time of a graph replay
(Calibration.graph_kernel_overhead_s, simulator.costs.kernels.kernel_overhead_s).

Scopes, as megatron/training/arguments.py describes them: "attn" captures TransformerLayer._forward_attention,
"mlp" a dense layer's _forward_mlp, "moe" a MoE layer's _forward_mlp, "moe_router" it up to
MoELayer.router(), "moe_preprocess" up to the dispatcher's preprocess (here: the router part too, the
preprocess is not a step of its own); no scope with a graph implementation captures the whole layer
("layer"). A graph cannot hold a device-to-host copy the host waits for, so the MoE part after the
dispatcher's token-count sync (dropless routing) stays eager.
"""

from __future__ import annotations

from dataclasses import replace

from workloads.ops import HOST_SYNC, GraphPart, Step

ALL_PARTS = frozenset({GraphPart.ATTN, GraphPart.MLP, GraphPart.MOE_ROUTER, GraphPart.MOE})
SCOPE_PARTS: dict[str, frozenset[GraphPart]] = {
    "layer": ALL_PARTS,
    "attn": frozenset({GraphPart.ATTN}),
    "mlp": frozenset({GraphPart.MLP}),
    "moe": frozenset({GraphPart.MOE_ROUTER, GraphPart.MOE}),
    "moe_router": frozenset({GraphPart.MOE_ROUTER}),
    "moe_preprocess": frozenset({GraphPart.MOE_ROUTER}),
}
GRAPH_SCOPES = tuple(SCOPE_PARTS)


def captured_parts(scopes: tuple[str, ...]) -> frozenset[GraphPart]:
    """The layer parts the layout's CUDA-graph scopes capture (none without scopes: eager mode)."""
    return frozenset().union(*(SCOPE_PARTS[scope] for scope in scopes))


def tag_layer(attention: list[Step], ffn: list[Step], dense: bool) -> list[Step]:
    """A layer's steps marked with their part: attention, a dense MLP, or the MoE layer (its router steps
    come marked), which stops at the first host sync: what follows runs eagerly."""
    steps = [replace(step, graph=GraphPart.ATTN) for step in attention]
    part = GraphPart.MLP if dense else GraphPart.MOE
    for step in ffn:
        if step.kind == HOST_SYNC:
            part = GraphPart.NONE
        steps.append(step if step.graph != GraphPart.NONE else replace(step, graph=part))
    return steps
