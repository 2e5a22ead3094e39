"""What the units that ``reproduce all`` and ``validate`` spread over processes cost: the processes take them
costliest first (longest processing time first), so the long ones start first and the short fill in. Only the
balance depends on these numbers, never an output."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

Item = TypeVar("Item")

# CPU seconds of each unit of `moesim reproduce all` (targets by name, validation cases by case name) on the 2-core
# development machine at 0c33187 (issue 38, 2026-12-07): each target alone (`moesim reproduce NAME --jobs 1`) less
# the 1.0 s of imports a worker pays once, each case as `moesim validate --jobs 1` times it (both calibrations); a
# unit not listed counts as free. Until then the estimates were those of c57b7c5, before the dispatchers, Blackwell
# and the newer cases (the Blackwell rows 5.3 -> 9.4, the DeepSeek-V3 report case 7.7 -> 1.9, Qwen3-235B's r2509 case
# unlisted at 5.2).
UNIT_CPU_S = {
    "blackwell": 9.4,  # 76 Blackwell steps at the fitted calibration
    "schedules": 5.1,  # nine DeepSeek-V3 steps under every schedule
    "bridge-qwen3-235b-a22b-h100-0256-r2509": 5.2,  # locks nowhere: 32 micro-batches tried, then 24 and 48 (bounded)
    "bridge-deepseek-v3-h100-1024": 3.0,
    "bridge-qwen3-235b-a22b-h100-0256-r2511": 2.4,
    "bridge-deepseek-v3-h100-1024-bf16": 2.2,
    "mlm-recipes-qwen3-235b-a22b-h100-0256-bf16": 2.0,
    "deepseek-v3-report-h800-2048": 1.9,
    "bridge-llama-3.1-405b-h100-1024": 1.9,
    "scaleup-domain": 1.4,
    "layouts-ep": 1.2,
    # table3 runs with Table 5, weak scaling and the paper's validation cases (PAPER_TARGETS), whose points are its own
    "table3": 0.5,
    "weak-scaling": 0.45,
    "fig14": 0.45,
    "skew": 0.45,
    "fig16": 0.4,
    "bridge-ab-qwen3-30b-a3b-bf16-alltoall-epoverlap": 0.4,
    "bridge-ab-qwen3-30b-a3b-bf16-alltoall-epoverlap-delaywgrad": 0.4,
    "moe-layer": 0.3,
    "nemo-gpt3-175b-h100-0128": 0.3,
    "nemo-gpt3-175b-h100-0512": 0.3,
    "bridge-llama-3.1-70b-h100-0064": 0.3,
    "bridge-ab-qwen3-30b-a3b-bf16-hybridep-epoverlap": 0.3,
    "fig17": 0.25,
    "r-ratio": 0.25,
    "bridge-qwen3-235b-a22b-h100-0256": 0.2,
    "bridge-nemotron-3-super-h100-0064-bf16": 0.2,
    "bridge-llama3-70b-lora-h100-0008": 0.2,
    "nemo-llama2-70b-h100-0064": 0.2,
    "bridge-qwen3-30b-a3b-h100-0016-r2602.01": 0.2,
    "fig7": 0.1,
    "moe-perf": 0.1,
}


def cpu_s(names: Iterable[str]) -> float:
    """What a unit of these targets and cases costs by UNIT_CPU_S."""
    return sum(UNIT_CPU_S.get(name, 0.0) for name in names)


def costliest_first(items: Sequence[Item], names: Callable[[Item], Iterable[str]]) -> list[int]:
    """The indices of ``items``, costliest first by the names of each (a stable sort: equals keep their order)."""
    return sorted(range(len(items)), key=lambda i: -cpu_s(names(items[i])))
