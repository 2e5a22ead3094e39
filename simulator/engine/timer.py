"""Task timers: how the engine turns one pipeline task of one place into simulated time.

``MemoTimer`` times each distinct task once, at op level, in a private environment on an idle NVLink of
its own, and replays it as one timeout. That is exact only while a task touches nothing but its own
stage's compute stream and NVLink, which no pipeline-level traffic shares (PP and DP go over the NIC):
the folded placement without cross-node EP or CP across nodes (``Placement.memoizable``). ``OpTimer`` runs
every op of every task in the shared environment, on the placement's links. The two agree to 1e-9 where
memoizing is allowed (tests/scenarios/test_pipeline.py). Tasks that use the NIC run at op level in the step;
``MemoTimer.task_timing`` still times them alone for experiments, on an idle NIC beside their NVLink.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Generator
from dataclasses import dataclass, field

import simpy

from simulator.costs.calibration import Calibration
from simulator.engine.dp_bytes import stage_ring_shares
from simulator.engine.faults import StageFault, scale_compute
from simulator.engine.placement import Placement
from simulator.engine.ranks import Place, RankMap
from simulator.engine.sim_env import environment
from simulator.streams.network import FluidNetwork
from simulator.streams.op_costs import OpCosts
from simulator.streams.tasks import TaskTiming, run_task
from topologies.hardware import GpuSpec
from workloads.graph.step import StepWorkload
from workloads.ops import Op
from workloads.recipes.layers import te_layers
from workloads.schedules.base import Task


class CostCache:
    """Cost-model numbers of each task's op list, computed once per (task key, compute slowdown, host lead, the
    stage's DP ring shares)."""

    def __init__(self, workload: StepWorkload, gpu: GpuSpec, calibration: Calibration, nic_Bps: float = 0.0) -> None:
        """``nic_Bps``: the NIC's rate each way, for the share of a DP ring's bytes one GPU's NIC carries (0: all)."""
        self.workload, self.gpu, self.cal = workload, gpu, calibration
        self.te_modules = te_layers(workload.layout)  # a TE module's host time per kernel (OpCosts.of)
        self._costs: dict[tuple, OpCosts] = {}
        self._nic_over_nvlink = nic_Bps / gpu.nvlink_bandwidth_Bps
        self._ranks = RankMap.of(workload) if nic_Bps else None
        self._shares: dict[int, tuple[float, float]] = {}

    def ring_shares(self, stage: int) -> tuple[float, float]:
        """The dense and the expert DP ring's share of their bytes on one NIC of ``stage``
        (simulator/engine/dp_bytes.py ring_nic_share; (1, 1) without a NIC rate)."""
        if self._ranks is None:
            return 1.0, 1.0
        if stage not in self._shares:
            self._shares[stage] = stage_ring_shares(self._ranks, stage, self._nic_over_nvlink)
        return self._shares[stage]

    def task_shares(self, stage: int | None) -> tuple[float, float]:
        """The DP rings' NIC shares a task of ``stage`` moves its FSDP gathers and scatters at ((1, 1): None, or no
        task bytes on the NIC)."""
        return (1.0, 1.0) if stage is None or not self.workload.tasks_use_nic else self.ring_shares(stage)

    def get(self, key: tuple, compute_factor: float = 1.0, lead_s: float = 0.0, stage: int | None = None) -> OpCosts:
        """``lead_s``: how long before the task's start the host began issuing it (OpCosts.ahead); ``stage``: where
        it runs, whose DP rings' NIC shares its FSDP gathers and scatters take (None: the whole ring on the NIC)."""
        shares = self.task_shares(stage)
        if (key, compute_factor, lead_s, shares) not in self._costs:
            if lead_s:
                costs = self.get(key, compute_factor, stage=stage).ahead(lead_s)
            else:
                ops = self.workload.task_ops(key)
                costs = OpCosts.of(ops, self.gpu, self.cal, self.te_modules, shares)
                costs = scale_compute(costs, ops, compute_factor)
            self._costs[(key, compute_factor, lead_s, shares)] = costs
        return self._costs[(key, compute_factor, lead_s, shares)]


@dataclass(frozen=True)
class TaskIdentity:
    """Everything a task's timing alone depends on (``MemoTimer.task_timing``): its ops and lanes, the GPU
    and calibration the cost models read, and the stage's slowdowns. Steps of other layouts, micro-batch
    counts, schedules or DP degrees that build the same op list share it."""

    ops: tuple[Op, ...]
    lanes: tuple[int, ...] | None
    gpu: GpuSpec
    calibration: Calibration
    compute_factor: float
    nvlink_factor: float
    nic_Bps: float = 0.0  # the idle NIC beside its NVLink, each way (0: its NIC bytes, if any, are not moved)
    te_modules: bool = True  # the layers are Megatron-Core's with TE (their host time per kernel: OpCosts.of)
    lead_s: float = 0.0  # how long before its start the host began issuing it (OpCosts.ahead)
    ring_shares: tuple[float, float] = (1.0, 1.0)  # its DP rings' NIC shares (CostCache.ring_shares)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # NOTE: hashing ~200 ops field by field costs about a millisecond: once per identity, not per lookup
        fields = (
            self.ops,
            self.lanes,
            self.gpu,
            self.calibration,
            self.compute_factor,
            self.nvlink_factor,
            self.nic_Bps,
            self.te_modules,
            self.lead_s,
            self.ring_shares,
        )
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash


class TimingCache:
    """Task timings shared by every step a process simulates (a search's points), keyed by TaskIdentity,
    least recently used dropped past ``max_entries`` (0: none kept). Timings are never changed once made;
    a lock keeps it whole under dask's threaded workers."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._timings: OrderedDict[TaskIdentity, TaskTiming] = OrderedDict()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._timings)

    def get(self, identity: TaskIdentity) -> TaskTiming | None:
        with self._lock:
            timing = self._timings.get(identity)
            if timing is None:
                self.misses += 1
            else:
                self.hits += 1
                self._timings.move_to_end(identity)
            return timing

    def put(self, identity: TaskIdentity, timing: TaskTiming) -> None:
        with self._lock:
            self._timings[identity] = timing
            while len(self._timings) > self.max_entries:
                self._timings.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._timings.clear()
            self.hits = self.misses = 0


# A timing holds its ~300 op intervals (~40 kB with its op list): 1,024 of them stay under ~50 MB.
TIMINGS = TimingCache(max_entries=1024)


class MemoTimer:
    """Each distinct task timed once in a private environment, then replayed as one timeout."""

    def __init__(
        self,
        env: simpy.Environment,
        costs: CostCache,
        stage_faults: list[StageFault],
        shared: TimingCache | None = TIMINGS,
    ) -> None:
        """``shared``: timings reused across steps (None: each step times its own tasks)."""
        self.env, self.costs, self.stage_faults, self.shared = env, costs, stage_faults, shared
        self.workload = costs.workload
        self.memo: dict[tuple, TaskTiming] = {}
        self.simulated_ops = 0
        # (id of a task key, stage) -> (the key, its timing): run()'s lookups by identity (OpTimer's NOTE)
        self._timed: dict[tuple[int, int], tuple[tuple, TaskTiming]] = {}

    def task_timing(
        self, key: tuple, stage: int | None = None, nic_Bps: float = 0.0, lead_s: float = 0.0
    ) -> TaskTiming:
        """Time a task alone, at op level, on ``stage``'s representative (healthy if None); with ``nic_Bps``, its NIC
        bytes (cross-node EP) on an idle NIC of that capacity each way (a stage's faults divide it), as
        ``FoldedPlacement.start_task`` wires them."""
        fault = self.stage_faults[stage] if stage is not None else StageFault()
        nic_Bps = nic_Bps / fault.nic_factor
        slow = (fault.compute_factor, fault.nvlink_factor)
        memo_key = key if slow == (1.0, 1.0) else (key, slow)  # a slowed stage's tasks are timed apart
        on_nic = stage if nic_Bps else None  # the shares apply where its NIC bytes move
        shares = self.costs.task_shares(on_nic)
        if nic_Bps:
            memo_key = ("nic", memo_key, nic_Bps, shares)
        if lead_s:
            memo_key = ("lead", memo_key, lead_s)
        if memo_key not in self.memo:
            ops, lanes = self.workload.task_ops(key), self.workload.task_lanes(key)
            te = self.costs.te_modules
            identity = TaskIdentity(ops, lanes, self.costs.gpu, self.costs.cal, *slow, nic_Bps, te, lead_s, shares)
            timing = self.shared.get(identity) if self.shared is not None else None
            if timing is None:
                env = environment()
                network = FluidNetwork(env, {"nvl": self.costs.gpu.nvlink_bandwidth_Bps / fault.nvlink_factor})
                timing = TaskTiming()
                costs = self.costs.get(key, fault.compute_factor, lead_s, on_nic)
                if nic_Bps:  # the order of FoldedPlacement.nic_links
                    nic = FluidNetwork(env, {"out": nic_Bps, "in": nic_Bps})
                    run_task(env, ops, costs, network, ("nvl",), timing, lanes=lanes, nic_links=("out", "in"),
                             nic_network=nic)  # fmt: skip
                else:
                    run_task(env, ops, costs, network, ("nvl",), timing, lanes=lanes)
                env.run()
                if self.shared is not None:
                    self.shared.put(identity, timing)
            self.simulated_ops += len(ops)  # counted as timed whether made here or reused: reports stay equal
            self.memo[memo_key] = timing
        return self.memo[memo_key]

    def run(self, place: Place, task: Task, lead_s: float = 0.0) -> Generator[simpy.Event, object, TaskTiming]:
        stage = place.stage
        key = self.workload.task_key(stage, task)
        if lead_s:  # a host ahead of (or behind) the task: its timing apart (OpCosts.ahead)
            timing = self.task_timing(key, stage, 0.0, lead_s)
            yield self.env.timeout(timing.duration_s)
            return timing
        # NOTE: a key's hash and equality are Python code (frozen dataclasses of blocks): looked up by identity, as
        # the workload hands out one key object per (stage, phase, chunks); a timing once made never changes
        timed = self._timed.get((id(key), stage))
        if timed is None or timed[0] is not key:
            timed = self._timed[(id(key), stage)] = (key, self.task_timing(key, stage))
        timing = timed[1]
        yield self.env.timeout(timing.duration_s)
        return timing


class OpTimer:
    """Every op of every task run in the shared environment, on the placement's links."""

    def __init__(self, placement: Placement, costs: CostCache, intervals: bool = True) -> None:
        """``intervals``: record each task's op intervals (False: no one reads them; tasks laid out as arithmetic
        then skip them, simulator/streams/tasks.py)."""
        self.placement, self.costs, self.intervals = placement, costs, intervals
        self.workload = costs.workload
        self.simulated_ops = 0
        # (id of a task key, compute slowdown) -> (the key, its ops, their costs, its lanes)
        self._tasks: dict[tuple[int, float], tuple] = {}

    def run(self, place: Place, task: Task, lead_s: float = 0.0) -> Generator[simpy.Event, object, TaskTiming]:
        key = self.workload.task_key(place.stage, task)
        factor = self.placement.compute_factor(place)
        # NOTE: the workload hands out one key object per (stage, phase, chunks): looked up by identity, a task
        # costs no hash of its key's blocks (nor a field-by-field comparison with an equal key)
        entry = self._tasks.get((id(key), factor))
        if entry is None or entry[0] is not key:
            ops = self.workload.task_ops(key)
            entry = (key, ops, self.costs.get(key, factor, stage=place.stage), self.workload.task_lanes(key))
            self._tasks[(id(key), factor)] = entry
        _, ops, costs, lanes = entry
        if lead_s:
            costs = self.costs.get(key, factor, lead_s, place.stage)
        timing = TaskTiming() if self.intervals else TaskTiming(intervals=None)
        yield self.placement.start_task(place, task, ops, costs, lanes, timing)
        self.simulated_ops += len(ops)
        return timing
