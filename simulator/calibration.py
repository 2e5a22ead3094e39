"""Every efficiency and overhead constant of the cost models, with its unit and source.

Policy (DESIGN.md): public measurements first; anything fitted to the paper is fitted only on the
240-GPU row of Table 3 and marked ``fitted_on``. Hardware speeds themselves live in topologies.hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Calibration:
    """Constants of the compute and communication cost models."""

    # GEMMs: a CTA tile of TILE_M x TILE_N outputs per SM; time = waves x tile time (wave quantization)
    gemm_tile_m: int = 128  # CUTLASS/cuBLAS Hopper bf16 tile (128x128x64), NVIDIA CUTLASS docs
    gemm_tile_n: int = 128
    # Fraction of an SM's peak a GEMM tile reaches in a full wave. FITTED (experiments/calibrate.py) on
    # Table 3's MegaScale-MoE 240-GPU row (21.61 s); the only fitted constant. cuBLAS alone reaches
    # ~0.75 on large bf16 GEMMs; the gap absorbs what the simulator does not model (expert load
    # imbalance beyond capacity padding, dynamic-shape grouped GEMMs, SMs taken by communication
    # kernels, CPU jitter) and applies to both systems alike.
    gemm_mma_efficiency: float = 0.4124
    # FlashAttention-2 on H100 (FA2 repo benchmarks, head dim 128, causal, bf16): ~350 TFLOP/s
    # forward, ~280 TFLOP/s backward of 989 -> 0.35 / 0.28 of peak, on the FLOPs it executes.
    attention_fwd_efficiency: float = 0.35
    attention_bwd_efficiency: float = 0.28
    attention_causal_fraction: float = 0.5  # causal mask: the kernel executes about half the FLOPs
    # Memory-bound kernels reach ~80% of HBM bandwidth (STREAM-like copies on H100; assumed).
    memory_efficiency: float = 0.8
    # Per-kernel launch gap on the GPU (CUDA launch latency 3-5 us; assumed 4 us).
    kernel_overhead_s: float = 4e-6
    # Host (CPU) time to issue one kernel from PyTorch eager mode (Python + dispatcher + launch). The host
    # runs ahead of the GPU while kernels are long; a device-to-host sync empties that lead.
    host_launch_s: float = 10e-6
    # A device-to-host sync drains the GPU queue; the host then re-issues kernels from Python
    # (PyTorch eager dispatch ~10-20 us per op; assumed 50 us per sync including the copy).
    host_sync_s: float = 50e-6
    # NCCL all-to-all reaches a lower fraction of link bandwidth than ring AG/RS (it talks to every
    # peer at once). Declared assumption: 0.75, the value at which AG/RS wins from top-k = 7 on in
    # MegaScale-MoE Fig. 7; Fig. 7's crossover is therefore not an independent prediction.
    all_to_all_efficiency: float = 0.75
    ring_efficiency: float = 1.0  # ring AG/RS at the measured NVLink/NIC rates of topologies.hardware
    fitted_on: tuple[str, ...] = ("gemm_mma_efficiency: Table 3, MegaScale-MoE, 240 GPUs (21.61 s/step)",)

    def with_(self, **changes: object) -> Calibration:
        return replace(self, **changes)

    def as_rows(self) -> list[tuple[str, object]]:
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


DEFAULT_CALIBRATION = Calibration()
