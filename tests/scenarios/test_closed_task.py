"""A task that shares nothing with the rest of the step is laid out at its start (simulator/streams/closed_task.py).

Hand-computed timelines on the toy GPU of tests/scenarios/test_quiet_streams.py (100 SMs, a memory op of 1e9 B takes
1 ms, an NCCL kernel holds 25 SMs, one 1 GB/s NVLink), and steps with the layout on and off
(``tasks.CLOSED``): the same floats, far fewer simpy events.
"""

from __future__ import annotations

import pytest
import simpy

from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.streams import op_costs, tasks
from simulator.streams.network import FluidNetwork
from simulator.streams.task_summary import summarize
from simulator.streams.tasks import TaskTiming, run_task
from tests.engine_diff import assert_fast_path_exact_and_cheaper, assert_steps_match
from tests.scenarios.test_quiet_streams import (
    CAL,
    FUSED_END_MS,
    GEMM,
    GEMM_MS,
    GPU,
    _a2a,
    _megascale,
    _mem,
    _ops,
    _tp_overlap,
    expected_spans,
)
from tests.toys import costs_without_latency, toy_calibration
from tests.unit.test_faults import TINY, _unfolded_case
from workloads.ops import ALL_TO_ALL, COMM, COMPUTE, FUSED, Group, Op


def _run(ops: tuple[Op, ...], closed: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[TaskTiming, int]:
    monkeypatch.setattr(tasks, "CLOSED", closed)
    env = simpy.Environment()
    network = FluidNetwork(env, {"nvl": 1e9})
    timing = TaskTiming()
    run_task(env, ops, costs_without_latency(ops, GPU, CAL), network, ("nvl",), timing)
    env.run()
    assert network.bytes_sent["nvl"] == pytest.approx(2e6 * sum(op.is_comm for op in ops), rel=1e-12)
    return timing, next(env._eid)


def _assert_spans(timing: TaskTiming, expected: list[tuple[int, float, float]]) -> None:
    """The task's op intervals, in ms, are ``expected``."""
    spans = sorted(timing.intervals)
    assert [index for index, _, _ in spans] == [index for index, _, _ in expected]
    for (_, begin, end), (_, want_begin, want_end) in zip(spans, expected):
        assert (begin * 1e3, end * 1e3) == pytest.approx((want_begin, want_end), rel=1e-12, abs=1e-12)


def test_quiet_streams_timeline_laid_out_at_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/scenarios/test_quiet_streams.py's task (a2a beside wgrad, a fused op alone, an a2a beside post): the same
    hand-computed times, in one timeout instead of an event per op."""
    fused_end = FUSED_END_MS
    expected = expected_spans()
    closed, closed_events = _run(_ops(), True, monkeypatch)
    stepped, stepped_events = _run(_ops(), False, monkeypatch)
    for timing in (closed, stepped):
        _assert_spans(timing, expected)
        assert timing.duration_s == pytest.approx((fused_end + 3.0) * 1e-3, rel=1e-12)
        assert timing.exposed_comm_s[Group.EP] == pytest.approx((2.0 + 2.0 - 4 / 3) * 1e-3, rel=1e-9)
        assert timing.slowed_gemm_s[3] == pytest.approx(GEMM_MS * 1e-3, rel=1e-12)
    assert closed_events == 1 < stepped_events  # laid out at its start: one timeout to its end


def _shared_link() -> tuple[Op, ...]:
    """After pre (0-1 ms), an a2a on the comm stream and a fused op on the compute stream both start at 1:
    two 2 MB flows on the 1 GB/s link at 0.5 GB/s each, both landing at 5; the a2a holds 25 SMs until
    then, so the fused GEMM runs at 0.75 (GEMM_MS / 0.75 from 1). The fused op ends at 5 + its tail
    min(GEMM_MS / 0.75, 4) / 1 tile; post, which needs both, runs 1 ms on the whole GPU after it."""
    fused = Op("gemm+a2a", FUSED, COMPUTE, (0,), gemm=GEMM, collective=ALL_TO_ALL, group=Group.EP, group_size=8,
               comm_bytes=1.4e6)  # fmt: skip
    return (_mem("pre", 1.0), _a2a(COMM, (0,)), fused, _mem("post", 1.0, (1, 2)))


def test_two_flows_share_the_link_and_the_gemm_runs_on_the_sms_left(monkeypatch: pytest.MonkeyPatch) -> None:
    gemm = GEMM_MS / 0.75
    expected = [(0, 0.0, 1.0), (1, 1.0, 5.0), (2, 1.0, 5.0 + gemm), (3, 5.0 + gemm, 6.0 + gemm)]
    closed, closed_events = _run(_shared_link(), True, monkeypatch)
    stepped, stepped_events = _run(_shared_link(), False, monkeypatch)
    for timing in (closed, stepped):
        _assert_spans(timing, expected)
        assert timing.slowed_gemm_s[2] == pytest.approx(gemm * 1e-3, rel=1e-12)
        # the fused op's 4 ms beyond its GEMM; the a2a's 4 ms less the GEMM beside it
        assert timing.exposed_comm_s[Group.EP] == pytest.approx((4.0 + 4.0 - gemm) * 1e-3, rel=1e-9)
        assert timing.compute_busy_s == pytest.approx((2.0 + gemm) * 1e-3, rel=1e-12)
    assert closed_events == 1 < stepped_events


@pytest.mark.parametrize("case", [_megascale, _tp_overlap])
def test_closed_tasks_match_the_event_path(monkeypatch: pytest.MonkeyPatch, case) -> None:
    """MegaScale-MoE's comm stream beside fused SP / EP GEMMs; Megatron-LM's TP comm overlap."""
    assert_fast_path_exact_and_cheaper(monkeypatch, tasks, "CLOSED", case)


@pytest.mark.parametrize(
    "faults", [Faults(stragglers=[(5, 1.5)]), Faults(degraded=[("nvlink", 5, 2.0), ("nic", 4, 3.0)])], ids=str
)
def test_closed_tasks_match_the_event_path_with_faults(monkeypatch: pytest.MonkeyPatch, faults: Faults) -> None:
    """A slowed stage's compute and NVLink reach its closed tasks through their costs and its link."""
    workload, cluster = _unfolded_case(TINY, 16, 4, 4)

    def run():
        engine = Engine(workload, cluster, memoize=False, faults=faults)
        return engine.run(), next(engine.env._eid)

    closed, closed_events = run()
    monkeypatch.setattr(tasks, "CLOSED", False)
    stepped, stepped_events = run()
    assert closed_events < stepped_events
    assert_steps_match(closed, stepped)


def _single_stream() -> tuple[Op, ...]:
    """The compute stream of _shared_link with its a2a moved onto it: one stream, laid out alone."""
    pre, a2a, fused, post = _shared_link()
    return (pre, Op("a2a", a2a.kind, COMPUTE, (0,), collective=ALL_TO_ALL, group=Group.EP, group_size=8,
                    comm_bytes=1.4e6), fused, post)  # fmt: skip


@pytest.mark.parametrize("make", [_ops, _shared_link, _single_stream])
def test_tallied_as_laid_out_equals_summarized(monkeypatch: pytest.MonkeyPatch, make) -> None:
    """A task laid out at its start sums its ops as it lays them out (simulator.streams.task_summary.Tally); summing its
    recorded intervals afterwards, as the event path does, gives the same busy and exposed times."""
    ops = make()
    laid_out, _ = _run(ops, True, monkeypatch)
    again = TaskTiming(intervals=list(laid_out.intervals), slowed_gemm_s=dict(laid_out.slowed_gemm_s))
    summarize(ops, costs_without_latency(ops, GPU, CAL), again, 0.0, laid_out.duration_s)
    assert laid_out.compute_busy_s == pytest.approx(again.compute_busy_s, rel=1e-12)
    assert laid_out.exposed_comm_s == pytest.approx(again.exposed_comm_s, rel=1e-12)
    assert laid_out.model_flops == again.model_flops


def test_issue_times_bind_until_the_stream_is_behind_the_host() -> None:
    """A 1 ms op then two of 1 us, each kernel issued 0.1 ms after the one before (host_launch_s): the first
    waits for its issue at 0.1 ms; by its end at 1.1 ms the host has issued the others (at 0.2 and 0.3 ms),
    which are timed without their issue check (OpCosts.alone_steps' _ISSUED) and run back to back."""
    ops = (_mem("a", 1.0), _mem("b", 1e-3, (0,)), _mem("c", 1e-3, (1,)))
    costs = costs_without_latency(ops, GPU, toy_calibration(host_launch_s=1e-4))
    assert [row[1] for row in costs.alone_steps(1e9, True)] == [-1, op_costs._ISSUED, op_costs._ISSUED]
    env = simpy.Environment()
    timing = TaskTiming()
    run_task(env, ops, costs, FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing)
    env.run()
    _assert_spans(timing, [(0, 0.1, 1.1), (1, 1.1, 1.101), (2, 1.101, 1.102)])
    assert timing.compute_busy_s == pytest.approx(1.002e-3, rel=1e-12)
