"""Schedules by name: ``SCHEDULES`` (the only place a schedule's name is looked at), ``make_schedule``, and the
closed-form bubbles of each schedule from its papers."""

from __future__ import annotations

from typing import Any

from topologies.errors import ConfigError
from workloads.schedules.base import Schedule
from workloads.schedules.dualpipe import DualPipe, DualPipeV
from workloads.schedules.one_f_one_b import Interleaved, OneFOneB, ZeroBubble1P

SCHEDULES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (OneFOneB, ZeroBubble1P, Interleaved, DualPipe, DualPipeV)
}


def block_count(name: str, stages: int, chunks: int = 1) -> int:
    """Layer blocks schedule ``name`` cuts the model into over ``stages`` (pp x chunks; DualPipe pp, DualPipeV
    2 pp): the micro-batch count does not change them."""
    return make_schedule(name, stages, 1, chunks).blocks


def make_schedule(name: str, stages: int, micro_batches: int, chunks: int = 1, **options: Any) -> Schedule:
    """The schedule called ``name`` (a LayoutSpec.schedule value); ``options``: ep_overlap, delay_wgrad, group."""
    if name not in SCHEDULES:
        raise ConfigError("layout.schedule", f"must be one of {', '.join(SCHEDULES)}")
    return SCHEDULES[name](stages, micro_batches, chunks, **options)


def per_unit_comm_runs(name: str, ep_overlap: bool) -> bool:
    """Whether FSDP / ZeRO-2/3's per-unit all-gathers and reduce-scatters can run with schedule ``name``: its tasks
    are whole forwards and backwards of a chunk, not paired into Megatron-Core's combined 1F1B (EP overlap)."""
    return name in SCHEDULES and SCHEDULES[name].whole_chunk_tasks and not ep_overlap


def bubble_dualpipe_s(stages: int, f_and_b_s: float, backward_s: float, weight_s: float) -> float:
    """DualPipe's bubble (PP/2 - 1)(F&B + B - 3W) (deepseek-ai/DualPipe README, bubble table)."""
    return (stages / 2 - 1) * (f_and_b_s + backward_s - 3 * weight_s)


def bubble_zb1p_s(stages: int, forward_s: float, backward_s: float, weight_s: float) -> float:
    """ZB1P's bubble (PP - 1)(F + B - 2W), B the full backward (deepseek-ai/DualPipe README; Qi et al. ZB-H1)."""
    return (stages - 1) * (forward_s + backward_s - 2 * weight_s)


def bubble_fraction_1f1b(stages: int, micro_batches: int) -> float:
    """Idle fraction of 1F1B with equal stages: (p-1)/(m+p-1) (Narayanan et al., SC'21)."""
    return (stages - 1) / (micro_batches + stages - 1)
