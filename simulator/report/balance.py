"""A cost-balanced split of the layers over the pipeline's blocks (layout ``balance_blocks``).

Megatron-LM splits layers evenly unless told otherwise (--decoder-first/last-pipeline-num-layers,
--pipeline-model-parallel-layout), so the stage that also runs the embedding, or the LM head, the loss and
DeepSeek-V3's multi-token prediction module, is the slowest and every other stage waits for it (Megatron-Bridge
gives DeepSeek-V3 a hand-made 16-block layout for this reason: emb + 4 | 4 x 14 | 1 + MTP + loss,
src/megatron/bridge/recipes/deepseek). Here each layer kind, the embedding and the head (with its MTP modules
and loss) is timed alone at op level (one micro-batch's forward + backward, or under Megatron-Core's EP
overlap an F&B pair of the block with itself: split_costs; simulator.engine.engine's task timer),
and the layer counts per block are chosen to minimise the busiest block (each block is a pipeline position
micro-batches pass through), then the busiest stage, a stage being every block it holds (interleaved: s,
s + pp, ...; DualPipe: s and pp - 1 - s), among the splits that fit the GPU's memory.
Costs are added as if run back to back, so overlap between a stage's tasks (DualPipe's F&B pairs) is not
credited: a split for the work, not the schedule. For DeepSeek-V3 under DualPipe on 2,048 H800s it arrives at
Megatron-Bridge's layout above (tests/unit/test_pipeline_balance.py).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, cmp_to_key

from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.engine.timing import key_timer
from simulator.memory.per_gpu import peak_memory
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload, block_layer_counts
from workloads.ops import LayerKind
from workloads.schedules.base import BACKWARD, FORWARD, Task
from workloads.schedules.pipeline_tasks import Block, TaskKey


@dataclass(frozen=True)
class SplitCosts:
    """Seconds of forward + backward of one micro-batch: each layer in model order, and what the first block
    (embedding) and the last block (LM head, MTP modules, loss) run beside their layers."""

    layer_s: tuple[float, ...]
    first_extra_s: float
    last_extra_s: float

    @cached_property
    def prefix_s(self) -> tuple[float, ...]:
        """Seconds of the first n layers, n = 0 .. layers (each block's cost is a difference of two)."""
        return tuple(itertools.accumulate(self.layer_s, initial=0.0))


def split_costs(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration = DEFAULT_CALIBRATION
) -> SplitCosts:
    """Each layer kind and the two ends timed alone on stage 0's GPU, as the steady state runs them: a forward
    and a backward, or with EP overlap one F&B pair of the block with itself (its dispatch and combine beside
    the other micro-batch's compute; timed apart, a cross-node all-to-all would count whole)."""
    timed_s = key_timer(workload, cluster, calibration)
    schedule = workload.schedule
    steady = schedule.pair_steady(Task(FORWARD, 0, 0), Task(BACKWARD, 0, 0))

    def block_s(block: Block) -> float:
        return sum(timed_s(TaskKey(task.direction, (block,) * len(schedule.task_chunks(task))), 0) for task in steady)

    model = workload.model
    kinds: dict[LayerKind, float] = {}
    for layer in range(model.num_layers):
        kind = model.layer_kind(layer)
        if kind not in kinds:
            kinds[kind] = block_s(Block(False, False, (kind,)))
    layer_s = tuple(kinds[model.layer_kind(layer)] for layer in range(model.num_layers))
    return SplitCosts(layer_s, block_s(Block(True, False, ())), block_s(Block(False, True, ())))


def _block_costs_s(counts: Sequence[int], costs: SplitCosts) -> list[float]:
    """Each block's seconds per micro-batch under the split ``counts`` (layers of each block, in order)."""
    prefix = costs.prefix_s
    block_s, start = [], 0
    for count in counts:
        block_s.append(prefix[start + count] - prefix[start])
        start += count
    block_s[0] += costs.first_extra_s
    block_s[-1] += costs.last_extra_s
    return block_s


def _stage_sums_s(block_s: Sequence[float], stage_blocks: Sequence[Sequence[int]]) -> list[float]:
    return [sum(block_s[b] for b in blocks) for blocks in stage_blocks]


def stage_costs_s(counts: Sequence[int], costs: SplitCosts, stage_blocks: Sequence[Sequence[int]]) -> list[float]:
    """Each stage's seconds per micro-batch: the sum of the blocks it holds."""
    return _stage_sums_s(_block_costs_s(counts, costs), stage_blocks)


def _objective(counts: Sequence[int], costs: SplitCosts, stage_blocks: Sequence[Sequence[int]]) -> tuple[float, ...]:
    """The busiest block first (each block is a pipeline position its micro-batches pass through: the slowest
    sets the pace, DualPipe's two directions and F&B pairs included), then the busiest stage, then the sum of
    squares of the stages (which spreads the rest once those are fixed)."""
    block_s = _block_costs_s(counts, costs)
    stages = _stage_sums_s(block_s, stage_blocks)
    return max(block_s), max(stages), sum(s * s for s in stages)


# Objectives within this relative difference tie (splits equal but for float summation order), so the first
# move found wins whatever the last bits of the costs
_TIE = 1e-9


def _compare(a: tuple[float, ...], b: tuple[float, ...]) -> int:
    """-1, 0 or 1 as objective ``a`` is lower than, ties with or is higher than ``b``, term by term."""
    for x, y in zip(a, b):
        if abs(x - y) > _TIE * max(abs(x), abs(y)):
            return -1 if x < y else 1
    return 0


def balanced_counts(
    costs: SplitCosts,
    stage_blocks: Sequence[Sequence[int]],
    start: Sequence[int] = (),
    peak_bytes: Callable[[tuple[int, ...]], float] | None = None,
    hbm_bytes: float = math.inf,
) -> tuple[int, ...]:
    """Layers per block minimising the busiest block, then the busiest stage: from ``start`` (default the even
    split), move one layer at a time from one block to another while that lowers ``_objective``, taking the
    best move whose split's peak memory (``peak_bytes``) fits ``hbm_bytes`` or is no higher than the current
    split's; deterministic (the first best move wins), and a split it returns is returned again from itself.
    A block may end up empty (Megatron-LM's --pipeline-model-parallel-layout allows it)."""
    blocks = 1 + max(b for held in stage_blocks for b in held)
    counts = tuple(start) or tuple(block_layer_counts(len(costs.layer_s), blocks))
    best = _objective(counts, costs, stage_blocks)
    peak = peak_bytes or (lambda _: 0.0)
    while True:
        moves = []
        for donor in range(blocks):
            for taker in range(blocks):
                if taker == donor or counts[donor] == 0:
                    continue
                trial = list(counts)
                trial[donor] -= 1
                trial[taker] += 1
                score = _objective(trial, costs, stage_blocks)
                if _compare(score, best) < 0:
                    moves.append((score, tuple(trial)))
        moves.sort(key=cmp_to_key(lambda a, b: _compare(a[0], b[0])))  # stable: ties keep the order found
        current_peak = peak(counts)
        chosen = next((m for m in moves if (p := peak(m[1])) <= hbm_bytes or p <= current_peak), None)
        if chosen is None:
            return counts
        best, counts = chosen


def balance_pipeline(
    workload: StepWorkload, cluster: ClusterSpec, calibration: Calibration = DEFAULT_CALIBRATION
) -> StepWorkload:
    """``workload`` with its layout's block_layers set to the balanced split (from its block_layers if set) that
    fits the GPU's memory where a split can."""
    schedule, layout = workload.schedule, workload.layout
    stage_blocks = [schedule.stage_blocks(stage) for stage in range(schedule.stages)]

    def split(counts: tuple[int, ...]) -> StepWorkload:
        return StepWorkload(
            workload.model,
            layout.with_(block_layers=counts),
            workload.num_gpus,
            workload.gpus_per_node,
            workload.global_batch,
            workload.seq_len,
        )

    def peak_bytes(counts: tuple[int, ...]) -> float:
        return peak_memory(split(counts)).total_bytes

    costs = split_costs(workload, cluster, calibration)
    return split(balanced_counts(costs, stage_blocks, layout.block_layers, peak_bytes, cluster.gpu.hbm_bytes))
