"""Where one micro-batch of a step's busiest stage goes: its share of every kind of task the stage's order runs
(a plain schedule: the forward and the backward through each chunk the stage holds, interleaved 1F1B's virtual
stages included; with EP overlap, mostly the steady state's F&B pairs; DualPipe: its F&B tasks), timed alone
at op level (with its cross-node bytes on an idle NIC), each compute op charged to what it is (GEMMs,
attention, FP8 quantization, other memory-bound kernels, host syncs), the communication it leaves exposed by
group, and the GPU's idle time waiting for host launches.

`moesim validate` writes this for every miss over 10% (results/REPRODUCTION.md), at the fitted calibration and
at compute_residual 1, so a miss's explanation is computed at the commit that prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from experiments.common.layer_costs import Part, busy_s, op_part
from simulator.costs.calibration import Calibration
from simulator.engine.timing import TaskTime, task_timer
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload
from workloads.ops import COLLECTIVE, COMPUTE, FUSED, HOST_SYNC, MEMORY, Op
from workloads.schedules.base import Task

FP8_QUANTIZATION = "FP8 quantization"  # workloads/graph/op_lists.py names an FP8 GEMM's quantization op "<gemm>.quant"
FUSED_PAIRS = "fused GEMM + collective"  # MegaScale-MoE's intra-operator overlap (Sec. 4.2)
HOST_SYNCS = "host syncs"
OTHER_MEMORY = "other memory-bound"
MAMBA_SCAN = "Mamba-2 scan"  # a hybrid model's chunked state-space scan (workloads/recipes/mamba.py)
DELTA_RULE = "GDN delta rule"  # a Gated DeltaNet's chunked recurrence (workloads/recipes/mamba.py gdn_recipe)
_COMPUTE_PARTS = (
    Part.GEMM.value,
    Part.ATTENTION.value,
    MAMBA_SCAN,
    DELTA_RULE,
    FP8_QUANTIZATION,
    OTHER_MEMORY,
    FUSED_PAIRS,
    HOST_SYNCS,
)


@dataclass(frozen=True)
class StageCosts:
    """Seconds of one micro-batch's share of ``stage``'s tasks (every chunk it holds), each task alone."""

    stage: int
    duration_s: float
    compute_s: dict[str, float]  # by part, the compute stream's ops
    exposed_comm_s: dict[str, float]  # by group: communication no compute hid
    host_wait_s: float  # no op running: the GPU waits for the host to launch the next kernel
    lightest_s: float = 0.0  # busiest_stage: the lightest stage's duration_s, how uneven the stages are

    def phrase(self) -> str:
        compute = ", ".join(f"{p} {s * 1e3:.1f}" for p, s in self.compute_s.items() if s >= 5e-5)
        comm = ", ".join(f"{g.upper()} {s * 1e3:.1f}" for g, s in self.exposed_comm_s.items() if s >= 5e-5)
        lightest = f"; the lightest stage {self.lightest_s * 1e3:.1f} ms" if self.lightest_s else ""
        return (
            f"{self.duration_s * 1e3:.1f} ms (compute: {compute}"
            + (f"; exposed communication: {comm}" if comm else "")
            + f"; GPU idle for host launches {self.host_wait_s * 1e3:.1f}{lightest})"
        )


def _part_of(op: Op) -> str:
    """What a compute-stream op that is not a plain collective is spent on."""
    if op.kind == MEMORY and op.scan_state_bytes:
        return MAMBA_SCAN
    if op.delta_rule is not None:
        return DELTA_RULE
    if op.kind == MEMORY:
        return FP8_QUANTIZATION if op.name.endswith(".quant") else OTHER_MEMORY
    if op.kind == FUSED:  # a GEMM with its collective, or ring attention (CP) with its key-value exchange
        return FUSED_PAIRS if op.gemm is not None else Part.ATTENTION.value
    return HOST_SYNCS if op.kind == HOST_SYNC else op_part(op.kind, op.group).value


def per_micro_batch(workload: StepWorkload, stage: int) -> dict[Task, float]:
    """Each kind of task ``stage``'s order runs and how many of it per micro-batch: a plain schedule's forward
    and backward of each chunk once; with EP overlap, mostly the steady state's F&B pairs, beside the warm-up's
    lone forwards and the cool-down's lone backwards (Schedule.kind_counts, which costs the same at any m)."""
    m = workload.schedule.micro_batches
    return {kind: count / m for kind, count in workload.schedule.kind_counts(stage).items()}


def stage_costs(timer: Callable[[int, Task], TaskTime], stage: int, shares: dict[Task, float]) -> StageCosts:
    """``stage``'s costs from ``timer`` (simulator.engine.timing.task_timer of the step) and its tasks' ``shares``
    (per_micro_batch)."""
    compute = dict.fromkeys(_COMPUTE_PARTS, 0.0)
    exposed: dict[str, float] = {}
    duration = host_wait = 0.0
    for kind, share in shares.items():
        task = timer(stage, kind)
        duration += share * task.duration_s
        host_wait += share * (task.duration_s - busy_s(task.ops))
        for timed in task.ops:
            if timed.op.stream == COMPUTE and timed.op.kind != COLLECTIVE:
                compute[_part_of(timed.op)] += share * timed.duration_s
        for group, seconds in task.exposed_comm_s.items():
            exposed[group] = exposed.get(group, 0.0) + share * seconds
    return StageCosts(stage, duration, compute, exposed, host_wait)


def busiest_stage(workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration) -> StageCosts:
    """The stage whose tasks per micro-batch take longest alone (stage_costs), with the lightest stage's time
    beside it (stages with the same tasks are timed once)."""
    timer = task_timer(workload, cluster, calibration)
    timed: dict[tuple, StageCosts] = {}
    for stage in range(workload.pp):
        shares = per_micro_batch(workload, stage)
        keys = tuple((workload.task_key(stage, kind), n) for kind, n in shares.items())
        if keys not in timed:
            timed[keys] = stage_costs(timer, stage, shares)
    busiest = max(timed.values(), key=lambda costs: costs.duration_s)
    return replace(busiest, lightest_s=min(costs.duration_s for costs in timed.values()))
