"""Where one transformer layer's time goes under a layout: the measured causes behind Table 5 and Fig. 14.

A stage's forward and backward task of one micro-batch are timed alone at op level (simulator.engine.timing), and
each op of its transformer layers is charged to what it is: TP collectives, SP / EP collectives, GEMMs,
FlashAttention, memory-bound kernels (permutations, norms, activations), the rest (host syncs), or the GPU
idle while the host launches the next kernel. Without overlap every op runs on the compute stream one after
another, so the parts add up to the layer's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from simulator.engine.timing import time_task
from simulator.report.simulate import prepare
from workloads.graph.step import DEFAULT_SEQ_LEN
from workloads.ops import ATTENTION, COLLECTIVE, GEMM, MEMORY, Group
from workloads.schedules.base import BACKWARD, FORWARD, Task


class Part(str, Enum):
    """What a layer's op time is spent on."""

    TP_COMM = "TP collectives"
    SP_EP_COMM = "SP / EP collectives"
    GEMM = "GEMMs"
    ATTENTION = "attention"
    MEMORY = "memory-bound kernels"
    OTHER = "other"
    HOST_WAIT = "GPU idle, waiting for host launches"


_SP_EP_GROUPS = (Group.SP, Group.EP, Group.ETP)


def op_part(kind: str, group: Group) -> Part:
    if kind == COLLECTIVE:
        return Part.TP_COMM if group == Group.TP else Part.SP_EP_COMM if group in _SP_EP_GROUPS else Part.OTHER
    return {GEMM: Part.GEMM, ATTENTION: Part.ATTENTION, MEMORY: Part.MEMORY}.get(kind, Part.OTHER)


def busy_s(ops) -> float:
    """Time some op of the task runs: the union of their intervals."""
    busy, reached = 0.0, 0.0
    for timed in sorted(ops, key=lambda timed: timed.start_s):
        busy += max(timed.end_s - max(timed.start_s, reached), 0.0)
        reached = max(reached, timed.end_s)
    return busy


@dataclass(frozen=True)
class LayerCosts:
    """Seconds per layer and micro-batch (forward + backward, recomputation included) by part, and the TP
    collectives' count and bytes per GPU per layer."""

    seconds: dict[Part, float]
    tp_collectives: int
    tp_bytes: float

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    @property
    def tp_bus_bandwidth_Bps(self) -> float:
        """The TP collectives' bytes per GPU over their time: the bus bandwidth they ran at."""
        return self.tp_bytes / self.seconds[Part.TP_COMM] if self.tp_collectives else 0.0


def layer_costs(model, layout, gpus: int, *, global_batch: int, seq_len: int = DEFAULT_SEQ_LEN) -> LayerCosts:
    """The mean layer of the middle pipeline stage of a step on the H800 cluster, from that stage's first
    forward and backward task."""
    workload, cluster, _ = prepare(model, layout, gpus, None, global_batch, seq_len, None, True)
    stage = workload.pp // 2
    layers = len(workload.stage_layers(stage))
    seconds = dict.fromkeys(Part, 0.0)
    tp_collectives, tp_bytes = 0, 0.0
    for direction in (FORWARD, BACKWARD):
        task = time_task(workload, cluster, stage, Task(direction, 0, 0))
        seconds[Part.HOST_WAIT] += (task.duration_s - busy_s(task.ops)) / layers
        for timed in task.ops:
            op = timed.op
            if not 0 <= op.layer < layers:  # embedding, LM head: not a transformer layer
                continue
            part = op_part(op.kind, op.group)
            seconds[part] += timed.duration_s / layers
            if part == Part.TP_COMM:
                tp_collectives += 1
                tp_bytes += op.comm_bytes
    return LayerCosts(seconds, round(tp_collectives / layers), tp_bytes / layers)


# H800 NVLink line rate per direction: 400 GB/s bidirectional (MegaScale-MoE Table 4). NCCL's ring collectives
# reach ~160 GB/s of it (topologies.hardware h800; deepseek-ai/DeepSeek-V3 issue #28).
H800_NVLINK_LINE_RATE_BPS = 200e9


@dataclass(frozen=True)
class TpGap:
    """A TP+TP layer against an SP+EP one, and what TP's collectives would have to cost for ``target_ratio``."""

    tp: LayerCosts
    sp: LayerCosts
    target_ratio: float  # TP+TP layer time over SP+EP's, as measured

    @property
    def ratio(self) -> float:
        return self.tp.total_s / self.sp.total_s

    def extra_s(self, part: Part) -> float:
        """Seconds TP+TP spends on ``part`` beyond SP+EP."""
        return self.tp.seconds[part] - self.sp.seconds[part]

    @property
    def without_tp_comm_ratio(self) -> float:
        """The ratio if TP's collectives cost nothing."""
        return (self.tp.total_s - self.tp.seconds[Part.TP_COMM]) / self.sp.total_s

    @property
    def needed_tp_comm_s(self) -> float:
        """TP's collective time per layer at which the ratio would be the target (<= 0: none would do)."""
        return self.target_ratio * self.sp.total_s - (self.tp.total_s - self.tp.seconds[Part.TP_COMM])

    @property
    def needed_bus_bandwidth_Bps(self) -> float:
        """The bus bandwidth the TP collectives would need for the target (inf if even free ones miss it)."""
        needed = self.needed_tp_comm_s
        return self.tp.tp_bytes / needed if needed > 0 else float("inf")
