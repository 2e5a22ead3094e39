"""Op-level execution of hand-built op lists (simulator.streams.tasks.run_task) with exact expected times.

Memory-bound ops are used as "compute" of known length: with a 1e12 B/s HBM, memory efficiency 1.0 and
no launch gap, an op of 1e9 B takes exactly 1 ms.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import simpy

from simulator.costs.calibration import Calibration
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.tasks import TaskTiming, run_task
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.ops import (
    ALL_GATHER,
    ALL_TO_ALL,
    COLLECTIVE,
    COMM,
    COMPUTE,
    FUSED,
    HOST_SYNC,
    MEMORY,
    Gemm,
    GraphPart,
    Op,
)

GPU = toy_gpu(nvlink_bandwidth_Bps=1e9)

CAL = toy_calibration(all_to_all_efficiency=0.7)

LINK_BPS = 1e9  # the one link every collective below uses


def _run(ops: list[Op], latency: bool = False, cal: Calibration = CAL) -> TaskTiming:
    """``ops`` alone on one link; collectives pay their latency (the toy GPU's 1 us per step) with ``latency``."""
    env = simpy.Environment()
    network = FluidNetwork(env, {"nvl": LINK_BPS})
    timing = TaskTiming()
    ops = tuple(ops)
    costs = OpCosts.of(ops, GPU, cal) if latency else costs_without_latency(ops, GPU, cal)
    run_task(env, ops, costs, network, ("nvl",), timing)
    env.run()
    return timing


def _mem(name: str, ms: float, deps: tuple[int, ...] = ()) -> Op:
    """A memory-bound op of ``ms`` milliseconds (ms * 1e9 bytes at 1e12 B/s)."""
    return Op(name, MEMORY, COMPUTE, deps, mem_bytes=ms * 1e9)


def test_ring_all_gather_among_8_gpus() -> None:
    """A ring all-gather of an S = 8 MB buffer among n = 8 GPUs: each sends S (n-1)/n = 7 MB.

    time = (n - 1) * step latency + bytes / capacity = 7 * 1 us + 7e6 / 1e9 = 7 us + 7 ms = 7.007 ms.
    On the compute stream it is fully exposed.
    """
    size, n = 8e6, 8
    op = Op("ag", COLLECTIVE, COMPUTE, collective=ALL_GATHER, group="tp", group_size=n, comm_bytes=size * (n - 1) / n)
    timing = _run([op], latency=True)
    assert timing.duration_s == pytest.approx(7.007e-3, rel=1e-12)
    assert timing.exposed_comm_s == pytest.approx({"tp": 7.007e-3}, rel=1e-12)
    assert timing.compute_busy_s == 0.0


def test_all_to_all_pays_its_efficiency() -> None:
    """An all-to-all among 8 sending 7 MB per GPU at all_to_all_efficiency 0.7 puts 7e6 / 0.7 = 10 MB
    on the wire; it sends to every peer at once, one step: 1 us + 10e6 / 1e9 = 10.001 ms."""
    op = Op("a2a", COLLECTIVE, COMPUTE, collective=ALL_TO_ALL, group="ep", group_size=8, comm_bytes=7e6)
    timing = _run([op], latency=True)
    assert timing.duration_s == pytest.approx(10.001e-3, rel=1e-12)
    assert timing.exposed_comm_s == pytest.approx({"ep": 10.001e-3}, rel=1e-12)


def _overlap_ops(wgrad_ms: float, comm_stream: str) -> list[Op]:
    """pre (1 ms) -> [comm (2 ms on the wire) || wgrad] -> post (1 ms), as inter-op overlap issues them.

    The all-to-all sends 1.4 MB at efficiency 0.7 -> 2 MB -> 2 ms on the 1 GB/s link (group of 8, no latency).
    """
    return [
        _mem("pre", 1.0),
        Op("a2a", COLLECTIVE, comm_stream, (0,), collective=ALL_TO_ALL, group="ep", group_size=8, comm_bytes=1.4e6),
        _mem("wgrad", wgrad_ms, (0,)),
        _mem("post", 1.0, (1, 2)),
    ]


def test_comm_hidden_behind_longer_compute() -> None:
    """Comm stream: a2a runs 1-3 ms, wgrad 1-4 ms on the compute stream; post waits for both, 4-5 ms.

    duration 5 ms; the a2a lies entirely inside compute-busy time -> 0 exposed; busy 1 + 3 + 1 = 5 ms.
    """
    timing = _run(_overlap_ops(3.0, COMM))
    assert timing.duration_s == pytest.approx(5e-3, rel=1e-12)
    assert timing.exposed_comm_s["ep"] == pytest.approx(0.0, abs=1e-15)
    assert timing.compute_busy_s == pytest.approx(5e-3, rel=1e-12)
    spans = {index: (begin, end) for index, begin, end in timing.intervals}
    assert spans[1] == pytest.approx((1e-3, 3e-3), rel=1e-12)
    assert spans[2] == pytest.approx((1e-3, 4e-3), rel=1e-12)
    assert spans[3] == pytest.approx((4e-3, 5e-3), rel=1e-12)


def test_comm_exposed_behind_shorter_compute() -> None:
    """wgrad only 1 ms: a2a 1-3 ms, wgrad 1-2 ms, post waits for the a2a: 3-4 ms.

    duration 4 ms; the a2a's 2 ms overlap 1 ms of compute (1-2) -> 1 ms exposed; busy 1 + 1 + 1 = 3 ms.
    """
    timing = _run(_overlap_ops(1.0, COMM))
    assert timing.duration_s == pytest.approx(4e-3, rel=1e-12)
    assert timing.exposed_comm_s["ep"] == pytest.approx(1e-3, rel=1e-12)
    assert timing.compute_busy_s == pytest.approx(3e-3, rel=1e-12)


def test_comm_on_compute_stream_serializes() -> None:
    """Without inter-op overlap the a2a sits on the compute stream in list order:
    pre 0-1, a2a 1-3, wgrad 3-6, post 6-7 -> 7 ms, all 2 ms of the a2a exposed."""
    timing = _run(_overlap_ops(3.0, COMPUTE))
    assert timing.duration_s == pytest.approx(7e-3, rel=1e-12)
    assert timing.exposed_comm_s["ep"] == pytest.approx(2e-3, rel=1e-12)
    assert timing.compute_busy_s == pytest.approx(5e-3, rel=1e-12)


def test_two_collectives_on_one_link_share_it() -> None:
    """Two independent 1 MB all-gathers on the comm stream run one after the other (stream order):
    1 ms each -> 2 ms; a compute op of 0.5 ms alongside hides 0.5 ms -> 1.5 ms exposed."""
    ops = [
        Op("ag1", COLLECTIVE, COMM, collective=ALL_GATHER, group="tp", group_size=8, comm_bytes=1e6),
        Op("ag2", COLLECTIVE, COMM, collective=ALL_GATHER, group="tp", group_size=8, comm_bytes=1e6),
        _mem("side", 0.5),
    ]
    timing = _run(ops)
    assert timing.duration_s == pytest.approx(2e-3, rel=1e-12)
    assert timing.exposed_comm_s["tp"] == pytest.approx(1.5e-3, rel=1e-12)


def test_fused_gemm_and_collective() -> None:
    """A GEMM of 100 tiles with k = 1000 (one wave: 2*128*128*1000 / 1e12 = 32.768 us) fused with an
    all-gather of 16,384 B (16.384 us at 1 GB/s), pipelined over 8 tiles, group of 8 at 1 us per step:

      max(32.768, 16.384) + min(32.768, 16.384) / 8 + 7 * 1 us = 32.768 + 2.048 + 7 = 41.816 us.
    Exposed = duration - GEMM time = 9.048 us; busy = the GEMM's 32.768 us.
    """
    op = Op(
        "fc+ag",
        FUSED,
        COMPUTE,
        gemm=Gemm(1280, 1280, 1000),
        collective=ALL_GATHER,
        group="tp",
        group_size=8,
        comm_bytes=16384,
        tiles=8,
    )
    timing = _run([op], latency=True)
    assert timing.duration_s == pytest.approx(41.816e-6, rel=1e-9)
    assert timing.exposed_comm_s["tp"] == pytest.approx(9.048e-6, rel=1e-9)
    assert timing.compute_busy_s == pytest.approx(32.768e-6, rel=1e-9)


def test_model_flops_summed() -> None:
    """model_flops of every op are added up (recomputation ops carry 0)."""
    ops = [Op("a", MEMORY, COMPUTE, model_flops=3.0), Op("b", MEMORY, COMPUTE, (0,), model_flops=4.0)]
    assert _run(ops).model_flops == 7.0


def test_host_launch_runs_ahead_of_the_gpu() -> None:
    """Host issue costs 10 us per kernel; the GPU starts an op only once it is issued.

    Two 1 ms ops: issued at 10 us and 20 us; op 0 runs 0.010-1.010 ms, op 1 (already issued) 1.010-2.010 ms.
    The host's lead hides the second launch: duration 2.010 ms.
    """
    ops = [_mem("a", 1.0), _mem("b", 1.0, (0,))]
    timing = _run(ops, cal=CAL.with_(host_launch_s=10e-6))
    assert timing.duration_s == pytest.approx(2.010e-3, rel=1e-12)


def test_host_sync_drains_the_host_lead() -> None:
    """[1 ms op, device-to-host sync (50 us), 1 ms op], 10 us host launch per kernel:

    host issues op 0 at 10 us and the sync at 20 us, then waits for the sync to finish on the GPU;
    GPU: op 0 0.010-1.010 ms, sync 1.010-1.060 ms; host resumes at 1.060 ms, issues op 2 at 1.070 ms;
    op 2 runs 1.070-2.070 ms -> duration 2.070 ms (the 10 us launch after the sync is exposed).
    """
    ops = [_mem("a", 1.0), Op("sync", HOST_SYNC, COMPUTE, (0,)), _mem("b", 1.0, (1,))]
    timing = _run(ops, cal=CAL.with_(host_launch_s=10e-6))
    assert timing.duration_s == pytest.approx(2.070e-3, rel=1e-12)


def _run_ahead(ops: list[Op], lead_s: float) -> TaskTiming:
    """``ops`` alone on one link with a 10 us host launch per kernel, the host ``lead_s`` ahead of the task's start."""
    env = simpy.Environment()
    timing = TaskTiming()
    costs = costs_without_latency(tuple(ops), GPU, CAL.with_(host_launch_s=10e-6)).ahead(lead_s)
    run_task(env, tuple(ops), costs, FluidNetwork(env, {"nvl": LINK_BPS}), ("nvl",), timing)
    env.run()
    return timing


def test_a_host_ahead_of_the_task_hides_its_launches_until_the_first_sync() -> None:
    """[1 ms op, device-to-host sync (50 us), 1 ms op], 10 us host launch per kernel (simulator/engine/host_lead.py).

    The op and the sync before the sync are issued 10 and 20 us after the host began the task. Begun 15 us before
    the task starts (lead 15 us), the host has issued op 0 already: op 0 runs 0-1.000 ms, the sync (issued at 5 us)
    1.000-1.050 ms; the host resumes at 1.050, issues op 2 at 1.060, which runs 1.060-2.060: 2.060 ms (2.070 with no
    lead, test_host_sync_drains_the_host_lead). Begun 30 us before, no launch before the sync is exposed either:
    2.060 ms. Begun 20 us after the task starts (lead -20 us): op 0 issued at 30 us, 0.030-1.030, the sync 1.030-1.080,
    op 2 1.090-2.090: 2.090 ms. What the sync is followed by is issued from its end whatever the lead."""
    ops = [_mem("a", 1.0), Op("sync", HOST_SYNC, COMPUTE, (0,)), _mem("b", 1.0, (1,))]
    costs = costs_without_latency(tuple(ops), GPU, CAL.with_(host_launch_s=10e-6))
    assert costs.host_ahead_s == pytest.approx(20e-6) and costs.has_host_sync
    assert costs.ahead(15e-6).issue_offset_s == pytest.approx((-5e-6, 5e-6, 10e-6))
    for lead_s, duration_s in ((15e-6, 2.060e-3), (30e-6, 2.060e-3), (-20e-6, 2.090e-3)):
        assert _run_ahead(ops, lead_s).duration_s == pytest.approx(duration_s, rel=1e-12), lead_s


def test_the_host_is_free_once_it_has_issued_what_follows_the_last_sync() -> None:
    """[1 ms op a, sync (50 us), 1 ms op b, sync (50 us), 1 ms ops c and d], 10 us host launch per kernel:
    the host issues a at 10 us and the first sync at 20 us, waits: a 0.010-1.010, sync 1.010-1.060; it issues b at
    1.070 and the second sync at 1.080, waits: b 1.070-2.070, sync 2.070-2.120; it issues c at 2.130 and d at 2.140,
    and is free for the next task at 2.140 ms (TaskTiming.host_free_s), while the GPU runs c 2.130-3.130 and d
    3.130-4.130: duration 4.130 ms. A task without a sync leaves host_free_s 0 (host_lead.host_end_s times it)."""
    ops = [
        _mem("a", 1.0),
        Op("sync", HOST_SYNC, COMPUTE, (0,)),
        _mem("b", 1.0, (1,)),
        Op("sync2", HOST_SYNC, COMPUTE, (2,)),
        _mem("c", 1.0, (3,)),
        _mem("d", 1.0, (4,)),
    ]
    cal = CAL.with_(host_launch_s=10e-6)
    costs = costs_without_latency(tuple(ops), GPU, cal)
    assert costs.last_host_sync == (3, pytest.approx(20e-6))
    timing = _run(ops, cal=cal)
    assert timing.duration_s == pytest.approx(4.130e-3, rel=1e-12)
    assert timing.host_free_s == pytest.approx(2.140e-3, rel=1e-12)
    assert _run([_mem("a", 1.0), _mem("b", 1.0, (0,))], cal=cal).host_free_s == 0.0


@pytest.mark.parametrize("closed", [True, False])
def test_the_host_is_free_after_the_last_sync_on_every_path(monkeypatch: pytest.MonkeyPatch, closed: bool) -> None:
    """Two streams (so the task is laid out as a closed task, or with CLOSED off on the event path): [1 ms op a,
    sync (50 us), 1 ms op b] on the compute stream and an all-to-all of 1 MB after b on the comm stream, 10 us host
    launch per kernel: a 0.010-1.010, sync 1.010-1.060, b issued at 1.070 (1.070-2.070), the all-to-all issued at
    1.080: the host is free at 1.080 ms on both paths."""
    from simulator.streams import tasks

    monkeypatch.setattr(tasks, "CLOSED", closed)
    ops = [
        _mem("a", 1.0),
        Op("sync", HOST_SYNC, COMPUTE, (0,)),
        _mem("b", 1.0, (1,)),
        Op("a2a", COLLECTIVE, COMM, (2,), collective=ALL_TO_ALL, group="ep", group_size=2, comm_bytes=1e6),
    ]
    timing = _run(ops, cal=CAL.with_(host_launch_s=10e-6))
    assert timing.host_free_s == pytest.approx(1.080e-3, rel=1e-12)


def test_the_lead_carries_only_where_the_host_does_not_wait() -> None:
    """host_lead.lead_s and host_end_s by hand: a task beginning at 1.000 ms after a task whose issuing ended at
    0.990 ms starts 10 us led (capped at its 20 us of launches before its first sync); a task with a host sync ends the
    lead's arithmetic (None: its run says when the host is free, TaskTiming.host_free_s); one without ends its
    issuing at begin - lead + its launches."""
    from simulator.engine.host_lead import host_end_s, lead_s

    with_sync = costs_without_latency(
        (_mem("a", 1.0), Op("sync", HOST_SYNC, COMPUTE, (0,)), _mem("b", 1.0, (1,))),
        GPU,
        CAL.with_(host_launch_s=10e-6),
    )
    plain = costs_without_latency((_mem("a", 1.0), _mem("b", 1.0, (0,))), GPU, CAL.with_(host_launch_s=10e-6))
    assert lead_s(1.000e-3, None, plain) == 0.0
    assert lead_s(1.000e-3, 0.990e-3, plain) == pytest.approx(10e-6)
    assert lead_s(1.000e-3, 0.500e-3, plain) == pytest.approx(20e-6)  # capped: more changes nothing
    assert lead_s(1.000e-3, 1.015e-3, plain) == pytest.approx(-15e-6)  # the host is behind
    assert host_end_s(1.000e-3, 10e-6, plain) == pytest.approx(1.010e-3)
    assert host_end_s(1.000e-3, 10e-6, with_sync) is None


def _after_a_sync(graph: GraphPart) -> list[Op]:
    """[1 ms op, device-to-host sync (50 us), three 5 us kernels, 1 ms op]; the last four in ``graph``."""
    small = [replace(_mem(f"k{i}", 0.005, (1 + i,)), graph=graph) for i in range(3)]
    return [_mem("a", 1.0), Op("sync", HOST_SYNC, COMPUTE, (0,)), *small, replace(_mem("b", 1.0, (4,)), graph=graph)]


def test_the_stall_after_a_sync_grows_with_the_kernels_that_follow_it() -> None:
    """Eager, 10 us host launch per kernel: the host issues op 0 at 10 us and the sync at 20 us, then waits; the
    GPU runs op 0 0.010-1.010 ms and the sync 1.010-1.060 ms. The host resumes at 1.060 ms and issues k0, k1, k2
    and b at 1.070, 1.080, 1.090 and 1.100 ms; each small kernel runs 5 us from its issue (k0 1.070-1.075,
    k1 1.080-1.085, k2 1.090-1.095), b 1.100-2.100 ms: duration 2.100 ms, 30 us more than with no kernel between
    the sync and b (2.070 ms, test_host_sync_drains_the_host_lead): each launch after the sync is exposed."""
    timing = _run(_after_a_sync(GraphPart.NONE), cal=CAL.with_(host_launch_s=10e-6))
    assert timing.duration_s == pytest.approx(2.100e-3, rel=1e-12)


def test_a_cuda_graph_after_the_sync_costs_one_launch() -> None:
    """The same ops, the four after the sync captured in one CUDA graph (workloads/specs/cuda_graphs.py): the host
    replays the graph with one launch, at 1.070 ms, and every captured kernel is issued then; the GPU runs them
    back to back: k0 1.070-1.075, k1 1.075-1.080, k2 1.080-1.085, b 1.085-2.085 ms: duration 2.085 ms, the 15 us
    of the small kernels themselves and one launch, whatever the kernels in the graph."""
    timing = _run(_after_a_sync(GraphPart.ATTN), cal=CAL.with_(host_launch_s=10e-6))
    assert timing.duration_s == pytest.approx(2.085e-3, rel=1e-12)


@pytest.mark.parametrize("layout_name", ["megatron-lm", "megascale-moe", "tp-tp"])
def test_single_stream_fast_path_equals_event_path(layout_name: str) -> None:
    """Single-stream tasks are timed arithmetically; passing an explicit transfer forces the event path,
    which must give the same op intervals (to rounding) and the same exposed communication."""
    from simulator.costs.calibration import DEFAULT_CALIBRATION
    from topologies.hardware import gpu_preset
    from workloads.graph.step import StepWorkload
    from workloads.schedules.base import BACKWARD, FORWARD, Task
    from workloads.specs.layouts import layout_preset
    from workloads.specs.models import model_preset

    gpu = gpu_preset("h800")
    workload = StepWorkload(model_preset("mixtral-8x7b"), layout_preset(layout_name).with_(pp=4), 64, 8, 8, 2048)
    compared = 0
    for key in (workload.task_key(1, Task(FORWARD, 0, 0)), workload.task_key(1, Task(BACKWARD, 0, 0))):
        ops = workload.task_ops(key)
        costs = OpCosts.of(ops, gpu, DEFAULT_CALIBRATION)
        if len(costs.streams) != 1:
            continue  # only single-stream tasks take the fast path
        timings = []
        for forced in (False, True):
            env = simpy.Environment()
            network = FluidNetwork(env, {"nvl": gpu.nvlink_bandwidth_Bps})
            timing = TaskTiming()
            transfer = (lambda _i, nbytes, net=network: net.transfer(("nvl",), nbytes)) if forced else None
            run_task(env, ops, costs, network, ("nvl",), timing, transfer)
            env.run()
            timings.append(timing)
        fast, slow = timings
        assert fast.duration_s == pytest.approx(slow.duration_s, rel=1e-12)
        for (i, b1, e1), (j, b2, e2) in zip(sorted(fast.intervals), sorted(slow.intervals)):
            assert i == j and b1 == pytest.approx(b2, rel=1e-12, abs=1e-15) and e1 == pytest.approx(e2, rel=1e-12)
        assert fast.exposed_comm_s == pytest.approx(slow.exposed_comm_s, rel=1e-9)
        compared += 1
    assert compared >= 1  # megascale-moe's forward and both megatron-lm / tp-tp tasks are single-stream
