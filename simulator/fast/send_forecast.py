"""Which replayed tasks a PP send will meet: a forecast that seeds the NIC replay's op-level tasks in the run
(simulator/fast/nic_replay.py), so that the first run of a step does not replay them all and conflict on most.

A task's output leaves its stage one NIC latency after the task ends (engine._send) over the sender's NIC out
and the receiver's NIC in. When a task starts, the forecast knows when every stage's started tasks ended or
will end (replayed: exactly; at op level: as its footprint says) and guesses when each stage's next tasks run,
as the engine would run them: each starts when the one before it on its stage has ended and its inputs have
arrived (its producer's forecast end, one NIC latency and the send's time alone later; at once for DualPipeV's
turn inside the GPU), and takes its footprint's duration. So it knows where each cross-node output will
occupy this stage's NIC links up to the asking task's end; a task whose own NIC spans (its footprint) overlap
one of those, or a DP bucket in flight on its links, runs at op level from the start; a send of a started task
sure to run alone is taken at its exact span instead of its window (simulator/fast/lone_send.py: Qwen3-235B at 48
micro-batches, 268 -> 208 tasks forced, 143 of them needed). A start or end where forecast leaves the forecasts
read from it as they are, and one elsewhere re-evaluates only what it moves (``_changed``). An op-level task is
exact whatever the forecast says: a wrong forecast only costs time (a task at op level that could have been
replayed, or a conflict, which stops the run: simulator/fast/nic_replay.py), never accuracy.

What it misses: DP buckets that start while a task runs, sends slowed by other sends on the receiver's NIC,
tasks at op level that take longer than alone. Measured (forecast tasks / conflicts) in README, Speed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import NamedTuple

from simulator.engine.flow_log import TOUCH_REL, Span
from simulator.fast.lone_send import lone_end
from simulator.engine.placement import FoldedPlacement
from simulator.engine.ranks import Place
from workloads.schedules.base import Flow, Phase, Task

# How many times its time alone a send is forecast to occupy its links. Measured on the Qwen3-235B case at 48
# micro-batches, forecasting a peer's next task only (forecast tasks / conflicts): 0.8: 462 / 9; 1.0: 469 / 0;
# 1.2: 496 / 0 (500 / 0 with its tasks up to the asker's end); 2.0: 680 / 0. A conflict sends the step to op
# level (simulator/fast/nic_replay.py), a task forecast in vain costs its op-level run (~1/500 of a run): a margin.
SEND_SLOWDOWN = 1.2
# How many PP sends' time alone (its NIC flows share their links with the sends that meet them) a task at op level
# may end after its footprint's end; how much before it, each phase learns in the run (``early_s``: the most an
# op-level task of that phase has ended before its footprint's end so far; DeepSeek-V3's interleaved 1F1B with EP
# overlap and delayed weight gradients has F&Bdw tasks end 3.7 sends early). Measured on DeepSeek-V3's bridge case
# and the seven schedules of experiments/beyond/schedules.py (the misses: a peer's op-level task ending 1 send late, or
# early), simpy events of all their runs, a stop and the op-level run where a forecast run misses: 0: 1.44 M
# (dualpipev, interleaved, EP overlap + delayed wgrad at op level); 1: 1.34 M (interleaved, delayed wgrad); 1.5:
# 1.36 M (interleaved); 2: 1.13 M, every one in one run; 3: 1.33 M (more forced); 2 with 4 sends early for every
# phase instead of learnt: 1.24 M.
OP_LEVEL_SLACK = 2.0
# A task that starts or ends where it was forecast leaves the forecasts computed from it as they are, and one that
# does not re-evaluates them, passing on only what changes (SendForecast._changed); False drops them all, to be
# recomputed when asked (tests/differential/test_send_forecast.py compares the two).
KEEP = True
# A started task's send sure to run alone is taken at its exact span (simulator/fast/lone_send.py); False keeps its
# SEND_SLOWDOWN window (tests/differential/test_send_forecast.py compares the two).
LONE = True

Send = tuple[Hashable, float, float]  # (one of the receiving or sending stage's NIC links, start_s, end_s)
# (producing stage, index of its task in that stage's order, how long after its end the input arrives at the
# earliest and the latest)
Input = tuple[int, int, float, float]


class Times(NamedTuple):
    """A task's forecast: its earliest start and its earliest and latest end."""

    start_s: float
    end_s: float
    latest_end_s: float


class SendForecast:
    """The cross-node PP sends of every stage's last ended, running and next tasks, and whether a task meets one
    of them or a DP bucket in flight."""

    def __init__(
        self,
        placement: FoldedPlacement,
        duration_s: Callable[[int, Task], float],
        first_flow_s: Callable[[int, Task], float] | None = None,
    ) -> None:
        """``duration_s(stage, task)``: how long a task takes alone (its footprint); ``first_flow_s``: when its
        first NIC flow starts from its start (its duration if it has none), which lets ``meets`` take a send
        sure to run alone at its exact span (simulator/fast/lone_send.py; None: never)."""
        self.placement, self.duration_s, self.first_flow_s = placement, duration_s, first_flow_s
        workload, cluster = placement.workload, placement.cluster
        self.latency_s = cluster.nic_latency_s
        self.nbytes = workload.pp_bytes_per_gpu
        self.alone_s = self.nbytes / cluster.nic_effective_Bps  # a PP send alone on the NIC
        self.send_s = SEND_SLOWDOWN * self.alone_s
        self.schedule = workload.schedule
        self._orders = [workload.stage_order(stage) for stage in range(workload.pp)]
        self._crossing: dict[tuple[int, int], bool] = {}  # _crosses per stage pair
        self._by_index: dict[tuple[int, int], tuple[tuple[Hashable, ...], float, float]] = {}  # _links_at
        # Where each activation or gradient comes from: (stage, index in its order) of the task that sends it.
        self._producer: dict[Flow, tuple[int, int]] = {}
        # NOTE: per stage, the stages whose sends load its NIC links (itself, its neighbours): the only ones a
        # task of it asks about.
        senders: list[set[int]] = [set() for _ in range(workload.pp)]
        for stage, order in enumerate(self._orders):
            for index, task in enumerate(order):
                for flow in self.schedule.outputs(stage, task):
                    self._producer[flow] = (stage, index)
                    if flow.stage != stage and self._crosses(stage, flow.stage):
                        senders[stage].add(stage)
                        senders[flow.stage].add(stage)
        self._senders = [tuple(sorted(found)) for found in senders]
        self._duration: dict[tuple[int, int], float] = {}
        # Per stage, each started task's earliest and latest end.
        self._ends: list[list[tuple[float, float]]] = [[] for _ in range(workload.pp)]
        self._routes: dict[tuple[int, Task], tuple[tuple[Hashable, ...], float, float]] = {}
        self._inputs: dict[tuple[int, int], tuple[Input, ...]] = {}
        # Each unstarted task's forecast, and per stage [sends of its last two started tasks, of its tasks after
        # them forecast so far, the next task's index in its order], each until a task it was computed from
        # (``_users``: who read whom) starts or ends (simulator/fast/send_forecast.py ``_forget``).
        self._times: dict[tuple[int, int], Times] = {}
        self._users: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self._sends: list[list | None] = [None] * workload.pp
        # Per stage, the phase and footprint end of its running task if at op level; per phase, the most an
        # op-level task of it ended before its footprint's end so far.
        self._running: list[tuple[Phase, float] | None] = [None] * workload.pp
        self.early_s: dict[Phase, float] = {}

    def order(self, stage: int) -> list[Task]:
        """``stage``'s task order (read, never changed)."""
        return self._orders[stage]

    def ends(self, stage: int) -> list[tuple[float, float]]:
        """The earliest and latest end of each task of ``stage`` started so far, in order (read, never changed)."""
        return self._ends[stage]

    def senders(self, stage: int) -> tuple[int, ...]:
        """The stages whose PP sends load ``stage``'s NIC links (itself, its neighbours)."""
        return self._senders[stage]

    def started(self, stage: int, task: Task, end_s: float, op_level: bool = False) -> None:
        """``task`` (the next of ``stage``'s order) started and is expected to end at ``end_s`` (its footprint's
        end; at op level from ``early_s`` of its phase before that to OP_LEVEL_SLACK sends after it)."""
        window = (end_s, end_s)
        if op_level:
            window = (end_s - self.early_s.get(task.direction, 0.0), end_s + OP_LEVEL_SLACK * self.alone_s)
        index = len(self._ends[stage])
        self._ends[stage].append(window)
        self._running[stage] = (task.direction, end_s) if op_level else None
        self._sends[stage] = None  # its last two started tasks are others now
        forecast = self._times.pop((stage, index), None)
        if not KEEP or forecast is None or (forecast.end_s, forecast.latest_end_s) != window:
            self._changed(stage, index)

    def ended(self, stage: int, end_s: float) -> None:
        """The running task of ``stage`` ended at ``end_s``."""
        ends = self._ends[stage]
        running = self._running[stage]
        if running is not None:
            phase, expected_s = running
            self.early_s[phase] = max(self.early_s.get(phase, 0.0), expected_s - end_s)
        if not KEEP or ends[-1] != (end_s, end_s):
            ends[-1] = (end_s, end_s)
            self._sends[stage] = None
            self._changed(stage, len(ends) - 1)

    def _changed(self, stage: int, index: int) -> None:
        """The ``index``-th task of ``stage`` started or ended where it was not forecast: bring what was computed
        from it up to date (KEEP), or drop it (recomputed when asked).

        Kept forecasts equal recomputed ones: a forecast is a function of the (end, latest end) of the tasks it
        read (``_users``: the one before it on its stage and its inputs' producers, a fixed set), so one whose
        inputs' values are as they were is the one a recomputation gives. A changed value re-evaluates each
        forecast that read it, and only one whose value changes passes it on: once the stack is empty, every
        forecast kept is its function of its inputs' current values (by induction on the order they are
        computed in: every change after a forecast's last evaluation pushed it again). A started task's own
        forecast leaves ``_times``: its value is ``_ends``' now (``started``: kept where they are equal)."""
        if not KEEP:
            self._forget(stage, index)
            return
        stack = list(self._users.get((stage, index), ()))
        while stack:
            key = stack.pop()
            old = self._times.get(key)
            if old is None:  # started since it was computed: its value is told, not forecast
                continue
            new = self._compute(*key, register=False)
            if new != old:
                self._times[key] = new
                self._sends[key[0]] = None
                stack.extend(self._users.get(key, ()))

    def _forget(self, stage: int, index: int) -> None:
        """Drop what was computed from the ``index``-th task of ``stage`` (it started or ended), and from that."""
        # NOTE: only those: a start or end elsewhere leaves most stages' forecasts as they were.
        self._sends[stage] = None
        stack = [(stage, index)]
        while stack:
            key = stack.pop()
            self._times.pop(key, None)
            self._sends[key[0]] = None
            stack.extend(self._users.pop(key, ()))

    def _crosses(self, src: int, dst: int) -> bool:
        """Whether a PP send from stage ``src`` to ``dst`` leaves over the NIC (not NVLink)."""
        crosses = self._crossing.get((src, dst))
        if crosses is None:
            route = self.placement.pp_links(Place(0, src, 0), Place(0, dst, 0))
            crosses = self._crossing[(src, dst)] = route[0][0] == "nic_out"
        return crosses

    def links(self, stage: int, task: Task) -> tuple[tuple[Hashable, ...], float, float]:
        """The NIC links ``task``'s outputs load (a send's out and in link each, when it crosses nodes), how long
        they are forecast to (``send_s`` times the most of its sends on one link: a paired F&B task's two outputs
        leave together on the stage's nic_out, each at half its rate) and how long its sends take alone so."""
        key = (stage, task)
        if key not in self._routes:
            src = Place(0, stage, 0)
            routes: list[Hashable] = []
            for flow in self.schedule.outputs(stage, task):
                if flow.stage != stage:
                    route = self.placement.pp_links(src, src.at_stage(flow.stage))
                    routes.extend(link for link in route if link[0] in ("nic_out", "nic_in"))
            sharing = max((routes.count(link) for link in routes), default=1)
            self._routes[key] = (tuple(routes), sharing * self.send_s, sharing * self.alone_s)
        return self._routes[key]

    def inputs(self, stage: int, index: int) -> tuple[Input, ...]:
        """What the ``index``-th task of ``stage`` waits for: each input's producer and how long after the
        producer's end it arrives (a cross-node send: one NIC latency and its time alone; an NVLink send: the
        NVLink's; DualPipeV's turn inside the GPU: none)."""
        key = (stage, index)
        if key not in self._inputs:
            found = []
            for flow in self.schedule.inputs(stage, self._orders[stage][index]):
                source, at = self._producer[flow]
                delay_s = latest_delay_s = 0.0
                if source != stage:
                    _, _, alone_s = self._links_at(source, at)
                    if not self._crosses(source, stage):  # inside one scale-up domain: over NVLink
                        (link,) = self.placement.pp_links(Place(0, source, 0), Place(0, stage, 0))
                        alone_s = self.nbytes / self.placement.network.capacities_Bps[link]
                    delay_s, latest_delay_s = self.latency_s + alone_s, self.latency_s + SEND_SLOWDOWN * alone_s
                found.append((source, at, delay_s, latest_delay_s))
            self._inputs[key] = tuple(found)
        return self._inputs[key]

    def times(self, stage: int, index: int) -> Times:
        """When the ``index``-th task of ``stage`` starts at the earliest and ends at the earliest and the latest:
        as told once started (its start then unused), else forecast."""
        ends = self._ends[stage]
        if index < len(ends):
            return Times(0.0, *ends[index])
        key = (stage, index)
        found = self._times.get(key)
        if found is None:
            found = self._times[key] = self._compute(stage, index, register=True)
        return found

    def _compute(self, stage: int, index: int, register: bool) -> Times:
        """The ``index``-th unstarted task of ``stage``'s forecast from what it reads (its predecessor's and its
        producers' ends), noting it among their users on its first computation (``register``)."""
        key = (stage, index)
        start_s = latest_start_s = 0.0
        if index:
            _, start_s, latest_start_s = self.times(stage, index - 1)
            if register:
                self._users.setdefault((stage, index - 1), []).append(key)
        for source, at, delay_s, latest_delay_s in self.inputs(stage, index):
            if register:
                self._users.setdefault((source, at), []).append(key)
            ends = self._ends[source]
            if at < len(ends):  # NOTE: started, as times() would say, without the call
                end_s, latest_end_s = ends[at]
            else:
                for earlier in range(len(ends), at):  # the producer's stage up to it, in order
                    self.times(source, earlier)
                _, end_s, latest_end_s = self.times(source, at)
            # NOTE: comparisons, not max(): two builtin calls per input cost more than the rest (the same floats)
            arrives_s, latest_arrives_s = end_s + delay_s, latest_end_s + latest_delay_s
            if arrives_s > start_s:  # noqa: PLR1730
                start_s = arrives_s
            if latest_arrives_s > latest_start_s:  # noqa: PLR1730
                latest_start_s = latest_arrives_s
        duration_s = self._duration_of(stage, index)
        return Times(start_s, start_s + duration_s, latest_start_s + duration_s)

    def _duration_of(self, stage: int, index: int) -> float:
        """``duration_s`` of the ``index``-th task of ``stage``, asked once."""
        duration_s = self._duration.get((stage, index))
        if duration_s is None:
            duration_s = self._duration[(stage, index)] = self.duration_s(stage, self._orders[stage][index])
        return duration_s

    def _links_at(self, stage: int, index: int) -> tuple[tuple[Hashable, ...], float, float]:
        """``links`` of the ``index``-th task of ``stage`` (NOTE: by index: a Task's hash is Python code)."""
        found = self._by_index.get((stage, index))
        if found is None:
            found = self._by_index[(stage, index)] = self.links(stage, self._orders[stage][index])
        return found

    def _of(self, stage: int, index: int, times: Times) -> list[Send]:
        links, send_s, _ = self._links_at(stage, index)
        start_s, end_s = times.end_s + self.latency_s, times.latest_end_s + self.latency_s + send_s
        return [(link, start_s, end_s) for link in links]

    def stage_sends(self, stage: int, until_s: float, following: bool = True) -> tuple[list[Send], list[Send]]:
        """The sends of ``stage``'s last ended and running task, and (``following``) of the tasks after it that
        start before ``until_s``, as far as their sends may leave before it."""
        order, started = self._orders[stage], len(self._ends[stage])
        if self._sends[stage] is None:
            known = [send for index in range(max(started - 2, 0), started)
                     for send in self._of(stage, index, self.times(stage, index))]  # fmt: skip
            self._sends[stage] = [known, [], started]
        cached = self._sends[stage]
        known, later, index = cached
        if not following:
            return known, []
        while index < len(order):
            # NOTE: a task starts once the one before it has ended, so its sends leave its duration and a NIC latency
            # after that end at the earliest: from one whose sends cannot leave before until_s on (the later ones
            # leave later), none is forecast yet (callers take sends leaving before until_s only)
            before_s = self.times(stage, index - 1).end_s if index else 0.0
            if before_s + self._duration_of(stage, index) + self.latency_s >= until_s:
                break
            times = self.times(stage, index)
            if index > started and times.start_s >= until_s:
                break
            later.extend(self._of(stage, index, times))
            index += 1
        cached[2] = index
        return known, later

    def meets(self, links: tuple[Hashable, ...], spans: tuple[tuple[Span, ...], ...], start_s: float) -> bool:
        """Whether a task starting at ``start_s`` whose flows occupy ``spans`` of ``links`` (from its start)
        overlaps a DP bucket in flight or a forecast send (one of a started task's that overlaps it: unless that
        send is sure to run alone and does not, at its exact span, simulator/fast/lone_send.py)."""
        if any(self.placement.dp_in_flight.get(link) and spans[i] for i, link in enumerate(links)):
            return True
        until_s = start_s + max((spans_of[-1][1] for spans_of in spans if spans_of), default=0.0)
        stage = links[0][1]
        for sender in self._senders[stage]:
            known, following = self.stage_sends(sender, until_s, following=sender != stage)
            position = 0
            started = len(self._ends[sender])
            for index in range(max(started - 2, 0), started):
                count = len(self._links_at(sender, index)[0])
                lone_s = None
                for link, begin_s, end_s in known[position : position + count]:
                    if link not in links or not _overlaps(spans[links.index(link)], start_s, begin_s, end_s):
                        continue
                    if not LONE or self.first_flow_s is None:
                        return True
                    if lone_s is None:  # NOTE: asked only of a send that meets the task at its window
                        lone_s = lone_end(self, sender, index, stage)
                        lone_s = False if lone_s is None else lone_s - TOUCH_REL * abs(lone_s)  # touching: apart
                    if lone_s is False or _overlaps(spans[links.index(link)], start_s, begin_s, lone_s):
                        return True
                position += count
            for link, begin_s, end_s in following:
                if link in links and begin_s < until_s and _overlaps(spans[links.index(link)], start_s, begin_s, end_s):
                    return True
        return False


def _overlaps(spans: tuple[Span, ...], start_s: float, begin_s: float, end_s: float) -> bool:
    """Whether any of ``spans`` (from ``start_s``) overlaps [begin_s, end_s)."""
    for span_begin, span_end in spans:
        if start_s + span_begin < end_s and start_s + span_end > begin_s:
            return True
    return False
