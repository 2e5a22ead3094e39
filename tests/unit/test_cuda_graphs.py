"""CUDA graphs (workloads/specs/cuda_graphs.py, simulator.streams.op_costs.launch_times_s): one launch per captured run."""

from __future__ import annotations

import pytest
import simpy

from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import launch_times_s
from simulator.streams.tasks import TaskTiming, run_task
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import COMPUTE, HOST_SYNC, MEMORY, GraphPart, Op, Role
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

CAL = toy_calibration(host_launch_s=10e-6)
MODEL = ModelSpec("m", 1, 1024, 8, 8, 512, 8, 2, 64)


def _scopes(flags: str) -> tuple[str, ...]:
    return parse_megatron_args(flags).layout_fields["cuda_graph_scope"]


def test_megatron_flags() -> None:
    """--cuda-graph-impl with its scopes (either flag name); the legacy switch captures whole layers; the
    old "full" is the whole layer; no implementation, no graphs."""
    assert _scopes("--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router") == ("attn", "moe_router")
    assert _scopes("--cuda-graph-impl local --cuda-graph-modules full") == ("layer",)
    assert _scopes("--enable-cuda-graph") == ("layer",)
    assert _scopes("--cuda-graph-impl local") == ("layer",)
    assert _scopes("--cuda-graph-scope attn") == ()


def _op(name: str, kernels: int, graph: GraphPart = GraphPart.NONE, layer: int = 0, role: Role = Role.FORWARD) -> Op:
    return Op(name, MEMORY, COMPUTE, role=role, layer=layer, kernels=kernels, graph=graph)


def test_one_launch_per_captured_run_by_hand() -> None:
    """Eager ops pay 10 us per kernel; three consecutive attention ops of layer 0 one 10 us graph launch;
    the same part of layer 1, or layer 0's backward, is another graph."""
    attn = GraphPart.ATTN
    ops = (
        _op("norm", 3),
        _op("a", 2, attn),
        _op("b", 5, attn),
        _op("c", 1, attn),
        _op("a1", 4, attn, layer=1),
        _op("a.bwd", 4, attn, role=Role.INPUT_GRAD),
        _op("eager", 2),
    )
    assert launch_times_s(ops, CAL, toy_gpu()) == pytest.approx((30e-6, 10e-6, 0.0, 0.0, 10e-6, 10e-6, 20e-6))


def test_layer_ops_carry_the_captured_parts() -> None:
    """Scope "attn": the attention ops are captured, the MoE ones eager; "moe": the router and the MoE ops
    before the token-count host sync, nothing after it."""
    attn = LayoutSpec("t", intra_size=1, ffn="ep", cuda_graph_scope=("attn",))
    ops = forward_ops([(0, layer_recipe(MODEL, attn, 1024, 8))], attn)
    assert {op.name for op in ops if op.graph == GraphPart.ATTN} >= {"attn_norm", "flash_attn"}
    assert all(op.graph in (GraphPart.ATTN, GraphPart.NONE) for op in ops)
    assert any(op.graph == GraphPart.NONE and op.name.startswith("expert") for op in ops)
    moe = LayoutSpec("t", intra_size=1, ffn="ep", cuda_graph_scope=("moe",), host_sync_per_moe_layer=True)
    ops = forward_ops([(0, layer_recipe(MODEL, moe, 1024, 8))], moe)
    sync = next(i for i, op in enumerate(ops) if op.kind == HOST_SYNC)
    assert ops[sync - 1].graph in (GraphPart.MOE, GraphPart.MOE_ROUTER)
    assert all(op.graph == GraphPart.NONE for op in ops[sync:])


def _host_bound_duration(ops: list[Op]) -> float:
    """A task whose kernels take no GPU time: it lasts as long as the host takes to issue them."""
    env = simpy.Environment()
    ops = tuple(ops)
    costs = costs_without_latency(ops, toy_gpu(), CAL)
    run_task(env, ops, costs, FluidNetwork(env, {"nvl": 1e9}), ("nvl",), TaskTiming())
    env.run()
    return env.now


def test_graph_on_off_difference_is_the_launches_saved() -> None:
    """Differential: a layer's forward and backward ops made free on the GPU (no FLOPs, no bytes), so the
    task is host-bound; capturing "layer" saves 10 us per captured kernel and costs 10 us per captured run
    (counted by hand from the ops: a new run wherever layer, part or direction changes)."""

    def ops(scopes: tuple[str, ...]) -> list[Op]:
        layout = LayoutSpec("t", intra_size=1, ffn="ep", cuda_graph_scope=scopes)
        steps = layer_recipe(MODEL, layout, 1024, 8)
        free = [
            Op(o.name, MEMORY, COMPUTE, o.deps, o.role, o.layer, kernels=o.kernels, graph=o.graph)
            for o in forward_ops([(0, steps)], layout) + backward_ops([(0, steps)], layout)
        ]
        return free

    eager, graphed = ops(()), ops(("layer",))
    captured = [op for op in graphed if op.graph != GraphPart.NONE]
    runs, previous = 0, None
    for op in graphed:
        key = (op.layer, op.graph, op.role in (Role.INPUT_GRAD, Role.WEIGHT_GRAD)) if op.graph else None
        runs += key is not None and key != previous
        previous = key
    saved = sum(op.kernels for op in captured) * 10e-6 - runs * 10e-6
    assert runs >= 4 and saved > 0
    assert _host_bound_duration(eager) - _host_bound_duration(graphed) == pytest.approx(saved, rel=1e-12)


SHARED = ModelSpec("s", 1, 1024, 8, 8, 512, 8, 2, 64, num_shared_experts=1)
_SHARED_STEPS = ("shared_fc13", "shared_swiglu", "shared_fc2")


def _ffn_order(layout: LayoutSpec) -> list[str]:
    """The names of the layer's steps that launch kernels in forward (not the backward-only gradient sums)."""
    return [step.name for step in layer_recipe(SHARED, layout, 1024, 8) if not step.backward_only]


def test_megatron_shared_experts_run_before_the_router_and_in_its_graph() -> None:
    """Megatron-Core's MoELayer runs shared_experts_compute before route() and preprocess() unless
    --moe-shared-expert-overlap (inter_op_overlap) hands them to the dispatcher, so a "moe_router" graph captures
    them (arXiv 2603.07685v1 Sec. 4.3.6: "A shared expert, if present, is also captured in this graph"): between the
    pre-MLP norm and the router GEMM, queued before the token-count sync, in the router's captured run; with the
    overlap flag, or MegaScale-MoE's own dispatcher, they stay beside the dispatch, eager."""
    graphed = LayoutSpec(
        "t",
        intra_size=1,
        ffn="ep",
        token_dispatcher="alltoall",
        host_sync_per_moe_layer=True,
        inter_op_overlap=False,
        intra_op_overlap=False,
        cuda_graph_scope=("moe_router",),
    )
    order = _ffn_order(graphed)
    norm, router = order.index("ffn_norm"), order.index("router")
    assert [order.index(name) for name in _SHARED_STEPS] == [norm + 1, norm + 2, norm + 3] and router == norm + 4
    ops = forward_ops([(0, layer_recipe(SHARED, graphed, 1024, 8))], graphed)
    assert {op.graph for op in ops if op.name in _SHARED_STEPS} == {GraphPart.MOE_ROUTER}
    sync = next(i for i, op in enumerate(ops) if op.kind == HOST_SYNC)
    captured = [i for i, op in enumerate(ops) if op.graph == GraphPart.MOE_ROUTER]
    assert captured == list(range(captured[0], captured[-1] + 1)) and captured[-1] < sync  # one run, one launch
    assert sum(launch > 0 for launch in launch_times_s(tuple(ops[i] for i in captured), CAL, toy_gpu())) == 1
    beside = (graphed.with_(inter_op_overlap=True), graphed.with_(token_dispatcher="megascale"))
    for layout in beside:
        order = _ffn_order(layout)
        assert order.index("shared_fc13") > order.index("router"), layout.token_dispatcher
        ops = forward_ops([(0, layer_recipe(SHARED, layout, 1024, 8))], layout)
        assert all(op.graph == GraphPart.NONE for op in ops if op.name in _SHARED_STEPS)
