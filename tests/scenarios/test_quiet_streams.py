"""A stream that runs alone on a task's own link times its ops as arithmetic (simulator.streams.tasks._Quiet).

While every other stream of the task waits for a signal from it (or is done) and no flow is on the link,
nothing can start a flow or hold SMs beside its ops, so it lays them out without events and lets time pass
only where it signals another stream. Toy GPU: 100 SMs, 1e12 B/s HBM (a memory op of 1e9 B takes 1 ms),
100 TFLOP/s at GEMM efficiency 1; one 1 GB/s NVLink; an NCCL kernel holds 25 of the 100 SMs.
"""

from __future__ import annotations

import pytest
import simpy

from simulator.streams import tasks
from simulator.streams.network import FluidNetwork
from simulator.streams.tasks import TaskTiming, run_task
from tests.engine_diff import assert_fast_path_exact_and_cheaper
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.graph.step import StepWorkload
from workloads.ops import ALL_TO_ALL, COLLECTIVE, COMM, COMPUTE, FUSED, MEMORY, Gemm, Group, Op
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

GPU = toy_gpu(nvlink_bandwidth_Bps=1e9)
CAL = toy_calibration(all_to_all_efficiency=0.7, comm_sms_nccl=25)
GEMM = Gemm(128 * 100, 128, 16384)  # 100 tiles on 100 SMs: 2 m n k / 100 TFLOP/s
GEMM_MS = 2 * 12800 * 128 * 16384 / 100e12 * 1e3  # 0.536870912 ms


@pytest.fixture(autouse=True)
def _event_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """These paths are the event path's: tasks run as simpy processes, not laid out as closed tasks
    (simulator/streams/closed_task.py, compared with them in tests/scenarios/test_closed_task.py)."""
    monkeypatch.setattr(tasks, "CLOSED", False)


def _mem(name: str, ms: float, deps: tuple[int, ...] = ()) -> Op:
    return Op(name, MEMORY, COMPUTE, deps, mem_bytes=ms * 1e9)


def _a2a(stream: str, deps: tuple[int, ...]) -> Op:
    """1.4 MB at all-to-all efficiency 0.7: 2 MB, 2 ms on the 1 GB/s link (no latency)."""
    return Op("a2a", COLLECTIVE, stream, deps, collective=ALL_TO_ALL, group=Group.EP, group_size=8, comm_bytes=1.4e6)


def _ops() -> tuple[Op, ...]:
    fused = Op("gemm+a2a", FUSED, COMPUTE, (2,), gemm=GEMM, collective=ALL_TO_ALL, group=Group.EP, group_size=8,
               comm_bytes=1.4e6)  # fmt: skip
    return (
        _mem("pre", 1.0),  # 0-1; the comm stream waits for it
        _a2a(COMM, (0,)),  # 1-3, 25 SMs held
        _mem("wgrad", 3.0, (0,)),  # 1-3 at 0.75 (1.5 ms of work), then 1.5 ms: ends 4.5
        fused,  # alone (the comm stream waits for it): 4.5 + max(GEMM, 2) + min(GEMM, 2) / 1 tile
        _a2a(COMM, (3,)),  # from the fused op's end, 2 ms
        _mem("post", 1.0, (3,)),  # beside the a2a: 1 ms of work at 0.75
        _mem("last", 1.0, (4, 5)),  # alone again (the comm stream is done)
    )


FUSED_END_MS = 4.5 + 2.0 + GEMM_MS  # _ops()'s fused op ends here


def expected_spans() -> list[tuple[int, float, float]]:
    """_ops()'s op intervals in ms, as its comments compute them."""
    fused_end = FUSED_END_MS
    return [
        (0, 0.0, 1.0),
        (1, 1.0, 3.0),
        (2, 1.0, 4.5),
        (3, 4.5, fused_end),
        (4, fused_end, fused_end + 2.0),
        (5, fused_end, fused_end + 1 / 0.75),
        (6, fused_end + 2.0, fused_end + 3.0),
    ]


def _run(ops: tuple[Op, ...]) -> tuple[TaskTiming, int]:
    env = simpy.Environment()
    network = FluidNetwork(env, {"nvl": 1e9})
    timing = TaskTiming()
    run_task(env, ops, costs_without_latency(ops, GPU, CAL), network, ("nvl",), timing)
    env.run()
    return timing, next(env._eid)


def test_a_stream_alone_times_its_ops_without_events(monkeypatch: pytest.MonkeyPatch) -> None:
    fused_end = FUSED_END_MS
    expected = expected_spans()
    quiet, quiet_events = _run(_ops())
    monkeypatch.setattr(tasks, "QUIET", False)
    stepped, stepped_events = _run(_ops())
    for timing in (quiet, stepped):
        spans = sorted(timing.intervals)
        assert [index for index, _, _ in spans] == [index for index, _, _ in expected]
        for (_, begin, end), (_, want_begin, want_end) in zip(spans, expected):
            assert (begin * 1e3, end * 1e3) == pytest.approx((want_begin, want_end), rel=1e-12, abs=1e-12)
        assert timing.duration_s == pytest.approx((fused_end + 3.0) * 1e-3, rel=1e-12)
        # exposed: the fused op's 2 ms of wire time beyond its GEMM, and the second a2a's 2 ms less the
        # 4/3 ms of "post" beside it; the first a2a hides behind wgrad
        assert timing.exposed_comm_s[Group.EP] == pytest.approx((2.0 + 2.0 - 4 / 3) * 1e-3, rel=1e-9)
        assert timing.slowed_gemm_s[3] == pytest.approx(GEMM_MS * 1e-3, rel=1e-12)
    assert quiet_events < stepped_events  # the fast path was taken


def _megascale() -> tuple[StepWorkload, int]:
    """deepseekmoe, PP 2 on 16 GPUs: MegaScale-MoE's comm stream beside fused SP / EP GEMMs."""
    layout = layout_preset("megascale-moe").with_(pp=2)
    return StepWorkload(model_preset("deepseekmoe"), layout, 16, 8, global_batch=8, seq_len=4096), 16


def _tp_overlap() -> tuple[StepWorkload, int]:
    """Megatron-LM's TP with TE userbuffers: bulk overlaps on the comm stream, ring exchanges fused."""
    layout = layout_preset("megatron-lm").with_(pp=2, tp_comm_overlap=True, recompute="none")
    return StepWorkload(model_preset("deepseekmoe"), layout, 16, 8, global_batch=8, seq_len=4096), 16


@pytest.mark.parametrize("case", [_megascale, _tp_overlap])
def test_quiet_streams_match_stepped_streams(monkeypatch: pytest.MonkeyPatch, case) -> None:
    assert_fast_path_exact_and_cheaper(monkeypatch, tasks, "QUIET", case)


def test_a_signal_is_an_event_only_while_someone_waits() -> None:
    """No SMs held, so compute is arithmetic: the compute stream lays out pre 0-1 and wgrad 1-4 at t = 0,
    before the comm stream starts (no one waits for pre yet: no event for it). The comm stream then finds
    pre done (ending at 1, ahead of now), runs its a2a 1-3 and ends it with no one waiting; post, which
    needs the a2a, waits until wgrad's end at 4, finds the a2a done, and runs 4-5."""
    ops = (_mem("pre", 1.0), _a2a(COMM, (0,)), _mem("wgrad", 3.0, (0,)), _mem("post", 1.0, (1, 2)))
    env = simpy.Environment()
    timing = TaskTiming()
    costs = costs_without_latency(ops, GPU, toy_calibration(all_to_all_efficiency=0.7))
    run_task(env, ops, costs, FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing)
    env.run()
    spans = [(index, round(begin * 1e3, 9), round(end * 1e3, 9)) for index, begin, end in sorted(timing.intervals)]
    assert spans == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 1.0, 4.0), (3, 4.0, 5.0)]
    assert timing.duration_s == pytest.approx(5e-3, rel=1e-12)


def _lanes(monkeypatch: pytest.MonkeyPatch, quiet: bool) -> tuple[TaskTiming, int]:
    """F&B lanes: lane 0 computes 2 + 1 + 1 ms; lane 1's 1 ms op (on its comm stream: a dependency across
    streams) needs lane 0's last, so it waits for its signal."""
    monkeypatch.setattr(tasks, "QUIET", quiet)
    ops = (_mem("a", 2.0), _mem("b", 1.0, (0,)), _mem("d", 1.0, (1,)), Op("c", MEMORY, COMM, (2,), mem_bytes=1e9))
    env = simpy.Environment()
    timing = TaskTiming()
    costs = costs_without_latency(ops, GPU, CAL)
    run_task(env, ops, costs, FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing, lanes=(0, 0, 0, 1))
    env.run()
    return timing, next(env._eid)


def test_lanes_lay_out_compute_while_the_other_lane_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """With lanes (the GPU's turns) only compute is laid out alone. At 0 lane 1 has not started yet, so a
    takes its turn and its timeout, 0-2; lane 1 then waits for d, so lane 0 lays out b 2-3 and d 3-4 in one
    timeout; c 4-5. The same stepped, in more events."""
    quiet, quiet_events = _lanes(monkeypatch, True)
    stepped, stepped_events = _lanes(monkeypatch, False)
    for timing in (quiet, stepped):
        spans = [(index, round(begin * 1e3, 9), round(end * 1e3, 9)) for index, begin, end in sorted(timing.intervals)]
        assert spans == [(0, 0.0, 2.0), (1, 2.0, 3.0), (2, 3.0, 4.0), (3, 4.0, 5.0)]
    assert quiet_events < stepped_events


def _cross_node() -> tuple[StepWorkload, int]:
    """deepseekmoe, PP 2 x VP 2 with EP overlap (F&B lanes), EP 16 over 2 nodes: NIC flows beside PP sends,
    so only compute is laid out alone."""
    layout = layout_preset("megascale-moe").with_(
        pp=2, ep=16, ep_overlap=True, schedule="interleaved", virtual_stages=2
    )
    return StepWorkload(model_preset("deepseekmoe"), layout, 32, 8, global_batch=16, seq_len=4096), 32


def test_quiet_compute_off_a_link_of_its_own_matches_stepped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_fast_path_exact_and_cheaper(monkeypatch, tasks, "QUIET", _cross_node)


def _nic_a2a(deps: tuple[int, ...]) -> Op:
    """_a2a's 2 ms on NVLink, and NIC bytes beside them (4 ms on _nic_run's NIC)."""
    return Op(
        "a2a-nic", COLLECTIVE, COMM, deps, collective=ALL_TO_ALL, group=Group.EP, group_size=8, comm_bytes=1.4e6,
        nic_bytes=1e6,
    )  # fmt: skip


def _nic_run(monkeypatch: pytest.MonkeyPatch, quiet: bool) -> tuple[TaskTiming, int]:
    """pre 0-1; the NVLink-only a2a 1-3 while the compute stream waits for the NIC a2a (so the comm stream runs
    alone); the NIC a2a 3-7 (its NIC half, 4 ms, outlasts its 2 ms on NVLink); post 7-8."""
    monkeypatch.setattr(tasks, "QUIET", quiet)
    ops = (_mem("pre", 1.0), _a2a(COMM, (0,)), _nic_a2a((1,)), _mem("post", 1.0, (2,)))
    env = simpy.Environment()
    nvlink, nic = FluidNetwork(env, {"nvl": 1e9}), None
    costs = costs_without_latency(ops, GPU, CAL)
    nic = FluidNetwork(env, {"nic": costs.nic_bytes[2] / 4e-3})
    timing = TaskTiming()
    run_task(env, ops, costs, nvlink, ("nvl",), timing, nic_links=("nic",), nic_network=nic)
    env.run()
    return timing, next(env._eid)


def test_a_nic_task_lays_out_its_nvlink_only_collectives_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    beside, beside_events = _nic_run(monkeypatch, True)
    stepped, stepped_events = _nic_run(monkeypatch, False)
    for timing in (beside, stepped):
        spans = [(index, round(begin * 1e3, 9), round(end * 1e3, 9)) for index, begin, end in sorted(timing.intervals)]
        assert spans == [(0, 0.0, 1.0), (1, 1.0, 3.0), (2, 3.0, 7.0), (3, 7.0, 8.0)]
    assert sorted(beside.intervals) == sorted(stepped.intervals)  # the same floats
    assert beside_events < stepped_events  # the NVLink-only a2a took no events


def _cross_node_1f1b() -> tuple[StepWorkload, int]:
    """deepseekmoe, PP 2, EP 16 over 2 nodes, no lanes: NIC tasks whose TP / SP collectives stay on NVLink."""
    layout = layout_preset("megascale-moe").with_(pp=2, ep=16)
    return StepWorkload(model_preset("deepseekmoe"), layout, 32, 8, global_batch=16, seq_len=4096), 32


def test_quiet_beside_nic_matches_stepped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_fast_path_exact_and_cheaper(monkeypatch, tasks, "QUIET", _cross_node_1f1b)
