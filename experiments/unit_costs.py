"""What the units that ``reproduce all`` and ``validate`` spread over processes cost: the processes take them
costliest first (longest processing time first), so the long ones start first and the short fill in. Only the
balance depends on these numbers, never an output."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

Item = TypeVar("Item")

# CPU seconds of each unit of `moesim reproduce all` (targets by name, validation cases by case name), measured
# on the 2-core development machine at a95f1ac (issue #16's session); a unit not listed counts as free.
UNIT_CPU_S = {
    "schedules": 14.4,
    "scaleup-domain": 11.9,
    "bridge-llama-3.1-405b-h100-1024": 11.6,  # op-level steps on 256-1,024 GPUs
    "bridge-qwen3-235b-a22b-h100-0256": 11.3,
    "bridge-deepseek-v3-h100-1024": 9.1,
    "layouts-ep": 8.0,
    "table3": 2.6,  # with Table 5 and the paper's validation cases (PAPER_TARGETS)
    "skew": 2.2,
    "weak-scaling": 1.7,
    "fig16": 0.8,
    "bridge-llama-3.1-70b-h100-0064": 0.75,
    "r-ratio": 0.6,
    "fig14": 0.5,
    "fig17": 0.4,
    "bridge-qwen3-30b-a3b-h100-0016": 0.3,
    "fig7": 0.2,
}


def cpu_s(names: Iterable[str]) -> float:
    """What a unit of these targets and cases costs by UNIT_CPU_S."""
    return sum(UNIT_CPU_S.get(name, 0.0) for name in names)


def costliest_first(items: Sequence[Item], names: Callable[[Item], Iterable[str]]) -> list[int]:
    """The indices of ``items``, costliest first by the names of each (a stable sort: equals keep their order)."""
    return sorted(range(len(items)), key=lambda i: -cpu_s(names(items[i])))
