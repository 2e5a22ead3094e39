"""Megatron-Core's combined 1F1B F&B task (workloads/graph/combined_1f1b.py): one forward layer and another micro-batch's
backward layer issued as TransformerLayerSchedulePlan.run issues them, both all-to-alls of both on one comm stream.

Toy GPU: memory-bound ops of 1e9 B take 1 ms (1e12 B/s); each all-to-all sends 1.4 MB at efficiency 0.7 on a
1 GB/s link: 2 ms. No SMs are held by communication (toy calibration). The unpermutes run on the comm stream, so
the task's kernels take turns on the GPU and each all-to-all is admitted in the same queue
(tests/scenarios/test_shared_gpu.py): at an instant where one op's end releases kernels of both streams, the
stream of the op that ended goes on first.
"""

from __future__ import annotations

from dataclasses import replace

import simpy

from simulator.streams.network import FluidNetwork
from simulator.streams.tasks import TaskTiming, run_task
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.graph import combined_1f1b
from workloads.graph.combined_1f1b import EP_COMM
from workloads.graph.step import StepWorkload
from workloads.ops import ALL_GATHER, ALL_TO_ALL, COLLECTIVE, COMPUTE, MEMORY, Group, Module, Op, Role
from workloads.schedules.base import BACKWARD, FORWARD, FORWARD_BACKWARD_DELAYED, Task
from workloads.specs.layouts import MEGASCALE_MOE
from workloads.specs.models import model_preset

GPU = toy_gpu(nvlink_bandwidth_Bps=1e9)
CAL = toy_calibration(all_to_all_efficiency=0.7)
F, G, W = Role.FORWARD, Role.INPUT_GRAD, Role.WEIGHT_GRAD


def _mem(name: str, deps: tuple[int, ...], role: Role, module: Module = Module.NONE) -> Op:
    return Op(name, MEMORY, COMPUTE, deps, role, 0, mem_bytes=1e9, module=module)


def _a2a(name: str, deps: tuple[int, ...], role: Role) -> Op:
    return Op(name, COLLECTIVE, COMPUTE, deps, role, 0, collective=ALL_TO_ALL, group=Group.EP, comm_bytes=1.4e6)


# One MoE layer's forward and backward as workloads.graph.op_lists builds them: every op on the compute stream, in a chain.
FORWARD_LAYER = (
    _mem("attn", (), F),
    _a2a("dispatch", (0,), F),
    _mem("experts", (1,), F),
    _a2a("combine", (2,), F),
    _mem("unpermute", (3,), F, Module.MOE),
)
BACKWARD_LAYER = (
    _mem("unpermute.bwd", (), G, Module.MOE),
    _a2a("combine.bwd", (0,), G),
    _mem("experts.dgrad", (1,), G),
    _mem("experts.wgrad", (1,), W),
    _a2a("dispatch.bwd", (2,), G),
    _mem("attn.dgrad", (4,), G),
    _mem("attn.wgrad", (4,), W),
)


def _run(ops: tuple[Op, ...]) -> tuple[float, list[tuple[str, str, float, float]]]:
    env = simpy.Environment()
    timing = TaskTiming()
    run_task(env, ops, costs_without_latency(ops, GPU, CAL), FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing)
    env.run()
    spans = sorted(timing.intervals, key=lambda t: (t[1], t[0]))
    return round(timing.duration_s * 1e3, 9), [
        (ops[i].name, ops[i].stream, round(b * 1e3, 9), round(e * 1e3, 9)) for i, b, e in spans
    ]


def test_each_all_to_all_hides_behind_the_other_micro_batch_compute() -> None:
    """Issue order: the backward's combine node (unpermute.bwd, combine.bwd) on the comm stream, the forward's
    attention, the experts' dgrad and (delayed) wgrad, dispatch.bwd, the forward's experts and combine node,
    the attention's dgrad and wgrad. unpermute.bwd (first in program order) takes the GPU 0-1 and attn, waiting
    since 0, follows 1-2; combine.bwd, ready at 1, is admitted at attn's end: 2-4. Its end releases the forward's
    dispatch (its stream's next, first) 4-6 and experts.dgrad 4-5; experts.wgrad 5-6; dispatch.bwd 6-8 and the
    experts it released 6-7; combine (experts ended at 7) 8-10 and attn.dgrad 8-9, attn.wgrad 9-10; unpermute
    10-11: 11 ms, where the two run one after the other take 7 + 9 (with the unpermutes beside the compute, as
    if they had SMs of their own, it was 10)."""
    ops = combined_1f1b.pair(FORWARD_LAYER, BACKWARD_LAYER, delay_wgrad=True)
    assert _run(ops) == (
        11.0,
        [
            ("unpermute.bwd", EP_COMM, 0.0, 1.0),
            ("attn", COMPUTE, 1.0, 2.0),
            ("combine.bwd", EP_COMM, 2.0, 4.0),
            ("experts.dgrad", COMPUTE, 4.0, 5.0),
            ("dispatch", EP_COMM, 4.0, 6.0),
            ("experts.wgrad", COMPUTE, 5.0, 6.0),
            ("dispatch.bwd", EP_COMM, 6.0, 8.0),
            ("experts", COMPUTE, 6.0, 7.0),
            ("combine", EP_COMM, 8.0, 10.0),
            ("attn.dgrad", COMPUTE, 8.0, 9.0),
            ("attn.wgrad", COMPUTE, 9.0, 10.0),
            ("unpermute", EP_COMM, 10.0, 11.0),
        ],
    )
    assert _run(FORWARD_LAYER)[0] == 7.0 and _run(BACKWARD_LAYER)[0] == 9.0


def test_without_delay_the_dispatch_backward_waits_for_the_experts_wgrad() -> None:
    """Without --delay-wgrad-compute mlp.backward runs the experts' wgrad with their dgrad (backward_dw is a no-op)
    and the dispatch node waits for its event after both: dispatch.bwd 6-8 behind experts.wgrad 5-6 either way
    here (the forward's dispatch holds the comm stream 4-6), the same 11 ms."""
    ops = combined_1f1b.pair(FORWARD_LAYER, BACKWARD_LAYER, delay_wgrad=False)
    assert _run(ops)[0] == 11.0
    dispatch_bwd = next(i for i, op in enumerate(ops) if op.name == "dispatch.bwd")
    assert {ops[d].name for d in ops[dispatch_bwd].deps} == {"experts.dgrad", "experts.wgrad"}


def test_a_half_alone_runs_as_it_would_unpaired() -> None:
    """Differential: a forward with no backward, and a backward with no forward, take the time of the plain op
    list: 7 and 9 ms (Megatron-Core runs unpaired layers through the same plan). With the delay the lone
    backward's dispatch.bwd, released at 4 by experts.dgrad's end, finds experts.wgrad (its stream's next) taking
    the SMs and starts at its end, 5-7: 9 ms as well."""
    assert _run(combined_1f1b.pair(FORWARD_LAYER, (), delay_wgrad=True))[0] == _run(FORWARD_LAYER)[0] == 7.0
    assert _run(combined_1f1b.pair((), BACKWARD_LAYER, delay_wgrad=False))[0] == _run(BACKWARD_LAYER)[0] == 9.0
    assert _run(combined_1f1b.pair((), BACKWARD_LAYER, delay_wgrad=True))[0] == 9.0


def test_the_workload_pairs_layer_by_layer_on_two_streams() -> None:
    """The F&Bdw task of a two-layer Mixtral with EP overlap: one op list, no lanes, every EP all-to-all of both
    micro-batches on the one comm stream, the forward and the full backward's ops each once."""
    model = model_preset("mixtral-8x7b").with_(num_layers=2)
    layout = MEGASCALE_MOE.with_(pp=1, intra_op_overlap=False, ep_overlap=True, delay_wgrad=True)
    work = StepWorkload(model, layout, 8, 8, 4, 1024)
    pair = next(t for t in work.stage_order(0) if t.direction == FORWARD_BACKWARD_DELAYED)
    key = work.task_key(0, pair)
    ops = work.task_ops(key)
    assert work.task_lanes(key) is None
    forward = work.task_ops(work.task_key(0, Task(FORWARD, 0, 0)))
    backward = work.task_ops(work.task_key(0, Task(BACKWARD, 0, 0)))
    assert sorted(op.name for op in ops) == sorted(op.name for op in forward + backward)
    ep = [op for op in ops if op.group == Group.EP and op.kind == COLLECTIVE]
    assert {op.stream for op in ep} == {EP_COMM}
    assert len([op for op in ep if op.role != Role.RECOMPUTE]) == 8  # 2 layers x dispatch, combine x F, B
    # layer 0 of the forward pairs with layer 1 of the backward: its combine.bwd is issued first
    first = next(op for op in ops if op.group == Group.EP and op.role != Role.RECOMPUTE)
    assert (first.name, first.layer, first.role) == ("ep_a2a_combine.bwd", 1, G)


def test_a_metadata_collective_of_the_dispatch_preprocess_stays_with_the_attention() -> None:
    """HybridEP's routing-map all-gather (an EP collective before the dispatch) runs in pre_dispatch_computation,
    on the compute stream (Megatron-Core's dispatch preprocess); the layer is still cut at its dispatch and
    combine all-to-alls, which go to the comm stream. Before, a third EP collective left the layer in one piece,
    on the compute stream, hiding nothing of the forward's exchanges."""
    forward = (
        _mem("attn", (), F),
        Op("routing_map_ag", COLLECTIVE, COMPUTE, (0,), F, 0, collective=ALL_GATHER, group=Group.EP, comm_bytes=1e6),
        _a2a("dispatch", (1,), F),
        _mem("experts", (2,), F),
        _a2a("combine", (3,), F),
        _mem("unpermute", (4,), F, Module.MOE),
    )
    ops = combined_1f1b.pair(forward, BACKWARD_LAYER, delay_wgrad=True)
    streams = {(op.name, op.role): op.stream for op in ops}
    assert streams[("routing_map_ag", F)] == COMPUTE
    assert streams[("dispatch", F)] == streams[("combine", F)] == streams[("unpermute", F)] == EP_COMM


def test_the_probs_all_to_all_goes_with_the_dispatch_node() -> None:
    """The alltoall dispatcher's token_dispatch sends the rows and then their probs in two NCCL calls, both in the
    moe_dispatch node; backward sends the probs' gradients first (NVIDIA/Megatron-LM@2a75ac12 token_dispatcher.py,
    "Backward launch order: probs A2A -> tokens A2A"). The layer is still cut at its dispatch and combine: both
    calls on the comm stream, issued back to back where the one dispatch was, and the backward's dispatch node
    (probs.bwd first) waits for the experts' wgrad without --delay-wgrad-compute. Each probs call (0.7 MB, 1 ms)
    adds its time where the comm stream is the pair's critical path: probs 6-7 after the dispatch, probs.bwd 7-8
    (the experts start at 7, on the probs), dispatch.bwd 8-10, combine 10-12, unpermute 12-13: 11 -> 13 ms."""
    forward = (
        _mem("attn", (), F),
        _a2a("dispatch", (0,), F),
        replace(_a2a("probs", (1,), F), comm_bytes=0.7e6),
        _mem("experts", (2,), F),
        _a2a("combine", (3,), F),
        _mem("unpermute", (4,), F, Module.MOE),
    )
    backward = (
        *BACKWARD_LAYER[:4],
        replace(_a2a("probs.bwd", (2,), G), comm_bytes=0.7e6),
        _a2a("dispatch.bwd", (4,), G),
        _mem("attn.dgrad", (5,), G),
        _mem("attn.wgrad", (5,), W),
    )
    assert [op.name for op in backward] == [
        "unpermute.bwd",
        "combine.bwd",
        "experts.dgrad",
        "experts.wgrad",
        "probs.bwd",
        "dispatch.bwd",
        "attn.dgrad",
        "attn.wgrad",
    ]
    ops = combined_1f1b.pair(forward, backward, delay_wgrad=False)
    names = [op.name for op in ops]
    assert names.index("probs") == names.index("dispatch") + 1
    assert names.index("dispatch.bwd") == names.index("probs.bwd") + 1
    assert {op.stream for op in ops if op.kind == COLLECTIVE} == {EP_COMM}
    probs_bwd = ops[names.index("probs.bwd")]
    assert {ops[d].name for d in probs_bwd.deps} == {"experts.dgrad", "experts.wgrad"}
    assert _run(ops)[0] == 13.0
    assert _run(combined_1f1b.pair(FORWARD_LAYER, BACKWARD_LAYER, delay_wgrad=False))[0] == 11.0


def test_the_mlp_residual_add_runs_in_the_combine_node() -> None:
    """Megatron-Core's combine node runs the combine, the unpermute and the MLP's bias-dropout-add (residual add)
    on the comm stream (fine_grained_callables.py submodule_combine_forward at NVIDIA/Megatron-LM@d98e8a64): the
    residual add after the unpermute goes with them, so the backward's attention (issued after the forward's
    combine node) does not wait behind it on the compute stream."""
    forward = (*FORWARD_LAYER, _mem("mlp_residual", (4,), F))
    ops = combined_1f1b.pair(forward, BACKWARD_LAYER, delay_wgrad=True)
    streams = {(op.name, op.role): op.stream for op in ops}
    assert streams[("unpermute", F)] == streams[("mlp_residual", F)] == EP_COMM
    assert streams[("attn", F)] == streams[("attn.dgrad", G)] == COMPUTE
    # on the comm stream it adds its 1 ms where the comm stream ends the pair: 11 -> 12 ms
    duration, spans = _run(ops)
    assert duration == 12.0
    assert ("mlp_residual", EP_COMM, 11.0, 12.0) in spans
