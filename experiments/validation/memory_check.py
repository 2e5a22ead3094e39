"""Peak memory against the published runs that print theirs: how far moesim's per-GPU peak is from the allocator's.

A source's figure is PyTorch's peak allocated memory (``torch.cuda.max_memory_allocated``, what Megatron-Bridge's
report_memory logs as mem-max-allocated): every tensor the run held at its worst moment, but not the CUDA context,
NCCL's or the dispatcher's own cudaMalloc buffers, CUDA-graph pools outside PyTorch, or what the allocator reserved
and left unused. moesim's peak (simulator/memory/per_gpu.py) counts weights, gradients, optimizer states, the
activations in flight with the head's logits, and the dispatcher's buffers; it is compared as it is, so the error is
what a user would see between ``moesim run``'s memory and the run's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.validation.case_result import CaseResult


@dataclass(frozen=True)
class MemoryRow:
    """One case's peak memory per GPU: measured (GiB) and simulated (the busiest stage's, GiB)."""

    case: str
    measured_gib: float
    predicted_gib: float

    @property
    def error(self) -> float:
        """Signed fraction of the measured value: -0.10 = predicted 10% low."""
        return self.predicted_gib / self.measured_gib - 1


def memory_rows(results: list[CaseResult]) -> list[MemoryRow]:
    """The cases that ran and whose source publishes its peak allocated memory."""
    return [
        MemoryRow(r.case.name, r.case.measured_peak_allocated_gib, r.report.peak_memory_gib)
        for r in results
        if r.case.measured_peak_allocated_gib is not None and r.report is not None
    ]


def memory_mape(rows: list[MemoryRow]) -> float | None:
    """Mean absolute error of the peak memory (None without rows)."""
    return sum(abs(row.error) for row in rows) / len(rows) if rows else None


def _summary(rows: list[MemoryRow]) -> str:
    low, high = min(row.error for row in rows), max(row.error for row in rows)
    return (
        f"Peak memory per GPU against the allocator's published peak (experiments/validation/memory_check.py): "
        f"MAPE {memory_mape(rows):.1%} over {len(rows)} cases, from {low:+.1%} to {high:+.1%} "
        "(moesim counts what layers save, not the working tensors of the layer running at the peak or CUDA-graph pools)"
    )


def memory_lines(rows: list[MemoryRow]) -> list[str]:
    """The printed block after the validation table (none without rows)."""
    if not rows:
        return []
    width = max(len(row.case) for row in rows)
    lines = ["", _summary(rows), f"{'case':<{width}}  {'measured GiB':>12}  {'simulated GiB':>13}  {'error':>7}"]
    lines += [
        f"{row.case:<{width}}  {row.measured_gib:12.1f}  {row.predicted_gib:13.1f}  {row.error:+7.1%}" for row in rows
    ]
    return lines


def memory_markdown(rows: list[MemoryRow]) -> list[str]:
    """The REPRODUCTION.md block (none without rows)."""
    if not rows:
        return []
    lines = ["", _summary(rows) + ".", "", "| case | measured GiB | simulated GiB | error |", "|---|---|---|---|"]
    lines += [f"| {row.case} | {row.measured_gib:.1f} | {row.predicted_gib:.1f} | {row.error:+.1%} |" for row in rows]
    return lines


def memory_json(rows: list[MemoryRow]) -> dict[str, Any]:
    """``validate --json``'s ``"memory"`` entry."""
    return {
        "mape": memory_mape(rows),
        "cases": [
            {"case": r.case, "measured_gib": r.measured_gib, "predicted_gib": r.predicted_gib, "error": r.error}
            for r in rows
        ],
    }
