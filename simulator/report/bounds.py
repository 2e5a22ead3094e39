"""A lower bound on a step's time from its tasks timed alone, without running the pipeline.

Each stage's representative runs its tasks one after another (simulator/engine/engine.py ``_stage``), so its
pipeline ends no earlier than the sum of its tasks' durations; its gradient reduction then ends no earlier
than that, and its optimizer step follows. A task never runs faster in the step than alone on an idle NVLink
of its own (``MemoTimer``, which is what a memoized step replays; an op-level task shares its links and adds
NIC bytes, which only delays it, simulator/streams/tasks.py ``run_task``). So

    step_time_s >= max over stages (sum of the stage's task durations alone + its optimizer step).

``moesim search`` (experiments/search/search.py) skips a point whose bound already exceeds the time it must beat;
tests/properties/test_bounds.py checks that the bound never exceeds the simulated step over many points.
"""

from __future__ import annotations

from functools import lru_cache

from simulator.costs.calibration import Calibration
from simulator.engine.engine import optimizer_s
from simulator.engine.faults import StageFault
from simulator.engine.sim_env import environment
from simulator.engine.timer import CostCache, MemoTimer
from simulator.fast.periodic import task_counts
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload
from workloads.schedules.base import ScheduleShape, Task

# The sum of durations here rounds differently from the engine's clock, which adds them one event at a time:
# a step without any wait would otherwise come out a few ulps under its bound.
ROUNDING = 1e-12


@lru_cache(maxsize=1024)
def shape_task_counts(shape: ScheduleShape) -> dict[tuple[int, Task], int]:
    """``periodic.task_counts`` of a schedule shape, once per process: a search's points share a few shapes.
    Callers must not change the dict."""
    return task_counts(shape.build())


def stage_busy_s(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration, timer: MemoTimer
) -> list[float]:
    """Each stage's tasks' durations alone, summed over the step (counts without building m-long orders)."""
    busy = [0.0] * workload.pp
    for (stage, task), count in shape_task_counts(workload.schedule.shape).items():
        busy[stage] += count * timer.task_timing(workload.task_key(stage, task)).duration_s
    return busy


def step_lower_bound_s(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration, timer: MemoTimer | None = None
) -> float:
    """A proven lower bound on the step time of ``workload`` on ``cluster`` (see the module docstring);
    ``timer``: a MemoTimer of this workload whose task timings to reuse (and fill)."""
    if timer is None:
        timer = MemoTimer(environment(), CostCache(workload, cluster.gpu, calibration), [StageFault()] * workload.pp)
    busy = stage_busy_s(workload, cluster, calibration, timer)
    bound_s = max(b + optimizer_s(workload, stage, cluster.gpu, calibration) for stage, b in enumerate(busy))
    return bound_s * (1 - ROUNDING)
