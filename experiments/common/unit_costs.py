"""What the units that ``reproduce all`` and ``validate`` spread over processes cost: the processes take them
costliest first (longest processing time first), so the long ones start first and the short fill in. Only the
balance depends on these numbers, never an output."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

Item = TypeVar("Item")

# CPU seconds of each unit of `moesim reproduce all` (targets by name, validation cases by case name), each run
# in a fork of a process that imported everything (as reproduce all's workers are), on the 2-core development
# machine (load 1-2 from another session), the mean of two `reproduce all` runs at c57b7c5 (issue #16: the
# Qwen3-235B case and layouts-ep had doubled since the last measurement, so layouts-ep started late and ended
# the run alone; the schedules and the DeepSeek-V3 report case: one such run each after DualPipe took the Fig. 4
# order, 9294421); a unit not listed counts as free.
UNIT_CPU_S = {
    "schedules": 8.1,  # nine DeepSeek-V3 steps of 32 micro-batches, NIC tasks partly at op level (too short to extrapolate)
    # DualPipe over 120 micro-batches: extrapolated from 56 at the fitted residual (1.5), whole at 1 (no lock at 56)
    "deepseek-v3-report-h800-2048": 7.7,
    "scaleup-domain": 4.7,  # its PP-60 and PP-30 steps extrapolate from 66 and 36 micro-batches
    "layouts-ep": 3.8,  # two of its cross-node EP 32 steps (36 micro-batches) lock no period: run whole
    "bridge-qwen3-235b-a22b-h100-0256": 2.9,
    "bridge-deepseek-v3-h100-1024": 2.3,
    "bridge-llama-3.1-405b-h100-1024": 2.0,  # a 48-micro-batch run with a quarter of its NIC tasks at op level (CP 2 across nodes)
    # table3 runs with Table 5, weak scaling and the paper's validation cases (PAPER_TARGETS): 2.7 together
    "table3": 1.35,
    "weak-scaling": 1.35,
    "skew": 1.3,
    "fig14": 1.05,
    "fig16": 1.0,
    "moe-layer": 2.0,  # twelve one-GPU layers, forward and backward, at two calibrations
    "moe-perf": 2.0,  # twelve 8-GPU layers, forward and backward, at two calibrations (assumed like moe-layer)
    "blackwell": 5.3,  # 39 Blackwell steps at the fitted calibration (stop 50, one run)
    "r-ratio": 0.6,
    "bridge-llama-3.1-70b-h100-0064": 0.4,
    "fig17": 0.4,
    "fig7": 0.2,
    "bridge-qwen3-30b-a3b-h100-0016": 0.1,
    "bridge-gpt-oss-120b-h100-0064": 0.1,
}


def cpu_s(names: Iterable[str]) -> float:
    """What a unit of these targets and cases costs by UNIT_CPU_S."""
    return sum(UNIT_CPU_S.get(name, 0.0) for name in names)


def costliest_first(items: Sequence[Item], names: Callable[[Item], Iterable[str]]) -> list[int]:
    """The indices of ``items``, costliest first by the names of each (a stable sort: equals keep their order)."""
    return sorted(range(len(items)), key=lambda i: -cpu_s(names(items[i])))
