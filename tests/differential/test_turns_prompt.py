"""GPU turns granted when decided (simulator.streams.turns.PROMPT) against simpy.Resource's event steps (PROMPT off),
and a cross-node collective's NVLink and NIC halves waited for in turn (simulator.streams.tasks.both) against a join.

Who holds the GPU is decided by the same call either way (the first waiter, at a request or a release);
PROMPT only lets the holder resume at once instead of one event step later in the same instant.
Toy GPU: 1e12 B/s HBM, a memory op of 1e9 B takes 1 ms; one 1 GB/s link.
"""

from __future__ import annotations

import pytest
import simpy

from simulator.streams import tasks
from simulator.streams import turns
from simulator.costs.collective_efficiency import Link
from simulator.costs.kernels import deepep_efficiency
from simulator.streams.network import FluidNetwork
from simulator.streams.tasks import TaskTiming, run_task
from simulator.streams.turns import GRANTED, Turns
from tests.engine_diff import assert_fast_path_exact_and_cheaper
from tests.toys import costs_without_latency, toy_calibration, toy_gpu
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset
from workloads.ops import ALL_TO_ALL, COLLECTIVE, COMPUTE, MEMORY, Group, Op
from workloads.graph.step import StepWorkload


def test_a_free_turn_is_held_at_once_and_passes_on_release_in_request_order() -> None:
    env = simpy.Environment()
    gpu = Turns(env)
    assert gpu.request() is GRANTED  # free, no one waiting: held now, no event
    second, third = gpu.request(), gpu.request()
    assert not second.triggered and not third.triggered
    gpu.release()  # the first waiter holds it now
    assert second.triggered and not third.triggered
    gpu.release()
    assert third.triggered
    gpu.release()
    assert gpu.request() is GRANTED


def _lanes(monkeypatch: pytest.MonkeyPatch, prompt: bool) -> tuple[TaskTiming, int]:
    """Two lanes of two compute ops each (lane 0: 2 + 1 ms, lane 1: 1 + 1 ms), taking turns on one GPU."""
    monkeypatch.setattr(turns, "PROMPT", prompt)
    ms = (2.0, 1.0, 1.0, 1.0)
    ops = tuple(Op(f"op{i}", MEMORY, COMPUTE, (i - 1,) if i % 2 else (), mem_bytes=t * 1e9) for i, t in enumerate(ms))
    env = simpy.Environment()
    timing = TaskTiming()
    costs = costs_without_latency(ops, toy_gpu(), toy_calibration())
    run_task(env, ops, costs, FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing, lanes=(0, 0, 1, 1))
    env.run()
    return timing, next(env._eid)


def test_lanes_take_turns_first_come_first_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lane 0 asks first and holds the GPU 0-2 ms; lane 1 asked at 0 and runs 2-3; lane 0's second op asked
    at 2, behind it: 3-4; lane 1's second op 4-5. The same with simpy.Resource's steps, in fewer events."""
    prompt, prompt_events = _lanes(monkeypatch, True)
    stepped, stepped_events = _lanes(monkeypatch, False)
    expected = [(0, 0.0, 2.0), (1, 3.0, 4.0), (2, 2.0, 3.0), (3, 4.0, 5.0)]
    for timing in (prompt, stepped):
        spans = [(index, round(begin * 1e3, 9), round(end * 1e3, 9)) for index, begin, end in sorted(timing.intervals)]
        assert spans == expected
        assert timing.duration_s == pytest.approx(5e-3, rel=1e-12)
    assert prompt_events < stepped_events


def _cross_node_overlap() -> tuple[StepWorkload, int]:
    """deepseekmoe on DualPipe (F&B lanes), PP 2, EP 16 over 2 nodes: op level, NIC shared. (Megatron-Core's EP
    overlap is one op list on two streams, no lanes: workloads/graph/combined_1f1b.py.)"""
    layout = layout_preset("megascale-moe").with_(pp=2, ep=16, schedule="dualpipe")
    return StepWorkload(model_preset("deepseekmoe"), layout, 32, 8, global_batch=16, seq_len=4096), 32


def _dualpipe() -> tuple[StepWorkload, int]:
    """deepseekmoe on DualPipe, PP 4 on 32 GPUs with EP 8 in the node: F&B lanes beside DualPipe's chunks."""
    layout = layout_preset("megascale-moe").with_(pp=4, ep=8, schedule="dualpipe")
    return StepWorkload(model_preset("deepseekmoe"), layout, 32, 8, global_batch=16, seq_len=4096), 32


@pytest.mark.parametrize("case", [_cross_node_overlap, _dualpipe])
def test_prompt_turns_match_resource_steps(monkeypatch: pytest.MonkeyPatch, case) -> None:
    assert_fast_path_exact_and_cheaper(monkeypatch, turns, "PROMPT", case)


def _cross_node_a2a(monkeypatch: pytest.MonkeyPatch, join: bool) -> tuple[TaskTiming, int]:
    """A DeepEP all-to-all whose NVLink half takes 2 ms (1 GB/s) and NIC half about 1 ms, then 1 ms of compute.
    ``join``: wait for the halves through ``first & second`` (a Condition), not one after the other."""
    if join:
        monkeypatch.setattr(tasks, "both", lambda env, first, second: first & second)
    nvlink_bytes = 2e6 * deepep_efficiency(Link.NVLINK)
    a2a = Op("a2a", COLLECTIVE, COMPUTE, collective=ALL_TO_ALL, group=Group.EP, group_size=8,
             comm_bytes=nvlink_bytes, nic_bytes=1e6)  # fmt: skip
    ops = (a2a, Op("post", MEMORY, COMPUTE, (0,), mem_bytes=1e9))
    env = simpy.Environment()
    timing = TaskTiming()
    costs = costs_without_latency(ops, toy_gpu(nvlink_bandwidth_Bps=1e9), toy_calibration())
    network = FluidNetwork(env, {"nvl": 1e9, "nic": 1e9})
    run_task(env, ops, costs, network, ("nvl",), timing, nic_links=("nic",))
    env.run()
    return timing, next(env._eid)


def test_a_cross_node_collective_resumes_when_its_later_half_lands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The a2a ends when its NVLink half does, at 2 ms; post 2-3 ms. Yielding the halves in turn skips the
    joined event's step."""
    pair, pair_events = _cross_node_a2a(monkeypatch, False)
    joined, joined_events = _cross_node_a2a(monkeypatch, True)
    for timing in (pair, joined):
        spans = [(index, round(begin * 1e3, 9), round(end * 1e3, 9)) for index, begin, end in sorted(timing.intervals)]
        assert spans == [(0, 0.0, 2.0), (1, 2.0, 3.0)]
    assert pair_events < joined_events
