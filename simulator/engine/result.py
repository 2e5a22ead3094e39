"""What one simulated step returns: per-stage logs and the step's totals (plain values, no engine state).

The engine (simulator/engine/engine.py) fills them; probes (simulator/engine/probes.py), the report
(simulator/report/simulate.py) and the step runners around the engine (simulator/fast/steady.py) read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from workloads.graph.step import StepWorkload
from workloads.schedules.base import Phase, Task


@dataclass
class StageLog:
    """What one stage did during the step."""

    busy_s: float = 0.0
    pipeline_end_s: float = 0.0
    end_s: float = 0.0
    pp_wait_s: float = 0.0
    dp_exposed_s: float = 0.0
    exposed_comm_s: dict[str, float] = field(default_factory=dict)
    compute_busy_s: float = 0.0
    model_flops: float = 0.0
    params_gathered_s: float = 0.0  # when the stage's DP parameter all-gather finished (0 without DP)
    tasks: list[tuple[Task, float, float]] = field(default_factory=list)


@dataclass
class EngineResult:
    """Raw output of one simulated step."""

    step_time_s: float
    stages: list[StageLog]
    simulated_ops: int
    sim_wall_s: float
    network_bytes: dict
    # Per phase (F, B, W, F&B, ...): (summed duration of its tasks over all stages, how many ran)
    phase_spans: dict[Phase, tuple[float, int]] = field(default_factory=dict)
    workload: StepWorkload | None = None  # the step this is a result of
    sim_cpu_s: float = 0.0  # the CPU seconds of sim_wall_s (what the bench compares: the machine is shared)


def phase_spans(records: Iterable[list[tuple[Task, float, float]]]) -> dict[Phase, tuple[float, int]]:
    """Per phase, the summed duration and the number of the tasks in per-stage (task, begin_s, end_s) records."""
    spans: dict[Phase, tuple[float, int]] = {}
    for stage_records in records:
        for task, begin, end in stage_records:
            total, count = spans.get(task.direction, (0.0, 0))
            spans[task.direction] = (total + (end - begin), count + 1)
    return spans
