"""When each model chunk's gradients start their DP reduction under Megatron-Core's interleaved schedule, and what a
chunk's first forward waits for in the DP weight gather (``ParamGather``, at the end).

With --overlap-grad-reduce Megatron-Core (and Megatron-Bridge, whose setup passes align_grad_reduce, default True)
sets ``config.grad_sync_func`` to each chunk's ``start_grad_sync``
(megatron/core/distributed/distributed_data_parallel.py; Megatron-Bridge src/megatron/bridge/training/setup.py
_update_model_config_funcs). In forward_backward_pipelining_with_interleaving
(megatron/core/pipeline_parallel/schedules.py at NVIDIA/Megatron-LM 2edffadb, the Megatron-LM that Megatron-Bridge
v0.4.2 pins) the chunk's backward hooks do not start the reduction (grad sync stays disabled during its backwards);
backward_step_helper_postprocess calls the chunk's grad_sync_func, every bucket of it at once, after the backward
``pipeline_parallel_rank`` backwards after the chunk's last one ("we launch asynchronous communication at the same
time across the pipeline-parallel group": grad_sync_virtual_microbatch_id = virtual_microbatch_id -
pipeline_parallel_rank), and the chunks whose turn would fall past the stage's last backward right after it
("Launch any remaining grad reductions"). Every chunk but the last one to finish reduces beside the cooldown's
backwards instead of after them.

Under the plain 1F1B schedule (forward_backward_pipelining_without_interleaving) and without pipelining
(forward_backward_no_pipelining, and combined_1f1b_schedule_for_no_pipelining under EP overlap), the first stage
leaves no_sync before its last backward ("only enable async grad reduction in first pipeline stage. Other pipeline
stages do grad reduction during pipeline bubble"), so its DDP backward hooks start each bucket's reduction as the
bucket's gradients are ready (megatron/core/distributed/param_and_grad_buffer.py register_grad_ready, under
overlap_grad_reduce), while that backward still runs; the other stages call grad_sync_func after their cooldown,
every bucket at once. MegaScale (NSDI'24 Sec. 3.2) overlaps the reduce-scatter with the last micro-batch's backward
as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import simpy

from workloads.graph.step import StepWorkload
from workloads.schedules.pipeline_tasks import BACKWARD, FORWARD_BACKWARD, FORWARD_BACKWARD_DELAYED, WEIGHT, Task

INTERLEAVED = "interleaved"  # Megatron-Core's interleaved 1F1B (workloads/schedules/registry.py SCHEDULES)
ONE_F_ONE_B = "1f1b"  # its plain 1F1B (one model chunk; PP 1 too)


@dataclass
class ChunkSyncs:
    """A stage's per-chunk gradient reductions: the chunks to start after a task, the ones left for the end,
    and the transfers started so far (the step's end waits for them all)."""

    after: dict[Task, tuple[int, ...]]
    at_end: tuple[int, ...]
    transfers: list[simpy.Event] = field(default_factory=list)


@dataclass
class EarlyBuckets:
    """A stage's gradient buckets started during its last backward (``buckets_during_last_backward``): that task,
    the event its end fires, the transfers started, and the process starting them (made as the task begins)."""

    task: Task
    done: simpy.Event
    transfers: list[simpy.Event] = field(default_factory=list)
    process: simpy.Process | None = None


def weight_gradients_of(task: Task) -> int | None:
    """The chunk whose weight gradients ``task`` computes: a full backward's, a weight-gradient half's, or the
    backward half of a paired forward-and-backward (None: a forward, or an input-gradient half)."""
    if task.direction in (BACKWARD, WEIGHT):
        return task.chunk
    if task.direction in (FORWARD_BACKWARD, FORWARD_BACKWARD_DELAYED) and task.paired is not None:
        return task.paired[1]
    return None


def per_chunk_sync(workload: StepWorkload) -> bool:
    """Whether the step reduces gradients chunk by chunk: the interleaved schedule with DP overlap, over a
    data-parallel group, under the distributed optimizer or DDP (ZeRO-2 / 3 reduce layer by layer instead)."""
    layout = workload.layout
    return layout.schedule == INTERLEAVED and workload.chunks > 1 and layout.dp_overlap and layout.zero_stage < 2


def chunk_syncs(workload: StepWorkload, stage: int) -> ChunkSyncs:
    """Where ``stage``'s chunks start their reduction (see the module docstring); ``stage`` is the PP rank."""
    backwards = [
        (task, chunk) for task in workload.stage_order(stage) if (chunk := weight_gradients_of(task)) is not None
    ]
    last: dict[int, int] = {}
    for index, (_, chunk) in enumerate(backwards):
        last[chunk] = index
    after: dict[Task, list[int]] = {}
    at_end = []
    for chunk in sorted(last):
        turn = last[chunk] + stage
        if turn < len(backwards):
            after.setdefault(backwards[turn][0], []).append(chunk)
        else:
            at_end.append(chunk)
    return ChunkSyncs({task: tuple(chunks) for task, chunks in after.items()}, tuple(at_end))


def buckets_during_last_backward(workload: StepWorkload, stage: int) -> Task | None:
    """The task during which ``stage`` starts its gradient buckets as they fill (see the module docstring): the
    first stage's last task with weight gradients under the plain 1F1B schedule with DP overlap, under the
    distributed optimizer or DDP (None elsewhere: the buckets start at the stage's end; ZeRO-2 / 3 reduce layer by
    layer in the tasks)."""
    layout = workload.layout
    if layout.schedule != ONE_F_ONE_B or stage != 0 or not layout.dp_overlap or workload.dp <= 1:
        return None
    if layout.zero_stage >= 2:
        return None
    last = None
    for task in workload.stage_order(stage):
        if weight_gradients_of(task) is not None:
            last = task
    return last


# --- the weight gather ----------------------------------------------------------------------------------------------
# Megatron-Core with --overlap-param-gather (NVIDIA/Megatron-LM d98e8a64: distributed_data_parallel.py
# _make_forward_pre_hook, param_and_grad_buffer.py finish_param_sync): each module's forward pre-hook waits for its
# bucket's all-gather before it runs and only then dispatches the next bucket's, so a model chunk's first forward
# ends no earlier than its last bucket lands plus that bucket's share of the forward. Under --align-param-gather
# (Megatron-LM's default with the interleaved schedule, arguments.py validate_args) the schedule starts every stage's
# gather as the step starts (config.param_sync_func); without it the first forward's pre-hook starts it, so a stage
# gathers only once its first forward's inputs are in. Without --overlap-param-gather the optimizer step gathers every
# bucket before the next forward: the stage's first task waits for the last one.


@dataclass
class ParamGather:
    """A stage's weight gather: ``gate`` fires when its first task may start (its first bucket landed, or every
    bucket without DP overlap), ``chunks[c]`` when model chunk ``c``'s buckets have all landed (its value: the
    time); ``started`` once the gather runs; ``forwarded``: the chunks whose first forward has run."""

    gate: simpy.Event
    chunks: list[simpy.Event]
    buckets: int
    started: bool = False
    forwarded: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, env: simpy.Environment, order: Iterable[Task], buckets: int) -> ParamGather:
        """The gather in ``buckets`` buckets (at least one per chunk) of a stage whose tasks run in ``order`` (it holds
        the model chunks its tasks name: DualPipe's two directions among them)."""
        chunks = 1 + max(task.chunk for task in order)
        return cls(env.event(), [env.event() for _ in range(chunks)], max(buckets, chunks))


def chunks_gathered(bucket: int, buckets: int, chunks: int) -> range:
    """The chunks whose buckets are all in once ``bucket`` (of ``buckets``, split evenly over ``chunks`` in chunk
    order, as the schedule first runs them) has landed."""
    return range(bucket * chunks // buckets, (bucket + 1) * chunks // buckets)


def forward_ends_s(landed_s: float, forward_s: float, buckets: float) -> float:
    """The earliest end of a chunk's first forward, ``forward_s`` long over its ``buckets`` buckets, whose last
    bucket landed at ``landed_s``: that bucket's layers still run after it lands."""
    return landed_s + forward_s / buckets
