"""Op intervals are recorded only where someone reads them (simulator.engine.timer.OpTimer, probes.reads_tasks).

A task laid out at its start (one stream, or closed: simulator/streams/closed_task.py) sums its ops as it lays them
out, so with ``TaskTiming(intervals=None)`` it records none and sums to the same floats; the event path sums
its recorded intervals at the task's end, so it records them whatever it is given. An op-level step records
them only when a probe is told of tasks: its StageLogs are the same either way. Toy GPU and ops of
tests/scenarios/test_quiet_streams.py (a memory op of 1e9 B takes 1 ms; a 1.4 MB all-to-all takes 2 ms on the 1 GB/s link).
"""

from __future__ import annotations

import pytest
import simpy

from simulator.engine.engine import Engine
from simulator.engine.probes import Probe, TransferLog, reads_tasks
from simulator.streams import tasks
from simulator.streams.network import FluidNetwork
from simulator.streams.tasks import TaskTiming, run_task
from tests.engine_diff import assert_steps_match
from tests.scenarios.test_closed_task import _shared_link, _single_stream
from tests.scenarios.test_quiet_streams import CAL, GPU, _megascale, _ops
from tests.toys import costs_without_latency
from tests.unit.test_bench import _OpsSeen
from topologies.cluster import cluster_preset
from workloads.ops import Op


def _run(ops: tuple[Op, ...], record: bool) -> TaskTiming:
    env = simpy.Environment()
    timing = TaskTiming() if record else TaskTiming(intervals=None)
    run_task(env, ops, costs_without_latency(ops, GPU, CAL), FluidNetwork(env, {"nvl": 1e9}), ("nvl",), timing)
    env.run()
    return timing


@pytest.mark.parametrize("make", [_ops, _shared_link, _single_stream])
def test_a_task_laid_out_at_its_start_records_no_intervals_and_sums_the_same(make) -> None:
    recorded, unrecorded = _run(make(), True), _run(make(), False)
    assert unrecorded.intervals is None
    assert len(recorded.intervals) == len(make())
    assert unrecorded.duration_s == recorded.duration_s
    assert unrecorded.compute_busy_s == recorded.compute_busy_s
    assert unrecorded.exposed_comm_s == recorded.exposed_comm_s
    assert unrecorded.slowed_gemm_s == recorded.slowed_gemm_s


def test_the_event_path_records_its_intervals_to_sum_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/scenarios/test_quiet_streams.py's task as simpy processes: its seven ops' intervals are recorded (and summed)."""
    monkeypatch.setattr(tasks, "CLOSED", False)
    recorded, unrecorded = _run(_ops(), True), _run(_ops(), False)
    assert sorted(unrecorded.intervals) == sorted(recorded.intervals)
    assert len(unrecorded.intervals) == 7
    assert unrecorded.exposed_comm_s == recorded.exposed_comm_s


def test_a_step_records_intervals_only_for_a_probe_told_of_tasks() -> None:
    """The op-level step of MegaScale-MoE on deepseekmoe, PP 2: with a probe told of tasks every op's interval
    is there (as many as the ops simulated); without one none is recorded, and the StageLogs are the same."""
    assert reads_tasks([_OpsSeen()]) and not reads_tasks([TransferLog(), Probe()])
    workload, gpus = _megascale()
    spans = _OpsSeen()
    seen = Engine(workload, cluster_preset("h800", gpus), memoize=False, probes=[spans])
    watched = seen.run()
    unwatched_engine = Engine(workload, cluster_preset("h800", gpus), memoize=False)
    assert seen.timer.intervals and not unwatched_engine.timer.intervals
    unwatched = unwatched_engine.run()
    assert spans.ops == watched.simulated_ops == unwatched.simulated_ops > 0
    assert_steps_match(unwatched, watched)
    assert unwatched.step_time_s == watched.step_time_s
