"""Megatron-Core's --delay-wgrad-compute inside the EP-overlap pair (workloads.dualpipe.delay_weight_grads):
each layer's expert weight gradients run while its dispatch backward is in flight, the attention's, router's
and shared experts' after the layer's last input gradient (TransformerLayerSchedulePlan.run).

Memory-bound ops of 1e9 B take 1 ms on the toy GPU (1e12 B/s, efficiency 1); each all-to-all sends 1.4 MB
at efficiency 0.7 on a 1 GB/s link: 2 ms. No SMs are held by communication (toy calibration).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import simpy

from simulator.network import FluidNetwork
from simulator.tasks import OpCosts, TaskTiming, run_task
from tests.toys import toy_calibration, toy_gpu
from workloads import dualpipe
from workloads.layouts import MEGASCALE_MOE
from workloads.models import model_preset
from workloads.ops import ALL_TO_ALL, COLLECTIVE, COMM, COMPUTE, MEMORY, Group, Module, Op, Role
from workloads.schedules import BACKWARD, FORWARD_BACKWARD_DELAYED, Task
from workloads.step import StepWorkload

GPU = toy_gpu(nvlink_bandwidth_Bps=1e9)
CAL = toy_calibration(all_to_all_efficiency=0.7)
W, G = Role.WEIGHT_GRAD, Role.INPUT_GRAD


def _mem(name: str, deps: tuple[int, ...], role: Role = G, module: Module = Module.NONE) -> Op:
    return Op(name, MEMORY, COMPUTE, deps, role, 0, mem_bytes=1e9, module=module)


def _a2a(name: str, deps: tuple[int, ...]) -> Op:
    return Op(name, COLLECTIVE, COMM, deps, G, 0, collective=ALL_TO_ALL, group=Group.EP, group_size=8, comm_bytes=1.4e6)


# One MoE layer's backward as workloads.tasks issues it (inter-op overlap: a weight gradient after the next
# collective or before the next compute op): combine, the experts, the shared expert, dispatch, attention.
LAYER = (
    _a2a("combine.bwd", ()),
    _mem("fc2.dgrad", (0,)),
    _mem("fc2.wgrad", (0,), W),
    _mem("fc13.dgrad", (1,)),
    _mem("fc13.wgrad", (1,), W),
    _mem("shared.dgrad", (3,), module=Module.SHARED_EXPERTS),
    _a2a("dispatch.bwd", (5,)),
    _mem("shared.wgrad", (3,), W, Module.SHARED_EXPERTS),
    _mem("attn.dgrad", (6,)),
    _mem("attn.wgrad", (6,), W),
)


def _run(ops: tuple[Op, ...]) -> list[tuple[str, float, float]]:
    env = simpy.Environment()
    timing = TaskTiming()
    run_task(env, ops, OpCosts.of(ops, GPU, CAL, 0.0), FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing)
    env.run()
    return [
        (ops[i].name, round(b * 1e3, 9), round(e * 1e3, 9))
        for i, b, e in sorted(timing.intervals, key=lambda t: (t[1], t[0]))
    ]


def test_the_dispatch_backward_starts_before_the_weight_gradients() -> None:
    """As issued: the compute stream runs fc2 d/w 2-4, fc13 d/w 4-6, shared.dgrad 6-7, so the dispatch
    backward starts at 7 and attention's input gradient waits for it until 9: 11 ms.
    Delayed: the input gradients 2-5, the dispatch backward 5-7 with fc2 and fc13 wgrads beside it (5-7),
    attention's input gradient 7-8, then shared and attention wgrads 8-10: 10 ms, the dispatch hidden."""
    assert _run(LAYER) == [
        ("combine.bwd", 0.0, 2.0),
        ("fc2.dgrad", 2.0, 3.0),
        ("fc2.wgrad", 3.0, 4.0),
        ("fc13.dgrad", 4.0, 5.0),
        ("fc13.wgrad", 5.0, 6.0),
        ("shared.dgrad", 6.0, 7.0),
        ("dispatch.bwd", 7.0, 9.0),
        ("shared.wgrad", 7.0, 8.0),
        ("attn.dgrad", 9.0, 10.0),
        ("attn.wgrad", 10.0, 11.0),
    ]
    delayed = dualpipe.delay_weight_grads(LAYER)
    assert _run(delayed) == [
        ("combine.bwd", 0.0, 2.0),
        ("fc2.dgrad", 2.0, 3.0),
        ("fc13.dgrad", 3.0, 4.0),
        ("shared.dgrad", 4.0, 5.0),
        ("dispatch.bwd", 5.0, 7.0),
        ("fc2.wgrad", 5.0, 6.0),
        ("fc13.wgrad", 6.0, 7.0),
        ("attn.dgrad", 7.0, 8.0),
        ("shared.wgrad", 8.0, 9.0),
        ("attn.wgrad", 9.0, 10.0),
    ]


def test_each_layer_delays_its_own() -> None:
    """Two layers: the second's ops (layer 1 first, as a backward runs) keep their own delayed order; a layer
    without both all-to-alls (dense) puts its weight gradients at its end."""
    dense = (_mem("mlp.dgrad", ()), _mem("mlp.wgrad", (), W), _mem("attn.dgrad", (0,)), _mem("attn.wgrad", (0,), W))
    moe = tuple(replace(op, layer=1, deps=tuple(d + len(dense) for d in op.deps)) for op in LAYER)
    names = [op.name for op in dualpipe.delay_weight_grads(dense + moe)]
    assert names[:4] == ["mlp.dgrad", "attn.dgrad", "mlp.wgrad", "attn.wgrad"]
    assert names[4:] == [op.name for op in dualpipe.delay_weight_grads(LAYER)]


def test_the_pair_uses_the_delayed_backward() -> None:
    """The F&Bdw task of a one-layer Mixtral with a shared expert: the backward lane runs the experts'
    weight gradients right after the dispatch backward, the shared experts' and attention's at the end."""
    model = model_preset("mixtral-8x7b").with_(num_layers=1, num_shared_experts=1)
    layout = MEGASCALE_MOE.with_(pp=1, intra_op_overlap=False, ep_overlap=True, delay_wgrad=True)
    work = StepWorkload(model, layout, 8, 8, 4, 1024)
    order = work.stage_order(0)
    assert {t.direction for t in order} == {FORWARD_BACKWARD_DELAYED.value, "F", "B"}
    pair = next(t for t in order if t.direction == FORWARD_BACKWARD_DELAYED)
    key = work.task_key(0, pair)
    ops, lanes = work.task_ops(key), work.task_lanes(key)
    backward = [op.name for op, lane in zip(ops, lanes) if lane == 1 and op.layer == 0]
    dispatch = backward.index("ep_a2a_dispatch.bwd")
    assert backward[dispatch + 1 : dispatch + 3] == ["expert_fc2.wgrad", "expert_fc13.wgrad"]
    assert backward[-5:] == ["shared_fc2.wgrad", "shared_fc13.wgrad", "router.wgrad", "o_proj.wgrad", "qkv_proj.wgrad"]
    plain = work.task_ops(work.task_key(0, Task(BACKWARD, 0, 0)))
    assert sorted(op.name for op, lane in zip(ops, lanes) if lane == 1) == sorted(op.name for op in plain)
    assert pytest.approx(sum(op.flops for op in plain)) == sum(op.flops for op, lane in zip(ops, lanes) if lane == 1)
