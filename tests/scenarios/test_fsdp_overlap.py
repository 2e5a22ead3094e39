"""FSDP's per-unit all-gathers and reduce-scatters (workloads/graph/fsdp.py) run on the op-level executor against
hand-computed timelines.

Memory-bound ops stand for compute of known length (1e9 B at 1e12 B/s = 1 ms); the DP group sits in the node, so the
collectives move their bytes over the one 1 GB/s link with no latency: a unit of P parameters gathered in BF16 over
2 GPUs sends P x 2 B x 1/2 = P bytes, 1e6 parameters per ms.
"""

from __future__ import annotations

import pytest
import simpy

from simulator.streams.network import FluidNetwork
from simulator.streams.tasks import TaskTiming, run_task
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.graph.fsdp import FSDP_AG, FSDP_RS, UnitComm, with_unit_comm
from workloads.ops import COMPUTE, MEMORY, Op, Role

GPU = toy_gpu(nvlink_bandwidth_Bps=1e9)
CAL = toy_calibration()
IN_NODE = UnitComm(dense_dp=2, expert_dp=1, across_nodes=False, gather_bytes_per_param=2.0, scatter_bytes_per_param=0.0)


def _mem(name: str, ms: float, layer: int, role: Role = Role.FORWARD, deps: tuple[int, ...] = ()) -> Op:
    return Op(name, MEMORY, COMPUTE, deps, role, layer, mem_bytes=ms * 1e9)


def _run(ops: tuple[Op, ...]) -> tuple[TaskTiming, float, dict[str, tuple[float, float]]]:
    """(timing, end, each op's (start, end) by name and layer) of ``ops`` alone on the 1 GB/s link."""
    env = simpy.Environment()
    timing = TaskTiming()
    run_task(env, ops, costs_without_latency(ops, GPU, CAL), FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing)
    env.run()
    spans = {f"{ops[i].name}@{ops[i].layer}": [start * 1e3, end * 1e3] for i, start, end in timing.intervals}
    return timing, env.now * 1e3, spans


def _close(spans: list[list[float]], expected: list[list[float]]) -> bool:
    """Whether the (start, end) pairs in ms equal the hand-computed ones to a picosecond."""
    flat = [x for span in spans for x in span]
    return flat == pytest.approx([float(x) for span in expected for x in span], abs=1e-9)


def _forward(units: int, compute_ms: float) -> list[Op]:
    """An embedding of 0.5 ms (layer -1), then ``units`` layers of one ``compute_ms`` op each, chained."""
    ops = [_mem("embedding", 0.5, -1)]
    for layer in range(units):
        ops.append(_mem("layer", compute_ms, layer, deps=(len(ops) - 1,)))
    return ops


def test_later_gathers_hide_behind_the_previous_units_compute() -> None:
    """All-gathers of 1 ms (1e6 parameters), units of 2 ms. AG0 0-1 and AG1 1-2 start with the task (two buffers);
    unit 0 waits for AG0: 1-3 (the first gather has only the 0.5 ms embedding to hide behind). AG2 waits for unit 0
    to free its buffer: 3-4; unit 1 3-5, unit 2 5-7; AG3 after unit 1: 5-6; unit 3 7-9. Exposed: 0.5 ms."""
    ops = with_unit_comm(_forward(4, 2.0), {i: (1e6, 0.0) for i in range(4)}, IN_NODE, backward=False)
    assert [op.stream for op in ops].count(FSDP_AG) == 4
    timing, end, spans = _run(ops)
    gathers = [spans[f"fsdp.ag.dp@{i}"] for i in range(4)]
    layers = [spans[f"layer@{i}"] for i in range(4)]
    assert _close(gathers, [[0, 1], [1, 2], [3, 4], [5, 6]])
    assert _close(layers, [[1, 3], [3, 5], [5, 7], [7, 9]])
    assert end == pytest.approx(9.0, rel=1e-12)
    assert timing.exposed_comm_s["dp"] == pytest.approx(0.5e-3, rel=1e-9)


def test_gathers_longer_than_compute_are_exposed() -> None:
    """All-gathers of 3 ms, units of 2 ms: AG0 0-3, AG1 3-6 (the stream's order), unit 0 3-5; AG2 waits for AG1
    (6-9), unit 1 6-8, AG3 9-12 (after unit 1 and AG2), unit 2 9-11, unit 3 12-14. The gathers run 0-12 and the
    compute hides 0.5 + 3 x 2 ms of it: 5.5 ms exposed, 14 = 8.5 of compute + 5.5."""
    ops = with_unit_comm(_forward(4, 2.0), {i: (3e6, 0.0) for i in range(4)}, IN_NODE, backward=False)
    timing, end, spans = _run(ops)
    assert _close([spans[f"fsdp.ag.dp@{i}"] for i in range(4)], [[0, 3], [3, 6], [6, 9], [9, 12]])
    assert _close([spans[f"layer@{i}"] for i in range(4)], [[3, 5], [6, 8], [9, 11], [12, 14]])
    assert end == pytest.approx(14.0, rel=1e-12)
    assert timing.exposed_comm_s["dp"] == pytest.approx(5.5e-3, rel=1e-9)


def test_gradients_wait_for_the_reduce_scatter_two_units_back() -> None:
    """ZeRO-2's backward: a 0.5 ms head, then units 3..0 of a 1 ms dgrad and a 1 ms wgrad; reduce-scatters of 3 ms
    (FP32 gradients: 1.5e6 parameters x 4 B x 1/2). Unit 3 0.5-2.5, RS3 2.5-5.5; unit 2 2.5-4.5, RS2 5.5-8.5 (its
    stream's order); unit 1's dgrad 4.5-5.5 and its wgrad waits for RS3 (two gradient buffers): 5.5-6.5, RS1
    8.5-11.5; unit 0's dgrad 6.5-7.5, wgrad after RS2 8.5-9.5, RS0 11.5-14.5, the task's end."""
    ops = [_mem("head", 0.5, 4, Role.INPUT_GRAD)]
    for layer in (3, 2, 1, 0):
        ops.append(_mem("dgrad", 1.0, layer, Role.INPUT_GRAD, (len(ops) - 1,)))
        ops.append(_mem("wgrad", 1.0, layer, Role.WEIGHT_GRAD, (len(ops) - 2,)))
    comm = UnitComm(2, 1, False, gather_bytes_per_param=0.0, scatter_bytes_per_param=4.0)
    ops = with_unit_comm(ops, {i: (1.5e6, 0.0) for i in range(4)}, comm, backward=True)
    assert [op.stream for op in ops].count(FSDP_RS) == 4 and FSDP_AG not in {op.stream for op in ops}
    _, end, spans = _run(ops)
    scatters = [spans[f"fsdp.rs.dp@{i}"] for i in (3, 2, 1, 0)]
    assert _close(scatters, [[2.5, 5.5], [5.5, 8.5], [8.5, 11.5], [11.5, 14.5]])
    wgrads = [spans[f"wgrad@{i}"] for i in (3, 2, 1, 0)]
    assert _close(wgrads, [[1.5, 2.5], [3.5, 4.5], [5.5, 6.5], [8.5, 9.5]])
    assert end == pytest.approx(14.5, rel=1e-12)


def test_zero_3_gathers_again_before_backward_in_reverse_order() -> None:
    """ZeRO-3's backward gathers the units last first, two ahead: AG3 and AG2 at the start (after the head's
    issue), AG1 once unit 3's compute ends."""
    ops = [_mem("head", 0.5, 4, Role.INPUT_GRAD)]
    for layer in (3, 2, 1, 0):
        ops.append(_mem("dgrad", 1.0, layer, Role.INPUT_GRAD, (len(ops) - 1,)))
    comm = UnitComm(2, 1, False, gather_bytes_per_param=2.0, scatter_bytes_per_param=0.0)
    ops = with_unit_comm(ops, {i: (1e6, 0.0) for i in range(4)}, comm, backward=True)
    _, end, spans = _run(ops)
    # AG3 0-1, AG2 1-2; unit 3 1-2, unit 2 2-3; AG1 after unit 3 (2) 2-3, unit 1 3-4; AG0 after unit 2: 3-4, unit 0 4-5
    assert _close([spans[f"fsdp.ag.dp@{i}"] for i in (3, 2, 1, 0)], [[0, 1], [1, 2], [2, 3], [3, 4]])
    assert _close([spans[f"dgrad@{i}"] for i in (3, 2, 1, 0)], [[1, 2], [2, 3], [3, 4], [4, 5]])
    assert end == pytest.approx(5.0, rel=1e-12)
