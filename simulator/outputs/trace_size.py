"""How many events a Chrome trace of one step (simulator/outputs/trace.py) holds, counted before anything is simulated.

Everything the trace draws is fixed by the workload except two things that depend on timing: how many
lanes each thread needs (intervals that overlap get a lane each) and how many times a NIC's utilisation
changes. The count is therefore exact for process metadata, every task, op and transfer slice and every
flow arrow; it bounds the thread metadata from above, and counts the utilisation counters' first point
per NIC link. The rest of the counters are counted as the step runs (``TraceSizeCheck.on_link_rates``).

The lane bound: ops of one stream (of one lane of a paired task) never overlap, a place runs one task at a
time, and greedy interval partitioning (``trace.split_lanes``) uses as many lanes as intervals overlap at
most, so a thread needs at most one lane per stream that puts slices on it, and never more than its slices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.engine.probes import Probe
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.ops import COLLECTIVE, FUSED
from workloads.specs.limits import check_limit

if TYPE_CHECKING:
    from simulator.engine.engine import Engine
    from simulator.streams.network import FluidNetwork

# Per stage, the threads whose slices come from ops (one lane per stream at most) and from transfers.
OP_THREADS = ("compute", "nvlink", "fused", "nic_ep")
EVENTS_PER_PROCESS = 2  # process_name and process_sort_index
EVENTS_PER_LANE = 2  # thread_name and thread_sort_index
NIC_LINKS_PER_STAGE = 2  # nic_out and nic_in: one utilisation counter each


@dataclass(frozen=True)
class TraceSize:
    """The events of a trace: ``exact`` as written, ``lane_events_max`` at least what is written, and the
    NIC counters' ``counter_events_min`` (one point per kept NIC link; more when utilisation changes)."""

    exact: int
    lane_events_max: int
    counter_events_min: int

    @property
    def before_run(self) -> int:
        """What the trace holds at most, short of the counter points that timing adds."""
        return self.exact + self.lane_events_max + self.counter_events_min


def kept_stages(workload: StepWorkload, stages: Iterable[int] | None) -> list[int]:
    """The stages a trace shows: all, or ``stages``; one the run does not have is refused (a trace of it would
    hold no events)."""
    if stages is None:
        return list(range(workload.pp))
    kept = sorted(set(stages))
    missing = [stage for stage in kept if not 0 <= stage < workload.pp]
    if missing:
        raise ConfigError(
            "trace_stages",
            f"stage {missing[0]} is not a stage of this run (pp={workload.pp}): give stages 0 to {workload.pp - 1}",
        )
    return kept


def check_trace_micro_batches(workload: StepWorkload, micro_batches: int | None) -> None:
    """Refuse a --trace-micro-batches count below 1 or above the run's micro-batches per pipeline."""
    if micro_batches is not None and not 1 <= micro_batches <= workload.micro_batches:
        raise ConfigError(
            "trace_micro_batches",
            f"{micro_batches} is more than this run's {workload.micro_batches} micro-batches per pipeline: give 1 "
            f"to {workload.micro_batches}",
        )


def _key_slices(workload: StepWorkload, key) -> tuple[dict[str, int], dict[str, set]]:
    """One task's slices per op thread, and the (lane, stream) chains that put them there."""
    lanes = workload.task_lanes(key)
    slices = {thread: 0 for thread in OP_THREADS}
    chains: dict[str, set] = {thread: set() for thread in OP_THREADS}
    for index, op in enumerate(workload.task_ops(key)):
        chain = (lanes[index] if lanes else 0, op.stream)
        threads = ("compute", "fused") if op.kind == FUSED else ("nvlink",) if op.kind == COLLECTIVE else ("compute",)
        if op.nic_bytes:
            threads += ("nic_ep",)
        for thread in threads:
            slices[thread] += 1
            chains[thread].add(chain)
    return slices, chains


def trace_size(engine: Engine, stages: Iterable[int] | None = None, micro_batches: int | None = None) -> TraceSize:
    """The events ``trace.chrome_trace`` writes for ``engine``'s step (same ``stages`` / ``micro_batches``)."""
    workload = engine.workload
    schedule = workload.schedule
    keep = kept_stages(workload, stages)
    check_trace_micro_batches(workload, micro_batches)
    limit_mb = workload.micro_batches if micro_batches is None else micro_batches
    orders = {stage: workload.stage_order(stage) for stage in keep}
    drawn = {stage: {task[:3] for task in order if task.micro_batch < limit_mb} for stage, order in orders.items()}
    buckets = workload.layers_per_chunk * workload.chunks
    exact = lanes = 0
    per_key: dict = {}
    for stage in keep:
        slices = {thread: 0 for thread in OP_THREADS}
        chains: dict[str, set] = {thread: set() for thread in OP_THREADS}
        tasks = sends = 0
        for task in orders[stage]:
            if task.micro_batch < limit_mb:
                tasks += 1
                key = workload.task_key(stage, task)
                if key not in per_key:  # NOTE: a few distinct keys, up to 10^5 tasks
                    per_key[key] = _key_slices(workload, key)
                counts, ways = per_key[key]
                for thread in OP_THREADS:
                    slices[thread] += counts[thread]
                    chains[thread] |= ways[thread]
            for flow in schedule.outputs(stage, task):
                if flow.stage == stage or flow.micro_batch >= limit_mb:
                    continue  # DualPipeV's turn stays in memory; later micro-batches are not drawn
                sends += 1
                if flow.stage in drawn and (flow.direction, flow.micro_batch, flow.chunk) in drawn[flow.stage]:
                    exact += 2  # the arrow's start on the send and finish on the receiving task
        params = buckets if workload.dp > 1 else 0
        grads = engine.dp_grad_transfers(stage)
        exact += EVENTS_PER_PROCESS + tasks + sum(slices.values()) + sends + params + grads
        lanes += min(tasks, 1) + sends + min(params, 1) + grads
        lanes += sum(min(slices[thread], len(chains[thread])) for thread in OP_THREADS)
    return TraceSize(exact, EVENTS_PER_LANE * lanes, NIC_LINKS_PER_STAGE * len(keep))


def check_trace_events(count: int) -> None:
    """Refuse a trace past the trace-event limit (workloads/specs/limits.py)."""
    check_limit("trace", "trace_events", count, "trace events (fewer with --trace-stages / --trace-micro-batches)")


class TraceSizeCheck(Probe):
    """Refuses a trace over the trace-event limit: as the engine starts (before any simulated time) on the
    events the workload fixes, then at each NIC rate change as utilisation points accrue in ``timeline``."""

    def __init__(self, stages: Iterable[int] | None, micro_batches: int | None, timeline=None) -> None:
        self.stages = None if stages is None else set(stages)
        self.micro_batches = micro_batches
        self.timeline = timeline  # a trace.Timeline listed before this probe, whose counters are counted
        self.size: TraceSize | None = None

    def on_start(self, engine: Engine) -> None:
        self.size = trace_size(engine, self.stages, self.micro_batches)
        check_trace_events(self.size.before_run)
        self._network = engine.network
        keep = kept_stages(engine.workload, self.stages)
        self._counters = [f"{kind} {stage}" for stage in keep for kind in ("nic_out", "nic_in")]
        self._fixed = self.size.exact + self.size.lane_events_max

    def on_link_rates(self, network: FluidNetwork) -> None:
        if self.timeline is None or network is not self._network:
            return
        links = self.timeline.links
        check_trace_events(self._fixed + sum(len(links[name]) for name in self._counters if name in links))
