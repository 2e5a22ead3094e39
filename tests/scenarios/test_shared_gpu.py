"""Kernels on two streams share one GPU (OpCosts.shared_gpu, simulator/streams/tasks.py): Megatron-Core's combined
1F1B runs the combine node's unpermute on the communication stream, beside the other micro-batch's compute.

Each compute kernel takes the GPU's SMs in turn, first come first served; a communication kernel is admitted in
the same queue (launched while a compute kernel holds the SMs, it starts when that kernel ends: "pushed to the
end of the GEMM kernel"), then holds its SMs while the compute after it runs on the rest.

Toy GPU: 100 SMs; a memory-bound op of 1e9 B takes 1 ms on the idle GPU (1e12 B/s, efficiency 1). The all-to-all
sends 1.4 MB at efficiency 0.7 on the 1 GB/s NVLink: 2 ms, no latency, holding 20 SMs: compute beside it runs at
0.8 of its idle rate.
"""

from __future__ import annotations

import simpy

from simulator.streams import tasks
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.tasks import TaskTiming, run_task
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.graph.combined_1f1b import EP_COMM
from workloads.ops import ALL_TO_ALL, COLLECTIVE, COMPUTE, MEMORY, Group, Op

GPU = toy_gpu(nvlink_bandwidth_Bps=1e9)
CAL = toy_calibration(all_to_all_efficiency=0.7, comm_sms_nccl=20)


def _mem(name: str, stream: str, ms: float, deps: tuple[int, ...] = ()) -> Op:
    return Op(name, MEMORY, stream, deps, mem_bytes=ms * 1e9)


def _a2a(deps: tuple[int, ...]) -> Op:
    return Op("a2a", COLLECTIVE, EP_COMM, deps, collective=ALL_TO_ALL, group=Group.EP, group_size=8, comm_bytes=1.4e6)


# Program order: the compute stream's A (2 ms), the comm stream's U (1 ms) and its all-to-all after U, then the
# compute stream's B (1 ms, after A) and D (1 ms, after B).
OPS = (
    _mem("A", COMPUTE, 2.0),
    _mem("U", EP_COMM, 1.0),
    _a2a((1,)),
    _mem("B", COMPUTE, 1.0, (0,)),
    _mem("D", COMPUTE, 1.0, (3,)),
)


def _run(ops: tuple[Op, ...]) -> tuple[float, list[tuple[str, float, float]]]:
    env = simpy.Environment()
    timing = TaskTiming()
    run_task(env, ops, costs_without_latency(ops, GPU, CAL), FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing)
    env.run()
    spans = sorted(timing.intervals, key=lambda t: (t[1], t[0]))
    return round(timing.duration_s * 1e3, 9), [(ops[i].name, round(b * 1e3, 9), round(e * 1e3, 9)) for i, b, e in spans]


def test_kernels_of_two_streams_take_turns_and_the_all_to_all_waits_for_the_sms() -> None:
    """A (compute stream, first in program order) takes the GPU at 0 and U waits for it: A 0-2, U 2-3. B is ready
    at 2 (A's end) and asks for the GPU before the all-to-all (ready at 3, U's end): B 3-4, and the all-to-all,
    launched while B holds the SMs, starts at B's end: 4-6, holding 20 SMs. D asks at 4, after it, and runs on the
    80 SMs left: 1 ms of work in 1.25 ms, 4-5.25. The task ends with the all-to-all at 6 ms."""
    assert _run(OPS) == (
        6.0,
        [("A", 0.0, 2.0), ("U", 2.0, 3.0), ("B", 3.0, 4.0), ("a2a", 4.0, 6.0), ("D", 4.0, 5.25)],
    )


def test_the_closed_layout_switch_changes_nothing() -> None:
    """Such a task always takes the event path (the closed layout has no turns): the same timeline either way."""
    before = tasks.CLOSED
    try:
        tasks.CLOSED = False
        unclosed = _run(OPS)
    finally:
        tasks.CLOSED = before
    assert unclosed == _run(OPS)


def test_only_kernels_beside_compute_make_the_gpu_shared() -> None:
    """Two streams whose second runs collectives only (TE's bulk overlaps, a DP reduce-scatter) keep the old rule:
    the collective starts beside compute at once. Kernels other than collectives on both streams share the GPU."""
    comm_only = (_mem("A", COMPUTE, 2.0), _a2a(()), _mem("B", COMPUTE, 1.0, (0,)))
    assert not OpCosts.of(comm_only, GPU, CAL).shared_gpu
    assert OpCosts.of(OPS, GPU, CAL).shared_gpu
    # the all-to-all starts at 0 beside A, which does 1.6 ms of its work on 80 SMs by 2 and the last 0.4 ms on all
    # of them: A 0-2.4, B 2.4-3.4
    assert _run(comm_only) == (3.4, [("A", 0.0, 2.4), ("a2a", 0.0, 2.0), ("B", 2.4, 3.4)])
