"""Exact replay of tasks that use the NIC: optimistic replay, verified, re-run with the conflicting tasks at
op level until no replayed task conflicts.

A task of the folded placement touches its stage's compute stream and NVLink, which nothing else uses while
it runs, and, with cross-node EP (or CP across nodes), its stage's NIC links, which PP sends, DP buckets and
nothing else of the stage share. ``NicReplayTimer`` times each distinct task once alone (``footprint``: at op
level in a private environment, its NIC flows on an idle NIC of the stage's capacity, both directions, as
``FoldedPlacement.start_task`` wires them) and records the spans its own flows occupy each NIC link, merged,
from its start. In the shared run it replays the task as one timeout and reserves [t0 + a, t0 + b) per span;
every other flow on the NIC network is logged with its actual [start, end) (``FoldedPlacement.nic_log``).
After the run a replayed task conflicts if a foreign flow, or another task's reservation, overlaps one of its
reservations on the same link by a positive length (beyond rounding: flow_log.TOUCH_REL).

Why a run without conflicts equals the all-op-level run R* (``memoize=False``): suppose the runs differ and
take the earliest instant T at which they do. Before T both ran the same tasks at the same instants, so
each replayed task started at the same t0 in both, and in R* its ops ran as in its private run (nothing
else touched its stream or NVLink, and its flows were alone on its NIC links) up to T. A first difference
needs a flow whose max-min rate differs, i.e. a replayed task's flow and another flow on one link at once in
R* before T; both exist in the replay with the same starts (identical before T), so their spans overlap by
a positive length there too: a conflict. Rates are components' (network.py), so a flow on no shared link
neither slows nor is slowed. Hence no conflict means no difference (to float rounding: the shared network
advances its flows at other flows' events too). A conflicting task is added to the forced set, which runs it
at op level; the set only grows, so the loop (simulator/engine/engine.py) ends, at worst with every task at op
level (the all-op-level run; taken at once past ``MAX_CONFLICT_FRACTION`` or ``MAX_RUNS``). The argument
holds whatever the forced set, so a run may start from any seed: the steady shortcut's longer run starts
from the shorter run's ``needed`` tasks (its op-level tasks whose own flows met another flow; the others ran
as their footprints, so replaying them gives that run again).

What conflicts (Qwen3-235B on 256 H100, EP 32 over 4 nodes, PP 8): PP sends. Each task's output leaves on
its stage's NIC one NIC latency after it ends, for about 0.7 ms, while the next task's first dispatch starts
0.24 ms in, and arrives on the receiver's NIC during its task's dispatches. In the all-op-level run 20% of
the NIC tasks (356 of 1,792 at 48 micro-batches) have a PP send or DP bucket on their links while their own
flows run (311 once overlaps within rounding are not counted); a first run replaying every task, whose tasks
never slow down, shows 60% (1,065) and goes to op level after it (MAX_CONFLICT_FRACTION). So a step's first
run also forces the tasks a forecast PP send or DP bucket in flight meets (simulator/fast/send_forecast.py; a
heuristic, which changes what runs at op level, never the result): 500 there, a superset of the 311, no
conflict, one run. Where the forecast misses (a send slowed by op-level flows beyond its margin; before the
forecast let peers wait for their inputs and op-level tasks end in a window, DeepSeek-V3's schedules all did),
re-running with the conflicts forced cascades (DeepSeek-V3's 1F1B on 2,048 GPUs: 11 -> 3 -> 1 conflicts over
three runs of ~0.4 of the all-op-level run each), so a forecast run stops at its first conflict, as the PP
send or DP bucket lands (ReplayConflict, naming the replayed tasks it met). While the stopped runs have
started few of the step's tasks (FORECAST_BUDGET) the forecast run starts again with those tasks and their
later twins (same stage, phase and chunk) forced: Llama-3.1-405B's CP ring on the NIC stops after 72 of 6,144
tasks and its retry runs through with 24% forced (4.7 -> 1.7 CPU-s); past the budget the step runs at op level. The longer steady run starts from the 311, each where that run has it
(``seeded_at``: 355 of 2,048, exactly the tasks it needs; the 311 and all their copies a period later made
441) and needs no second run either.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Generator, Hashable, Iterable
from dataclasses import dataclass

import simpy

from simulator.engine.flow_log import TOUCH_REL, FlowLog, LoggedNetwork, Span, SpanIndex, merged
from simulator.streams.network import FluidNetwork
from simulator.engine.placement import FoldedPlacement
from simulator.engine.ranks import Place
from simulator.fast.send_forecast import SendForecast
from simulator.engine.sim_env import environment
from simulator.streams.tasks import TaskTiming, run_task
from simulator.engine.timer import CostCache, OpTimer
from workloads.schedules.base import Task
from workloads.graph.step import StepWorkload

TaskId = tuple[Place, Task]  # one task of one place in one run
Forced = frozenset[TaskId] | None  # the tasks run at op level; None: every task

# A run with more conflicts than this share of its NIC tasks, or the run this many runs in, is followed by the
# all-op-level run. A run with a share f forced costs about 0.1 + f of the all-op-level run (Qwen3-235B: 0.35 at
# 20%, 0.65 at 60%) and conflicts cascade (each forced task shifts the tasks after it): DeepSeek-V3's DualPipe
# on 2,048 GPUs went 304 -> 364 -> 376 -> 380 forced over four runs, more than the reference costs. Measured on
# the bench points (README, Speed); a seeded run (the steady shortcut's longer one) has few conflicts.
MAX_CONFLICT_FRACTION = 0.2
MAX_RUNS = 3
# A forecast run that stopped at a conflict runs again with the tasks the send met (and their twins) forced
# while the stopped runs together started at most this share of the step's tasks; then the step runs at op
# level. A retry pays only if it ends without conflict; its cost is the stopped runs' progress. Measured (first
# stop, share of tasks started / what a retry did): Llama-3.1-405B (CP 2 across nodes) 1% / no conflict, 3.0 ->
# 1.6 CPU-s for the 48-micro-batch run; DeepSeek-V3 1F1B 14% / no conflict; DualPipeV 10% / a stop at 22%;
# DualPipe 42%, interleaved 25%, with EP overlap 29% (experiments/beyond/schedules.py): each retry there met the
# next miss (cascades: up to nine stops at 0.25-0.45 of the op-level run each with no budget). Since the forecast
# lets peers wait for their inputs and op-level tasks end in a window (simulator/fast/send_forecast.py) those DeepSeek-V3
# runs meet no conflict; with its margins narrowed (SEND_SLOWDOWN 1.0 / 1.1) budget 1 saved 1% / 7% of their
# simpy events (single misses retried through, DualPipeV's cascade cost more): too close to change it.
FORECAST_BUDGET = 0.15

# A step's first run forces the tasks a PP send or DP bucket is forecast to meet (simulator/fast/send_forecast.py);
# False replays them all (tests compare the two).
FORECAST = True


class ReplayConflict(Exception):
    """A forecast run's PP send or DP bucket on ``links`` over [start_s, end_s) met the reservations of the
    replayed tasks ``met``: the run stops there (simulator/engine/engine.py re-runs it, ``after_conflict``)."""

    def __init__(self, links: tuple[Hashable, ...], start_s: float, end_s: float, met: frozenset[TaskId]) -> None:
        super().__init__(links, start_s, end_s, met)
        self.links, self.start_s, self.end_s, self.met = links, start_s, end_s, met


@dataclass(frozen=True)
class Footprint:
    """A task timed alone with its NIC: its timing, the merged spans its flows occupy each of the stage's NIC
    links (``FoldedPlacement.nic_links`` order) from its start, and the bytes it puts on them and on NVLink."""

    timing: TaskTiming
    nic_spans: tuple[tuple[Span, ...], ...]
    nic_bytes: tuple[float, ...]
    nvlink_bytes: float
    ops: int


@dataclass(frozen=True)
class ReplayStats:
    """How a step's run with NIC replay went: shared runs until none conflicted, the tasks of the last run
    that ran at op level, how many of its tasks used the NIC, and which of its op-level tasks had their NIC
    flows meet another flow (the rest could have been replayed: the seed of a longer run, ``seeded_at``; None
    where the run did not look, ``Engine(needed=False)``)."""

    runs: int
    forced: Forced
    nic_tasks: int
    needed: frozenset[TaskId] | None = frozenset()

    @property
    def forced_fraction(self) -> float:
        """The share of the NIC tasks the last run ran at op level."""
        if self.forced is None:
            return 1.0
        return len(self.forced) / self.nic_tasks if self.nic_tasks else 0.0


def next_forced(forced: Forced, conflicts: set[TaskId], nic_tasks: int, runs: int) -> Forced:
    """The forced set of the run after one with ``forced`` and these conflicts (every task past the limits)."""
    if forced is None or runs >= MAX_RUNS or len(conflicts) > MAX_CONFLICT_FRACTION * nic_tasks:
        return None
    return forced | conflicts


def after_conflict(timer: NicReplayTimer, conflict: ReplayConflict, stopped_tasks: int) -> tuple[Forced, bool]:
    """(forced, forecast) of the run after a forecast run of ``timer`` stopped at ``conflict``, the stopped runs
    of the step having started ``stopped_tasks`` tasks: the forecast again with the tasks the send met and their
    twins forced too (``twins``) while that is at most FORECAST_BUDGET of the step's tasks, else the step at op
    level."""
    workload = timer.costs.workload
    step_tasks = sum(len(workload.stage_order(stage)) for stage in range(workload.pp))
    if timer.seed is None or stopped_tasks > FORECAST_BUDGET * step_tasks:
        return None, False
    return timer.seed | twins(workload, conflict.met), True


def twins(workload: StepWorkload, tasks: Iterable[TaskId]) -> frozenset[TaskId]:
    """``tasks`` and the later tasks of their stages of the same phase and chunk: where a forecast missed one
    task's send, it misses the same send a micro-batch later (a schedule's steady state repeats)."""
    out = set()
    for place, task in tasks:
        out.add((place, task))
        for later in workload.stage_order(place.stage):
            if later.direction == task.direction and later.chunk == task.chunk and later.micro_batch > task.micro_batch:
                out.add((place, later))
    return frozenset(out)


def seeded_at(forced: Forced, shift: int, begins: dict[TaskId, float], repeats: Span) -> Forced:
    """A forced set for the same step with one more period, whose tasks are ``shift`` micro-batches later than
    their twins a period before, from a run whose tasks began at ``begins`` and whose state repeated over
    ``repeats`` = [t0, t1 + lambda) (simulator/periodic.lock_window): the longer run is this one up to there,
    the period inserted, then this one's rest shifted. So a task of ``forced`` that began before t1 + lambda
    stays, one that began from t0 on is also taken ``shift`` micro-batches later (the repeated ones: both)."""
    if forced is None:
        return None
    first_s, last_s = repeats
    out = set()
    for place, task in forced:
        begin_s = begins[(place, task)]
        if begin_s < last_s:
            out.add((place, task))
        if begin_s >= first_s:
            paired = None if task.paired is None else (task.paired[0] + shift, task.paired[1])
            out.add((place, task._replace(micro_batch=task.micro_batch + shift, paired=paired)))
    return frozenset(out)


def footprint(costs: CostCache, key: tuple, nvlink_Bps: float, nic_Bps: float, compute_factor: float) -> Footprint:
    """Time task ``key`` alone at op level on an idle NVLink of ``nvlink_Bps`` and an idle NIC of ``nic_Bps``
    each way, recording when its flows occupy each NIC direction."""
    workload = costs.workload
    ops, lanes = workload.task_ops(key), workload.task_lanes(key)
    env = environment()
    nvlink = FluidNetwork(env, {"nvl": nvlink_Bps})
    nic = FluidNetwork(env, {"out": nic_Bps, "in": nic_Bps})  # the order of FoldedPlacement.nic_links
    log = FlowLog(env)
    timing = TaskTiming()
    task_costs = costs.get(key, compute_factor)
    run_task(
        env, ops, task_costs, nvlink, ("nvl",), timing, lanes=lanes, nic_links=("out", "in"),
        nic_network=LoggedNetwork(nic, log),
    )  # fmt: skip
    env.run()
    return Footprint(
        timing,
        tuple(merged(log.spans.get(link, ())) for link in ("out", "in")),
        (nic.bytes_sent["out"], nic.bytes_sent["in"]),
        nvlink.bytes_sent["nvl"],
        len(ops),
    )


class NicReplayTimer:
    """Tasks replayed from their footprints, their NIC spans reserved, except the ``forced`` ones (op level)."""

    def __init__(
        self, placement: FoldedPlacement, costs: CostCache, memo: dict, forced: Forced = frozenset(),
        forecast: bool | None = None, intervals: bool = True,
    ) -> None:  # fmt: skip
        """``memo``: footprints by (key, stage slowdowns), shared with the engines of other runs of the step.
        A run seeded with no task (a step's first) also runs at op level the tasks a forecast PP send or DP
        bucket meets (FORECAST, simulator/fast/send_forecast.py) and stops at its first conflict (ReplayConflict); a
        seeded one has its seed from a run's conflicts or needed tasks. ``intervals``: whether its op-level tasks
        record their op intervals (simulator/timer.OpTimer)."""
        self.placement, self.costs, self.memo, self.seed = placement, costs, memo, forced
        if forecast is None:
            forecast = forced == frozenset()
        self.forecast = (
            SendForecast(placement, self._duration_s, self._first_flow_s)
            if FORECAST and forecast and forced is not None
            else None
        )
        self.foreseen: set[TaskId] = set()  # tasks the forecast ran at op level
        self.env = placement.env
        self.log = placement.nic_log = FlowLog(self.env)
        # Per NIC link, the starts of the reservations on it and the latest end so far (one stage's tasks, one
        # after another: in start order), for the forecast run's check of each PP send or DP bucket as it lands.
        self._held: dict[Hashable, tuple[list[float], list[float], list[tuple[float, TaskId]]]] = {}
        if self.forecast is not None:
            self.log.on_unowned = self._check
        self.op_timer = OpTimer(placement, costs, intervals)
        self.reserved: list[tuple[TaskId, Hashable, float, float]] = []  # (task, link, start_s, end_s)
        self.nic_tasks = 0
        self.started = 0  # tasks started (a stopped run's progress)
        self._timed_ops = 0

    @property
    def simulated_ops(self) -> int:
        return self._timed_ops + self.op_timer.simulated_ops

    def footprint(self, key: tuple, stage: int) -> Footprint:
        fault = self.placement.stage_faults[stage]
        slow = (fault.compute_factor, fault.nvlink_factor, fault.nic_factor)
        memo_key = ("nic-replay", key, slow)
        if memo_key not in self.memo:
            gpu, cluster = self.costs.gpu, self.placement.cluster
            self.memo[memo_key] = footprint(
                self.costs,
                key,
                gpu.nvlink_bandwidth_Bps / fault.nvlink_factor,
                cluster.nic_effective_Bps / fault.nic_factor,
                fault.compute_factor,
            )
            self._timed_ops += self.memo[memo_key].ops  # counted as MemoTimer counts its timings
        return self.memo[memo_key]

    def _duration_s(self, stage: int, task: Task) -> float:
        return self.footprint(self.costs.workload.task_key(stage, task), stage).timing.duration_s

    def _first_flow_s(self, stage: int, task: Task) -> float:
        """When a task's first NIC flow starts from its start, alone (at op level too: before it the task touches
        only its own stream and NVLink); its duration if it has none."""
        found = self.footprint(self.costs.workload.task_key(stage, task), stage)
        return min((spans[0][0] for spans in found.nic_spans if spans), default=found.timing.duration_s)

    @property
    def forced(self) -> Forced:
        """The tasks this run ran at op level: the seed's and the forecast's (None: every task)."""
        return None if self.seed is None else self.seed | self.foreseen

    def replay_as(self, forced: Forced) -> None:
        """Run ``forced`` at op level and nothing else (a run that repeats one whose forced tasks these were)."""
        self.seed, self.forecast, self.foreseen = forced, None, set()
        self.log.on_unowned = None

    def _reserve(self, task: TaskId, link: Hashable, start_s: float, end_s: float) -> None:
        self.reserved.append((task, link, start_s, end_s))
        starts, ends, tasks = self._held.setdefault(link, ([], [], []))
        if starts and start_s < starts[-1]:  # not in start order (never on the folded placement): check after
            self.log.on_unowned = None
        starts.append(start_s)
        ends.append(max(end_s, ends[-1]) if ends else end_s)
        tasks.append((end_s, task))

    def _check(self, links: tuple[Hashable, ...], start_s: float, end_s: float) -> None:
        """A PP send or DP bucket occupied ``links`` over [start_s, end_s): stop the run if a reservation there
        overlaps it (as flow_log.SpanIndex.overlaps counts it), naming every replayed task it met."""
        slack_s = TOUCH_REL * abs(end_s)
        met = set()
        for link in links:
            held = self._held.get(link)
            if held is None:
                continue
            starts, latest_ends, tasks = held
            # Back from the last reservation starting before end_s while the latest end so far reaches past start_s.
            index = bisect_left(starts, end_s - slack_s) - 1
            while index >= 0 and latest_ends[index] > start_s + slack_s:
                own_end_s, task = tasks[index]
                if own_end_s > start_s + slack_s:
                    met.add(task)
                index -= 1
        if met:
            raise ReplayConflict(links, start_s, end_s, frozenset(met))

    def run(self, place: Place, task: Task) -> Generator[simpy.Event, object, TaskTiming]:
        stage = place.stage
        key = self.costs.workload.task_key(stage, task)
        uses_nic = bool(self.costs.get(key, self.placement.compute_factor(place)).nic_bytes)
        self.nic_tasks += uses_nic
        self.started += 1
        if self.seed is None:
            timing = yield from self.op_timer.run(place, task)
            return timing
        found, start_s, nic_links = self.footprint(key, stage), self.env.now, self.placement.nic_links(stage)
        op_level = (place, task) in self.seed
        if self.forecast is not None:
            if not op_level and uses_nic and self.forecast.meets(nic_links, found.nic_spans, start_s):
                self.foreseen.add((place, task))
                op_level = True
            self.forecast.started(stage, task, start_s + found.timing.duration_s, op_level)
        if op_level:
            timing = yield from self.op_timer.run(place, task)
            if self.forecast is not None:
                self.forecast.ended(stage, self.env.now)
            return timing
        for link, spans, nbytes in zip(nic_links, found.nic_spans, found.nic_bytes):
            for begin_s, end_s in spans:
                self._reserve((place, task), link, start_s + begin_s, start_s + end_s)
            self.placement.network.account((link,), nbytes)
        self.placement.nvlink_networks[stage].account((("nvl", stage),), found.nvlink_bytes)
        yield self.env.timeout(found.timing.duration_s)
        return found.timing

    def needed(self) -> frozenset[TaskId]:
        """Op-level tasks whose own NIC flows overlapped a PP send, DP bucket or reservation on their links.

        The others ran as their footprints say (alone on their links), so replaying them instead gives this run
        again: a seed for the next run of the step needs only these (simulator/fast/steady.py)."""
        others: dict[Hashable, list[Span]] = {link: list(spans) for link, spans in self.log.unowned.items()}
        for _, link, start_s, end_s in self.reserved:
            others.setdefault(link, []).append((start_s, end_s))
        index = {link: SpanIndex(spans) for link, spans in others.items()}
        return frozenset(
            task
            for task, by_link in self.log.owned.items()
            if any(link in index and index[link].overlaps(*span) for link, spans in by_link.items() for span in spans)
        )

    def conflicts(self) -> set[TaskId]:
        """Replayed tasks whose reservation a foreign flow or another task's reservation overlaps."""
        by_link: dict[Hashable, list[tuple[float, float, TaskId]]] = {}
        for task, link, start_s, end_s in self.reserved:
            by_link.setdefault(link, []).append((start_s, end_s, task))
        found: set[TaskId] = set()
        for link, reservations in by_link.items():
            foreign = SpanIndex(self.log.spans.get(link, ()))
            found.update(task for start_s, end_s, task in reservations if foreign.overlaps(start_s, end_s))
            # A task's own spans are disjoint, so the latest-ending earlier span overlapping this one (if any
            # earlier span does) belongs to another task.
            latest_end, latest_task = float("-inf"), None
            for start_s, end_s, task in sorted(reservations, key=lambda r: r[0]):
                if latest_end > start_s + TOUCH_REL * abs(start_s) and latest_task is not None:
                    found.update((task, latest_task))
                if end_s > latest_end:
                    latest_end, latest_task = end_s, task
        return found
