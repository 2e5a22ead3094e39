"""Which replayed tasks a PP send will meet: a forecast that seeds the NIC replay's op-level tasks in the run
(simulator/nic_replay.py), so that the first run of a step does not replay them all and conflict on most.

A task's output leaves its stage one NIC latency after the task ends (engine._send) over the sender's NIC out
and the receiver's NIC in. When a task starts, the forecast knows when every stage's last task ended and when
its running task will end (replayed: exactly; at op level: as its footprint says), and guesses when a peer's
next tasks end (one after another, each its footprint's duration long) up to the asking task's end, so where
each of their cross-node outputs will occupy this stage's NIC links; a task whose own NIC spans (its
footprint) overlap one of those, or a DP bucket in flight on its links, runs at op level from the start. An
op-level task is exact whatever the forecast says: a wrong forecast only costs time (a task at op level that
could have been replayed, or a conflict, which stops the run: simulator/nic_replay.py), never accuracy.

What it misses: DP buckets that start while a task runs, and a peer's task that waits for its inputs (it sends
later than forecast). Measured on Qwen3-235B (simulator/nic_replay.py) at 48 micro-batches: 500 tasks of 1,792
forecast, a superset of the 311 whose flows meet another's in the all-op-level run, and no conflict; on
DeepSeek-V3's schedules (experiments/schedules.py, 32 micro-batches) 1F1B's peers wait and 11 of 960 conflict.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from simulator.flow_log import Span
from simulator.placement import FoldedPlacement
from simulator.ranks import Place
from workloads.schedules import Task

# How many times its time alone a send is forecast to occupy its links. Measured on the Qwen3-235B case at 48
# micro-batches, forecasting a peer's next task only (forecast tasks / conflicts): 0.8: 462 / 9; 1.0: 469 / 0;
# 1.2: 496 / 0 (500 / 0 with its tasks up to the asker's end); 2.0: 680 / 0. A conflict sends the step to op
# level (simulator/nic_replay.py), a task forecast in vain costs its op-level run (~1/500 of a run): a margin.
SEND_SLOWDOWN = 1.2

Send = tuple[Hashable, float, float]  # (one of the receiving or sending stage's NIC links, start_s, end_s)


class SendForecast:
    """The cross-node PP sends of every stage's last ended, running and next tasks, and whether a task meets one
    of them or a DP bucket in flight."""

    def __init__(self, placement: FoldedPlacement, duration_s: Callable[[int, Task], float]) -> None:
        """``duration_s(stage, task)``: how long a task takes alone (its footprint)."""
        self.placement, self.duration_s = placement, duration_s
        workload, cluster = placement.workload, placement.cluster
        self.latency_s = cluster.nic_latency_s
        self.send_s = SEND_SLOWDOWN * workload.pp_bytes_per_gpu / cluster.nic_effective_Bps
        self.schedule = workload.schedule
        self._orders = [workload.stage_order(stage) for stage in range(workload.pp)]
        self._started = [0] * workload.pp  # tasks started per stage
        self._ends: list[list[tuple[Task, float]]] = [[] for _ in range(workload.pp)]
        self._routes: dict[tuple[int, Task], tuple[Hashable, ...]] = {}
        # Per stage, since its last start or end: the sends of its last and running task, and of the tasks
        # after it forecast so far: [sends, following sends, next task's index in the order, its forecast start].
        self._sends: list[list | None] = [None] * workload.pp

    def started(self, stage: int, task: Task, end_s: float) -> None:
        """``task`` started on ``stage`` and is expected to end at ``end_s``."""
        ends = self._ends[stage]
        ends.append((task, end_s))
        del ends[:-2]  # the last ended task and the running one
        self._started[stage] += 1
        self._sends[stage] = None

    def ended(self, stage: int, end_s: float) -> None:
        """The running task of ``stage`` ended at ``end_s``."""
        ends = self._ends[stage]
        ends[-1] = (ends[-1][0], end_s)
        self._sends[stage] = None

    def links(self, stage: int, task: Task) -> tuple[Hashable, ...]:
        """The NIC links ``task``'s outputs load (a send's out and in link each, when it crosses nodes)."""
        key = (stage, task)
        if key not in self._routes:
            src = Place(0, stage, 0)
            routes: list[Hashable] = []
            for flow in self.schedule.outputs(stage, task):
                if flow.stage != stage:
                    route = self.placement.pp_links(src, src.at_stage(flow.stage))
                    routes.extend(link for link in route if link[0] in ("nic_out", "nic_in"))
            self._routes[key] = tuple(routes)
        return self._routes[key]

    def _of(self, stage: int, task: Task, end_s: float) -> list[Send]:
        start_s = end_s + self.latency_s
        return [(link, start_s, start_s + self.send_s) for link in self.links(stage, task)]

    def stage_sends(self, stage: int, until_s: float) -> tuple[list[Send], list[Send]]:
        """The sends of ``stage``'s last ended and running task, and of the tasks after it, each as if it started
        as soon as the one before ended: the next, and the others that end before ``until_s``."""
        ends, order = self._ends[stage], self._orders[stage]
        if self._sends[stage] is None:
            known = [send for task, end_s in ends for send in self._of(stage, task, end_s)]
            self._sends[stage] = [known, [], self._started[stage], ends[-1][1] if ends else None]
        cached = self._sends[stage]
        known, following, index, start_s = cached
        while start_s is not None and index < len(order) and (index == self._started[stage] or start_s < until_s):
            task = order[index]
            start_s += self.duration_s(stage, task)
            following.extend(self._of(stage, task, start_s))
            index += 1
        cached[2:] = [index, start_s]
        return known, following

    def sends(self, stage: int, links: tuple[Hashable, ...], until_s: float) -> list[Send]:
        """The forecast sends on ``links`` of ``stage`` (about to start a task that ends by ``until_s``: its own
        next sends are not forecast)."""
        found = []
        for sender in range(len(self._sends)):
            known, following = self.stage_sends(sender, until_s)
            found.extend(send for send in known if send[0] in links)
            if sender != stage:
                found.extend(send for send in following if send[0] in links and send[1] < until_s)
        return found

    def meets(self, links: tuple[Hashable, ...], spans: tuple[tuple[Span, ...], ...], start_s: float) -> bool:
        """Whether a task starting at ``start_s`` whose flows occupy ``spans`` of ``links`` (from its start)
        overlaps a DP bucket in flight or a forecast send."""
        if any(self.placement.dp_in_flight.get(link) and spans[i] for i, link in enumerate(links)):
            return True
        until_s = start_s + max((spans_of[-1][1] for spans_of in spans if spans_of), default=0.0)
        for link, begin_s, end_s in self.sends(links[0][1], links, until_s):
            for span_begin, span_end in spans[links.index(link)]:
                if start_s + span_begin < end_s and start_s + span_end > begin_s:
                    return True
        return False
