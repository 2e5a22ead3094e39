"""A lower bound on a step's time: its pipeline replayed with every task timed alone and nothing else in the way.

The engine (simulator/engine/engine.py) runs each stage's tasks one after another in the schedule's order
(``_stage``); a task starts once the one before it on its stage has ended and each input it receives
(``Schedule.inputs``) has arrived, and an input leaves when the task that sends it (``Schedule.outputs``) ends, then
takes a NIC latency and its transfer (``_send``: both at least 0; a turn that stays on the GPU, DualPipeV's, arrives
as it is sent). The first forward may also wait for the DP parameter gather, which only delays it. A task never runs
faster in the step than alone (``MemoTimer.task_timing``: what a memoized step replays, exactly; an op-level task,
cross-node EP, shares its NIC with PP sends and DP buckets, which only delays it, on a NIC of the same capacity,
simulator/engine/placement.py ``FoldedPlacement``; where the host runs ahead of the tasks, alone with every kernel it
issues before its first sync issued before it starts: simulator/engine/host_lead.py). So replaying the orders with
every task at its time alone and every input arriving as it is sent (``relaxed_ends``: the longest path through the
schedule's dependency graph, whatever the schedule: 1F1B, interleaved, zero-bubble, DualPipe(V), with or without EP
overlap) gives each stage a pipeline end no later than the engine's. Each stage's optimizer step follows its
gradient reduction, which follows its last task (``_grad_sync``), so

    step_time_s >= max over stages (its pipeline end, replayed + its optimizer step).

Where a stage's order is long (``REPLAYED_PER_STAGE``), only its first tasks are replayed and the rest count back
to back after them: they run after the last replayed one, each no faster than alone, so that is a bound too.

The reported step of a long step comes from the steady-state shortcut (simulator/fast/steady.py): exact to 1e-9 of
the full run where a state repeats (simulator/fast/periodic.py), within its bound on a bounded line (one run's steady
periods, simulator/fast/run_line.py, or two runs, simulator/fast/bounded.py), which only a schedule with a bounded
plan may take; the bound gives up as much as the step may be off (``shortcut_margin``). ``moesim search``
(experiments/search/search.py) skips a point whose bound already exceeds the time it must beat;
tests/properties/test_bounds.py checks that the bound never exceeds the simulated step, nor the replay the full run,
over many points of every schedule.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice

from simulator.costs.calibration import Calibration
from simulator.engine.engine import optimizer_s
from simulator.engine.faults import StageFault
from simulator.engine.sim_env import environment
from simulator.engine.timer import CostCache, MemoTimer
from simulator.fast.bounded import BOUND_REL
from simulator.fast.bounded import counts as bounded_counts
from simulator.fast.periodic import candidates, task_counts
from simulator.fast.run_line import STEP_BOUND_REL as LINE_STEP_BOUND_REL
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload
from workloads.schedules.base import Schedule, ScheduleShape, Task
from workloads.schedules.pipeline_tasks import kind_of

# The replay adds durations in another order than the engine's clock, which adds them one event at a time: a step
# without any wait would otherwise come out a few ulps under its bound.
ROUNDING = 1e-12
# How far an exactly extrapolated step may lie from its full run (simulator/fast/periodic.py: 1e-9, relative;
# tests/differential/test_steady.py REL).
EXACT_REL = 1e-9


@lru_cache(maxsize=1024)
def shape_task_counts(shape: ScheduleShape) -> dict[tuple[int, Task], int]:
    """``periodic.task_counts`` of a schedule shape, once per process: a search's points share a few shapes.
    Callers must not change the dict."""
    return task_counts(shape.build())


@dataclass(frozen=True)
class Replay:
    """A schedule's dependency graph in an order that respects it (``replay``): per task, the index of the task
    before it on its stage (``len(after)`` for none: a 0 there), of those whose outputs it takes as inputs, and of
    its kind in ``kinds``, every kind of the schedule's (stage, task with micro-batch indices 0); per stage, the
    index of its last task replayed (-1: none); per kind, the tasks of it left after the replayed ones."""

    after: tuple[int, ...]
    inputs: tuple[tuple[int, ...], ...]
    kind: tuple[int, ...]
    kinds: tuple[tuple[int, Task], ...]
    last: tuple[int, ...]
    left: tuple[int, ...]


# A search's points come a shape's neighbours at a time (token dispatchers, recompute choices). A replay holds ~100
# bytes a task, at most REPLAYED_PER_STAGE a stage (16 stages: under 2 MB), so 32 stay under ~50 MB.
REPLAYS_KEPT = 32
# Tasks a stage replays at most: its warm-up and more (1F1B's is pp - 1 forwards, interleaved's about 2 pp + (v - 1)
# pp, DualPipe's 2 pp); past them its order counts as its tasks' durations back to back, which leaves out the drain.
# Whole orders cost O(micro-batches) a point. Measured (one process, CPU-s): DeepSeek-V3's default search on 512
# H800s simulates 14 layouts with orders cut at 1,024 tasks a stage (as with none cut), 16 at 512, 28 at 128; Mixtral-
# 8x7B's on 128 H100s (moesim bench search-1000: 720 sequences over as few as one replica) bounds its 1,000 layouts in
# 17.0 CPU-s at 1,024, 15.8 at 512, 11.3 at 128 (summing each stage's tasks, the bound before the replay: 9.6) and
# simulates 47, not 77.
REPLAYED_PER_STAGE = 1024


@lru_cache(maxsize=REPLAYS_KEPT)
def replay(shape: ScheduleShape) -> Replay:
    """The dependency graph of the first REPLAYED_PER_STAGE tasks of each stage's order, found once per shape: each
    stage runs its order as far as its inputs have been sent, then waits for the one it lacks (the engine's
    ``_stage`` with no clock); a stage whose next input would come from past another's cut stops there."""
    schedule: Schedule = shape.build()
    counts = shape_task_counts(shape)
    index_of = {key: number for number, key in enumerate(counts)}
    left = list(counts.values())
    orders = [tuple(islice(schedule.lazy_order(stage), REPLAYED_PER_STAGE)) for stage in range(shape.stages)]
    after: list[int] = []
    inputs: list[tuple[int, ...]] = []
    kind: list[int] = []
    sender: dict[object, int] = {}  # an input, by its Flow: the index of the task that sends it
    waiting: dict[object, list[int]] = {}
    position, last = [0] * shape.stages, [-1] * shape.stages
    ready = deque(range(shape.stages))
    while ready:
        stage = ready.popleft()
        order, at = orders[stage], position[stage]
        while at < len(order):
            task = order[at]
            needed = schedule.inputs(stage, task)
            missing = next((flow for flow in needed if flow not in sender), None)
            if missing is not None:
                waiting.setdefault(missing, []).append(stage)
                break
            index = len(after)
            after.append(last[stage])
            inputs.append(tuple(sender[flow] for flow in needed))
            number = index_of[(stage, kind_of(task))]
            kind.append(number)
            left[number] -= 1
            last[stage] = index
            for flow in schedule.outputs(stage, task):
                sender[flow] = index
                ready.extend(waiting.pop(flow, ()))
            at += 1
        position[stage] = at
    cut = any(at < len(order) for at, order in zip(position, orders)) or any(left)
    if cut and all(
        sum(counts[key] for key in counts if key[0] == stage) <= REPLAYED_PER_STAGE for stage in range(shape.stages)
    ):
        raise RuntimeError(f"bounds: {schedule.name} never sends an input one of its stages waits for")
    none = len(after)
    return Replay(
        tuple(none if a < 0 else a for a in after), tuple(inputs), tuple(kind), tuple(counts), tuple(last), tuple(left)
    )


def relaxed_ends(graph: Replay, durations_s: list[float]) -> list[float]:
    """Each task's end, every task taking ``durations_s`` of its kind and every input arriving as it is sent."""
    end = [0.0] * (len(graph.after) + 1)  # the last entry: 0, the end of "no task before"
    for index, (before, inputs, kind) in enumerate(zip(graph.after, graph.inputs, graph.kind)):
        start = end[before]
        for sender in inputs:  # NOTE: a comparison, not max(): a builtin call per input costs more than the rest
            if end[sender] > start:  # noqa: PLR1730
                start = end[sender]
        end[index] = start + durations_s[kind]
    return end


def shortcut_margin(schedule: Schedule) -> float:
    """How far under its full run the reported step may lie: the larger of the two bounded lines' bounds on the step
    where the shortcut has a bounded plan (simulator/fast/steady.py ``shortcut`` takes a bounded line only then),
    EXACT_REL where it may extrapolate exactly, 0 where the step runs in full."""
    if bounded_counts(schedule) is not None:
        return max(BOUND_REL, LINE_STEP_BOUND_REL)
    return EXACT_REL if next(candidates(schedule), None) is not None else 0.0


def replayed_step_s(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration, timer: MemoTimer | None = None
) -> float:
    """The step replayed with every task timed alone and every input arriving as it is sent, each stage's optimizer
    step after its last task: at most the engine's full run (see the module docstring); ``timer``: a MemoTimer of
    this workload whose task timings to reuse (and fill)."""
    if timer is None:
        costs = CostCache(workload, cluster.gpu, calibration, cluster.nic_effective_Bps)
        timer = MemoTimer(environment(), costs, [StageFault()] * workload.pp)
    nic_Bps = cluster.nic_effective_Bps if workload.tasks_use_nic else 0.0  # as Engine.task_timing times them
    graph = replay(workload.schedule.shape)
    keys = [workload.task_key(stage, task) for stage, task in graph.kinds]
    # Where the host runs ahead into a stage's next task, a task is never faster than with all it issues before its
    # first sync issued before it starts (simulator/engine/host_lead.py)
    ahead = workload.host_runs_ahead
    durations_s = [
        timer.task_timing(key, stage, nic_Bps, timer.costs.get(key).host_ahead_s if ahead else 0.0).duration_s
        for (stage, _), key in zip(graph.kinds, keys)
    ]
    end = relaxed_ends(graph, durations_s)
    rest_s = [0.0] * workload.pp  # each stage's tasks past its replayed ones, back to back
    for (stage, _), count, duration_s in zip(graph.kinds, graph.left, durations_s):
        rest_s[stage] += count * duration_s
    return max(
        end[last] + rest_s[stage] + optimizer_s(workload, stage, cluster.gpu, calibration)
        for stage, last in enumerate(graph.last)
    )


def step_lower_bound_s(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration, timer: MemoTimer | None = None
) -> float:
    """A proven lower bound on the step time ``simulate`` reports for ``workload`` on ``cluster``: the replayed
    step less float rounding and what the steady shortcut may lie under the full run (see the module docstring)."""
    replayed_s = replayed_step_s(workload, cluster, calibration, timer)
    return replayed_s * (1 - ROUNDING) * (1 - shortcut_margin(workload.schedule))
