"""SMs held by communication kernels (simulator.streams.sm_share): compute beside a collective runs on the rest.

The toy GPU has 100 SMs; a memory-bound op of 1e9 B takes 1 ms on the idle GPU (1e12 B/s, efficiency 1).
A communication kernel holding 25 SMs leaves 75: compute beside it progresses at 0.75 of its idle rate.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import simpy

from simulator.costs.calibration import Calibration
from simulator.costs.collective_efficiency import Link
from simulator.costs.kernels import comm_kernel_sms, deepep_efficiency
from simulator.streams.network import FluidNetwork
from simulator.streams.tasks import TaskTiming, run_task
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.ops import ALL_TO_ALL, COLLECTIVE, COMM, COMPUTE, FUSED, MEMORY, Gemm, Group, Op, Transport

GPU = toy_gpu(nvlink_bandwidth_Bps=1e9)
NCCL_25 = toy_calibration(all_to_all_efficiency=0.7, comm_sms_nccl=25, comm_sms_deepep=50)


def _mem(name: str, ms: float, deps: tuple[int, ...] = ()) -> Op:
    return Op(name, MEMORY, COMPUTE, deps, mem_bytes=ms * 1e9)


def _a2a(
    stream: str,
    deps: tuple[int, ...],
    nic_bytes: float = 0.0,
    comm_bytes: float = 1.4e6,
    transport: Transport = Transport.NCCL,
) -> Op:
    """By default 1.4 MB at all-to-all efficiency 0.7: 2 MB, 2 ms on the 1 GB/s NVLink (no latency)."""
    return Op("a2a", COLLECTIVE, stream, deps, collective=ALL_TO_ALL, group=Group.EP, group_size=8,
              comm_bytes=comm_bytes, nic_bytes=nic_bytes, transport=transport)  # fmt: skip


def _run(ops: list[Op], cal: Calibration = NCCL_25, lanes: tuple[int, ...] | None = None) -> TaskTiming:
    env = simpy.Environment()
    network = FluidNetwork(env, {"nvl": 1e9, "nic": 1e9})
    timing = TaskTiming()
    ops = tuple(ops)
    costs = costs_without_latency(ops, GPU, cal)
    run_task(env, ops, costs, network, ("nvl",), timing, lanes=lanes, nic_links=("nic",))
    env.run()
    return timing


def _spans(timing: TaskTiming) -> list[tuple[int, float, float]]:
    return [(index, round(begin * 1e3, 9), round(end * 1e3, 9)) for index, begin, end in sorted(timing.intervals)]


def test_compute_beside_an_nccl_collective_runs_on_the_other_sms() -> None:
    """pre 0-1 ms; the a2a 1-3 ms on the comm stream holds 25 SMs; wgrad (3 ms idle) starts at 1: 1.5 ms
    of its work done by 3 ms at rate 0.75, the other 1.5 ms at full rate, so it ends at 4.5; post 4.5-5.5."""
    ops = [_mem("pre", 1.0), _a2a(COMM, (0,)), _mem("wgrad", 3.0, (0,)), _mem("post", 1.0, (1, 2))]
    timing = _run(ops)
    assert _spans(timing) == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 1.0, 4.5), (3, 4.5, 5.5)]
    assert timing.duration_s == pytest.approx(5.5e-3, rel=1e-12)
    assert timing.exposed_comm_s == {Group.EP: 0.0}
    free = _run(ops, toy_calibration(all_to_all_efficiency=0.7))  # no SMs held: wgrad 1-4, post 4-5
    assert _spans(free) == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 1.0, 4.0), (3, 4.0, 5.0)]


def test_deepep_holds_its_own_sm_count() -> None:
    """A cross-node EP all-to-all of DeepEP's (NIC bytes: 1 MB, about 1 ms on the NIC beside 2 ms on NVLink: its
    NVLink bytes are sized for DeepEP's intranode efficiency): 50 SMs here, so wgrad runs at 0.5 from
    1 to 3 ms (1 ms of work), then 2 ms at full rate: it ends at 5."""
    nvlink_bytes = 2e6 * deepep_efficiency(Link.NVLINK)  # 2 ms at 1 GB/s
    a2a = _a2a(COMM, (0,), nic_bytes=1e6, comm_bytes=nvlink_bytes, transport=Transport.DEEPEP)
    ops = [_mem("pre", 1.0), a2a, _mem("wgrad", 3.0, (0,)), _mem("post", 1.0, (1, 2))]
    assert _spans(_run(ops)) == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 1.0, 5.0), (3, 5.0, 6.0)]


def test_the_jobs_sm_count_replaces_the_default() -> None:
    """The same cross-node DeepEP all-to-all (1-3 ms) launched on the SMs the job gives it (op.sms, Megatron's
    --moe-flex-dispatcher-num-sms): 75 of the 100 leave the wgrad beside it 0.25 of its rate, 0.5 ms of work by 3 ms,
    so it ends at 5.5 and post at 6.5, where the default 50 ends it at 5; 10 SMs leave 0.9: 1.8 ms by 3, end 4.2."""
    nvlink_bytes = 2e6 * deepep_efficiency(Link.NVLINK)

    def step(sms: int) -> list[tuple[int, float, float]]:
        a2a = replace(_a2a(COMM, (0,), nic_bytes=1e6, comm_bytes=nvlink_bytes, transport=Transport.DEEPEP), sms=sms)
        return _spans(_run([_mem("pre", 1.0), a2a, _mem("wgrad", 3.0, (0,)), _mem("post", 1.0, (1, 2))]))

    assert step(0) == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 1.0, 5.0), (3, 5.0, 6.0)]
    assert step(75) == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 1.0, 5.5), (3, 5.5, 6.5)]
    assert step(10) == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 1.0, 4.2), (3, 4.2, 5.2)]


def test_which_kernels_hold_sms() -> None:
    gemm = Gemm(128, 128, 128)
    in_node = _a2a(COMM, ())
    assert comm_kernel_sms(in_node, NCCL_25) == 25
    assert comm_kernel_sms(_a2a(COMM, (), nic_bytes=1.0, transport=Transport.DEEPEP), NCCL_25) == 50
    # DeepEP's intranode kernels hold their SMs too; NCCL's all-to-all across nodes holds NCCL's channels
    assert comm_kernel_sms(_a2a(COMM, (), transport=Transport.DEEPEP), NCCL_25) == 50
    assert comm_kernel_sms(_a2a(COMM, (), nic_bytes=1.0), NCCL_25) == 25
    tp = Op(
        "ag", COLLECTIVE, COMM, collective="all_gather", group=Group.TP, group_size=8, comm_bytes=1.0, nic_bytes=1.0
    )
    assert comm_kernel_sms(tp, NCCL_25) == 25  # NIC bytes outside EP (CP across nodes): NCCL
    fused = Op("gemm+ag", FUSED, COMPUTE, gemm=gemm, collective="all_gather", group=Group.TP, comm_bytes=1.0)
    assert comm_kernel_sms(fused, NCCL_25) == 0  # its tiles move inside the GEMM
    assert comm_kernel_sms(_mem("m", 1.0), NCCL_25) == 0


def test_a_serial_collective_slows_nothing() -> None:
    """On one stream nothing overlaps: pre 0-1, a2a 1-3, post 3-4, whatever SMs the a2a would hold."""
    ops = [_mem("pre", 1.0), _a2a(COMPUTE, (0,)), _mem("post", 1.0, (1,))]
    assert _spans(_run(ops)) == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 3.0, 4.0)]


def test_paired_lanes_share_sms() -> None:
    """An F&B pair: lane 0 computes 4 ms while lane 1's all-to-all (on its compute stream) runs 0-2 ms
    with 25 SMs: 1.5 ms of work by 2 ms, the other 2.5 at full rate, ending at 4.5 ms; lane 1's own
    compute (1 ms) takes the GPU's turn after lane 0's op, 4.5-5.5."""
    ops = [_mem("forward", 4.0), _a2a(COMPUTE, ()), _mem("backward", 1.0, (1,))]
    timing = _run(ops, lanes=(0, 1, 1))
    assert _spans(timing) == [(0, 0.0, 4.5), (1, 0.0, 2.0), (2, 4.5, 5.5)]
    assert timing.exposed_comm_s == {Group.EP: 0.0}


def test_the_rate_follows_every_start_and_end() -> None:
    """Lane 0 computes 6 ms (idle) while its comm stream's all-to-all A (2 MB on the wire) and lane 1's B
    (1 MB) share the 1 GB/s link from 0 ms, 0.5 GB/s each (max-min fair): B ends at 2 ms, A has 1 MB left
    alone at 1 GB/s and ends at 3 ms. 50 SMs held 0-2 ms (rate 0.5: 1 ms of work), 25 from 2 to 3 ms
    (0.75 ms), none after: the other 4.25 ms run at full rate, so the compute ends at 7.25 ms."""
    ops = [_mem("long", 6.0), _a2a(COMM, ()), _a2a(COMPUTE, (), comm_bytes=0.7e6)]
    timing = _run(ops, lanes=(0, 0, 1))
    assert _spans(timing) == [(0, 0.0, 7.25), (1, 0.0, 3.0), (2, 0.0, 2.0)]


def test_a_fused_gemm_beside_a_collective_is_slowed_not_exposed() -> None:
    """A fused GEMM + all-gather (its tiles' bytes: none here) starts with the comm stream's a2a (0-2 ms,
    25 SMs): its GEMM of c ms idle (c < 1.5) takes c / 0.75, and none of that counts as exposed TP."""
    fused = Op("gemm+ag", FUSED, COMPUTE, gemm=Gemm(128 * 100, 128, 16384), collective="all_gather",
               group=Group.TP, group_size=8)  # fmt: skip
    ops = [fused, _a2a(COMM, ())]
    c = costs_without_latency(tuple(ops), GPU, NCCL_25).compute_s[0]
    assert c < 1.5e-3
    timing = _run(ops)
    assert timing.intervals[0][2] == pytest.approx(c / 0.75, rel=1e-12)
    assert timing.exposed_comm_s[Group.TP] == pytest.approx(0.0, abs=1e-15)
    assert timing.compute_busy_s == pytest.approx(c / 0.75, rel=1e-12)
