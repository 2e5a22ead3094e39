"""The FP8 GEMM and quantization model against Transformer Engine's published GEMM benchmark on Hopper.

TE's GEMM profiling tutorial (NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst at
commit 1609c890, "Worked Example: 5B Model on H200", benchmarks/gemm/benchmark_gemm.py) times the 12 GEMMs of
one layer (QKV, attention output, FC1, FC2; fprop, dgrad, wgrad) of hidden 4,096, intermediate 16,384 at
M = 31 x 512 = 15,872 tokens on an H200 NVL, in BF16 and FP8 current scaling, both with each op quantizing
its two BF16 operands ("autocast") and with operands quantized beforehand ("pre-quantized"). The difference
of the two FP8 rows is what the quantization kernels cost; the ratio of BF16 to pre-quantized FP8 is the FP8
kernels' speed-up. Here each GEMM is timed as the simulator times it (simulator.costs.kernels.gemm_time_s) and the
benchmark's quantization as its kernels (workloads/recipes/fp8_quant.py current scaling: the amax reset, an amax pass,
the scale, a cast writing the one FP8 copy the op needs: 5 bytes per element, 4 kernels per tensor;
simulator.costs.kernels.memory_time_s).
Simulated on the h200 preset (the SXM part at 700 W; the NVL card is capped at 600 W).

``python -m experiments.validation.fp8_gemm_check`` prints the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.costs.kernels import gemm_time_s, memory_time_s
from topologies.cluster import cluster_preset
from workloads.ops import Gemm, GemmPrecision
from workloads.recipes.fp8_quant import FP8_BYTES, QUANT_KERNELS
from workloads.specs.precision import Fp8Recipe

SOURCE = "NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst (1609c890), H200 NVL"
TOKENS = 31 * 512
HIDDEN, INTERMEDIATE = 4096, 16384
# (K, N) of each forward GEMM: QKV (32 heads, no GQA), attention output, FC1, FC2 (the tool's shapes)
SHAPES = ((HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, INTERMEDIATE), (INTERMEDIATE, HIDDEN))
# Per-layer GEMM time, ms (the tutorial's H200 NVL tables: Fprop + Dgrad + Wgrad)
MEASURED_MS = {"bf16": 32.014, "fp8 current, autocast": 20.285, "fp8 current, pre-quantized": 16.785}


@dataclass(frozen=True)
class LayerGemms:
    """Simulated per-layer seconds: BF16 GEMMs, FP8 GEMMs, and the benchmark's quantization kernels."""

    bf16_s: float
    fp8_s: float
    quant_s: float

    def rows_ms(self) -> dict[str, float]:
        """The simulated counterpart of each MEASURED_MS row."""
        return {
            "bf16": self.bf16_s * 1e3,
            "fp8 current, autocast": (self.fp8_s + self.quant_s) * 1e3,
            "fp8 current, pre-quantized": self.fp8_s * 1e3,
        }


def _gemms(precision: GemmPrecision) -> list[Gemm]:
    """Fprop (M x K @ K x N), dgrad (M x N @ N x K) and wgrad (K x M @ M x N) of each layer GEMM."""
    out = []
    for k, n in SHAPES:
        out += [Gemm(TOKENS, n, k, precision=precision), Gemm(TOKENS, k, n, precision=precision)]
        out.append(Gemm(k, n, TOKENS, precision=precision))
    return out


def simulate_layer(calibration: Calibration = DEFAULT_CALIBRATION) -> LayerGemms:
    """The benchmark's layer as the simulator times it on one H200."""
    gpu = cluster_preset("h200", 8).gpu
    bf16 = sum(gemm_time_s(g, gpu, calibration) for g in _gemms(GemmPrecision.BF16))
    fp8 = sum(gemm_time_s(g, gpu, calibration) for g in _gemms(GemmPrecision.FP8_TENSORWISE))
    cost = QUANT_KERNELS[Fp8Recipe.TENSORWISE]
    per_element = cost.read_bytes + FP8_BYTES  # one FP8 copy per operand and op
    x = sum(TOKENS * k for k, _ in SHAPES)  # activations (fprop, and wgrad's transposed copy)
    w = sum(k * n for k, n in SHAPES)  # weights (fprop, dgrad)
    dy = sum(TOKENS * n for _, n in SHAPES)  # output gradients (dgrad, wgrad)
    tensors = 3 * 2 * len(SHAPES)  # each of the 12 ops quantizes its two operands
    quant = memory_time_s(per_element * 2 * (x + w + dy), cost.kernels * tensors, gpu, calibration)
    return LayerGemms(bf16, fp8, quant)


def table(calibration: Calibration = DEFAULT_CALIBRATION) -> str:
    """The printed comparison (error: simulated time / measured - 1, > 0 slower than measured)."""
    simulated = simulate_layer(calibration).rows_ms()
    lines = [f"{SOURCE}: one layer's 12 GEMMs, ms", f"{'':28}  measured  simulated   error"]
    for row, measured in MEASURED_MS.items():
        lines.append(f"{row:28}  {measured:8.2f}  {simulated[row]:9.2f}  {simulated[row] / measured - 1:+6.1%}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
