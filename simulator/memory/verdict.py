"""Whether a step fits in a GPU's memory, with the memory model's margin: "fits", "may not fit" (a warning: the
step is simulated) or "does not fit" (a refusal, with options to try).

What the model counts (simulator/memory/per_gpu.py) and how exactly:
- weights, gradients and optimizer state: term for term as Megatron-LM's own estimate
  (megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory at NVIDIA/Megatron-LM
  d98e8a64dd, with experts sharded over EP x ETP and their own data-parallel group; tests/unit/
  test_theoretical_memory.py: equal within 1e-5 on five layouts). Taken as exact;
- saved activations: tensor by tensor as Megatron-Core with Transformer Engine keeps them
  (simulator/memory/activations.py), for the micro-batches the schedule holds in flight. No published
  measurement of Megatron-Core's MoE layers checks this inventory byte for byte, so it carries the uncertainty;
- dispatcher buffers and sharded-unit buffers, as counted.
Not counted: the CUDA context, NCCL and cuBLAS workspaces, transient peaks inside a kernel's call, allocator
fragmentation. Hence the two bounds:
- FITS_FRACTION: arXiv 2411.06465 (Fujii, Watanabe, Yokota 2024, 454 Megatron-LM runs on A100 and H100): when the
  estimated memory was below 80% of the GPU's, no run ran out of memory. Their estimate counts temporary buffers
  and fragmentation, which this one does not, so "fits" here claims no more than theirs;
- ACTIVATION_UNCERTAINTY: assumed. The share of the counted activations the inventory may hold too long or
  count twice (a tensor Megatron-Core frees or shares earlier than simulated). No published error distribution of
  a formula against Megatron-Core's measured activation memory was found to set it: arXiv 2411.06465 publishes the
  80% threshold, not per-term errors; Megatron-LM's theoretical_memory_usage.py prices MoE layers as dense ones
  (NVIDIA/Megatron-LM #1784, #6782: no measured comparison); the public measured points are single runs
  (NVIDIA/Megatron-LM #1225, one dense run: max_memory_allocated 25.52 -> 24.94 GB with --recompute-activations, where
  the user expected Korthikanti's 5as/h softmax term to be freed). A step whose states plus the
  activations less this share still exceed the GPU's memory cannot fit: "does not fit". Between the two bounds
  the step may or may not fit, as allocator behaviour decides (PyTorch's caching allocator wastes up to 43% of
  memory under virtual pipelines and recomputation, arXiv 2507.16274): "may not fit".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from simulator.memory.per_gpu import GIB, MemoryBreakdown

FITS_FRACTION = 0.80  # arXiv 2411.06465: estimates below 80% of HBM never ran out of memory (454 runs)
ACTIVATION_UNCERTAINTY = 0.25  # assumed (see the module docstring): the counted activations' possible excess


class Verdict(Enum):
    """The memory model's answer for one step."""

    FITS = "fits"
    MAY_NOT_FIT = "may not fit"
    DOES_NOT_FIT = "does not fit"


@dataclass(frozen=True)
class MemoryVerdict:
    """The verdict, and the bytes it was reached from."""

    verdict: Verdict
    peak: MemoryBreakdown
    hbm_bytes: float

    @property
    def low_bytes(self) -> float:
        """The peak less the activations' stated uncertainty: what the step needs at least."""
        return self.peak.total_bytes - ACTIVATION_UNCERTAINTY * self.peak.activations_bytes

    def phrase(self) -> str:
        """One line: the verdict and its margin, in GiB."""
        hbm, peak, low = self.hbm_bytes / GIB, self.peak.total_gib, self.low_bytes / GIB
        if self.verdict is Verdict.FITS:
            return f"fits: {peak:.1f} GiB per GPU, within {FITS_FRACTION:.0%} of the {hbm:.1f} GiB HBM"
        return (
            f"{self.verdict.value}: {peak:.1f} GiB per GPU (stage {self.peak.stage}), {low:.1f} GiB with the "
            f"activations {ACTIVATION_UNCERTAINTY:.0%} lower, against {hbm:.1f} GiB of HBM ({FITS_FRACTION:.0%}: "
            f"{FITS_FRACTION * hbm:.1f} GiB); the CUDA context, NCCL workspaces and allocator fragmentation are "
            "not counted"
        )


def memory_verdict(peak: MemoryBreakdown, hbm_bytes: float) -> MemoryVerdict:
    """ "fits" within FITS_FRACTION of ``hbm_bytes``; "does not fit" when even the activations' lower bound leaves
    the step above it; "may not fit" between."""
    if peak.total_bytes <= FITS_FRACTION * hbm_bytes:
        return MemoryVerdict(Verdict.FITS, peak, hbm_bytes)
    low = peak.total_bytes - ACTIVATION_UNCERTAINTY * peak.activations_bytes
    return MemoryVerdict(Verdict.MAY_NOT_FIT if low <= hbm_bytes else Verdict.DOES_NOT_FIT, peak, hbm_bytes)
