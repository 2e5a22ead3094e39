"""GB300 over GB200 from Blackwell's own measurements: what the published pairs measure against what moesim gives.

The GB300 rows of the Blackwell check (experiments/validation/blackwell/check.py) run 1.12-1.28x their GB200 rows
measured and 1.09-1.29x simulated (each GPU's GEMMs at its own MAMF level, simulator/costs/blackwell_tables.py
mamf_level; 1.06-1.24x at the pooled level). This module sets the pairs side by side and adds the two published
measurements that say where the difference is and is not:

- One recipe on three GPUs: Megatron-Bridge's Llama 3 8B pre-training on 8 GPUs, FP8 current scaling and MXFP8
  (docs/performance-summary.md at NVIDIA-NeMo/Megatron-Bridge v0.2.1, "25.11 NeMo Container"; flag files
  examples/megatron/bridge-{gb300,gb200,b200}-llama3-8b-8-{fp8cs,mxfp8}.sh, one recipe but for GB300's micro-batch of
  4). Dense, TP 1, PP 1, CUDA graph over the whole iteration: no expert or pipeline communication, no host-bound
  launches; GEMMs are 59-68% of the simulated micro-batch and attention 20-26%. Measured GB300 / GB200 1.19x (FP8-CS)
  and 1.21x (MXFP8), GB200 / B200 1.03x and 1.01x. moesim gives 1.07x and 1.06x: its GB300 GEMMs run at the pooled
  Blackwell table's level (the same dense peaks as the GB200, 2.5 / 5 PFLOP/s, and no MAMF point of its own), its
  GB200 GEMMs at the GB200's own MAMF level, 0.94 of it in FP8, and 1.05x its B200's (their MAMF points' ratio, where
  the datasheet peaks, GB200 2.5 against B200 2.25 PFLOP/s BF16, gave 1.11x and the pairs 1.02x and 1.09-1.10x). The
  measured pairs put GB200 near B200's speed and GB300 1.11x (FP8-CS) / 1.13x (MXFP8) above what the simulator gives
  it, which already includes cuDNN's measured GB300 attention speed-up (1.10x on this recipe's attention). Closing it
  with GEMMs alone would take GB300's GEMMs 1.20-1.23x GB200's (``PairResult.gemm_speedup_to_close``), more than the
  vendors' power limits (1,400 against 1,200 W, 1.17x) give a power-bound GEMM at equal energy per operation: part
  of the gap is not the GEMM rate, or is in the GB200 rows. Beside it, on every GPU alike, MXFP8 over FP8-CS: measured 0.95-0.96x, simulated 0.98-0.99x
  (Blackwell's MXFP8 GEMM curve is the FP8 per-tensor one at TE's same-run B300 ratio, MXFP8 GEMMs 5% behind FP8-CS's,
  simulator/costs/blackwell_tables.py; the simulated MXFP8 quantization, one pass, is a fifth cheaper than FP8-CS's
  amax pass and cast, with no transpose on Blackwell (workloads/recipes/fp8_quant.py), which more than makes up for
  it; 0.86x while torchao's grouped kernel was pooled into the curve, 0.99-1.00x while FP8-CS was charged Hopper's
  transpose).
- HBM-bound kernels: cuDNN's RMSNorm / LayerNorm benchmark on GB200 and GB300, same cuDNN (backend 9.19.01), same day
  (NVIDIA/cudnn-frontend@3929da2e benchmark/norms/results/{gb200,gb300}/all_models_20260226_*.csv, BF16, forward and
  backward, 15 shapes of 11 models): GB300 moves 0.97-1.04x GB200's bytes per second forward (median 1.01x),
  0.98-1.05x backward (median 1.04x); the presets' HBM (8 TB/s both) give 1.00x. HBM is not what GB300 does faster.

- One recipe on a Grace and an x86 host: Megatron-Bridge's MXFP8 Nemotron 3 Nano on 8 GPUs (flag files
  examples/megatron/bridge-{gb200,b200}-nemotron-3-nano-8-mxfp8.sh, the same flags), GB200 (26.06) 33,522 and B200
  (26.04.01) 32,768 tokens/s/GPU: 1.02x measured (26.04.01's own GB200 row 32,768, 1.00x), 0.83x simulated. The whole
  gap is the host: the GB200's busiest micro-batch waits 129.9 ms for its Grace's launches against the B200's 16.5 ms
  for its Xeon's (TE #2053's per-kernel CPU costs, 99.66 against 36.51 us, docs/host_cost_sources.md); without the
  wait it runs 1.05x faster. The measured pair says the two hosts cost this recipe alike; neither figure is changed
  on one pair (the sensitivity runs, both ways, are in docs/host_cost_sources.md).

Looked for and not found (issue 40 item 3): a GEMM measurement on GB300. Published Blackwell Ultra GEMM numbers are
B300's: the MAMF table (stas00/ml-engineering@744d01e compute/accelerator/README.md: B300 1,769 BF16 / 3,353 FP8
TFLOP/s against B200 1,745-1,771 / 3,432-3,435 and GB200 1,822 / 3,616, each GPU's best shape) and TE's
gemm_profiling (B300 only). No GB300 GEMM, grouped-GEMM or MXFP8 GEMM benchmark was found in
NVIDIA/TransformerEngine@d0067d0d, NVIDIA/cudnn-frontend@3929da2e (GB300: SDPA and norms only),
deepseek-ai/DeepGEMM@54e2261, pytorch/ao@36027d82, ml-engineering (master and its fast-mamf / mamf-means /
mamf-finder-mxfp8-support branches), sglang / vllm / flashinfer issues, or NVIDIA's Blackwell Ultra and MLPerf posts
(peaks only: BF16 / FP8 as Blackwell's; NVIDIA's GB300 LLM submissions to MLPerf Training v5.1 ran NVFP4). The
sustained (power-saturated) GEMM rate, where a 1,400 W GB300 and a 1,200 W GB200 would differ, is published for B200
alone (ml-engineering branch fast-mamf compute/accelerator/README.md: MSMF 1,456 BF16 / 2,796 FP8 TFLOP/s at ~994 W
and 1,339 MHz, against 1,965 MHz in burst); no GB200, B300 or GB300 sustained clock or MSMF was found. Without one,
any GB300 GEMM speed-up would be fitted on these rows, so the cost model is not changed here: this check states the
gap. Found since (stop 73) and not entered: facebookexperimental/triton PR #2023 (2026-07-14) on a GB300 with its SM
clock locked at 2,070 MHz, "measured cuBLAS GEMM ~617 tflops at 500 W vs ~1600-2174 tflops at 1400 W": a range, with
no dtype, shape or protocol. Were its top BF16, it would be 1.19x the GB200's MAMF point (1,822), the speed-up the
pairs ask for, and a power-limited clock the mechanism (1,400 W against the GB200's 1,200); one such point is not a
table.

``python -m experiments.validation.blackwell.ratios`` prints the table.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from experiments.common.layer_costs import Part
from experiments.validation.blackwell.check import RowResult, simulate_row
from experiments.validation.blackwell.rows import ROWS, BlackwellRow
from topologies.cluster import cluster_preset

BRIDGE_25_11 = "NVIDIA-NeMo/Megatron-Bridge v0.2.1 docs/performance-summary.md, 25.11 container, Llama 3 8B, 8 GPUs"

# (GPU, precision) -> the published tokens/s/GPU: FP8-CS (FP8-MX) of the three LLAMA3_8B rows
_LLAMA3_8B = {
    ("gb300", "fp8cs"): 37556,
    ("gb300", "mxfp8"): 36108,
    ("gb200", "fp8cs"): 31508,
    ("gb200", "mxfp8"): 29789,
    ("b200", "fp8cs"): 30624,
    ("b200", "mxfp8"): 29521,
}
DENSE_ROWS: tuple[BlackwellRow, ...] = tuple(
    BlackwellRow(
        f"bridge-{gpu}-llama3-8b-8-{precision}", "llama-3.1-8b", gpu, 8, 128, 8192, measured, False, BRIDGE_25_11
    )
    for (gpu, precision), measured in _LLAMA3_8B.items()
)


@dataclass(frozen=True)
class Pair:
    """Two published rows of one model and source on two GPUs (numerator first) and whether one recipe ran both."""

    label: str
    faster: str  # row name
    slower: str
    same_recipe: bool = False


PAIRS: tuple[Pair, ...] = (
    Pair("DeepSeek-V3, Megatron-Bridge 26.08", "gb300-deepseek-v3-256", "gb200-deepseek-v3-256"),
    Pair("GPT-OSS-120B, Megatron-Bridge 26.08", "gb300-gpt-oss-120b-64", "gb200-gpt-oss-120b-64"),
    Pair("Qwen3-30B-A3B, Megatron-Bridge 26.08", "gb300-qwen3-30b-a3b-8", "gb200-qwen3-30b-a3b-8"),
    Pair("Qwen3-235B-A22B, Megatron-Bridge 26.08", "gb300-qwen3-235b-a22b-256", "gb200-qwen3-235b-a22b-256"),
    Pair(
        "Qwen3-235B-A22B full CG, Megatron-LM #5728",
        "mlm-gb300-qwen3-235b-a22b-128-full-cg",
        "mlm-gb200-qwen3-235b-a22b-128-full-cg",
    ),
    Pair("DeepSeek-V3, MCore report Table 11", "mcore-gb300-deepseek-v3-256", "mcore-gb200-deepseek-v3-256"),
    Pair(
        "Qwen3-235B-A22B, MCore report Table 11", "mcore-gb300-qwen3-235b-a22b-256", "mcore-gb200-qwen3-235b-a22b-256"
    ),
    *(
        Pair(
            f"Llama 3 8B {name}, Megatron-Bridge 25.11 ({gpus.upper()})",
            f"bridge-{gpus.split('/')[0]}-llama3-8b-8-{precision}",
            f"bridge-{gpus.split('/')[1]}-llama3-8b-8-{precision}",
            True,
        )
        for gpus in ("gb300/gb200", "gb200/b200")
        for precision, name in (("fp8cs", "FP8-CS"), ("mxfp8", "MXFP8"))
    ),
    # One recipe on a Grace and an x86 host: Megatron-Bridge's MXFP8 Nemotron 3 Nano on 8 GPUs, the same flags on
    # GB200 (26.06) and B200 (26.04.01, whose GB200 row measured 32,768 as well)
    Pair(
        "Nemotron 3 Nano MXFP8 GB200 over B200, Megatron-Bridge 26.06 / 26.04.01",
        "bridge-gb200-nemotron-3-nano-8-mxfp8",
        "bridge-b200-nemotron-3-nano-8-mxfp8",
        True,
    ),
    # MXFP8 over FP8 current scaling on each GPU: not a GB300 question (the same on all three), printed beside it
    *(
        Pair(
            f"Llama 3 8B MXFP8 over FP8-CS, Megatron-Bridge 25.11 ({gpu.upper()})",
            f"bridge-{gpu}-llama3-8b-8-mxfp8",
            f"bridge-{gpu}-llama3-8b-8-fp8cs",
            True,
        )
        for gpu in ("gb300", "gb200", "b200")
    ),
)


def _rows() -> dict[str, BlackwellRow]:
    return {row.name: row for row in ROWS + DENSE_ROWS}


@dataclass(frozen=True)
class PairResult:
    """A pair's measured and simulated ratios (numerator over denominator, tokens/s/GPU)."""

    pair: Pair
    faster: RowResult
    slower: RowResult

    @property
    def measured(self) -> float:
        return self.faster.row.measured_tokens_per_s_per_gpu / self.slower.row.measured_tokens_per_s_per_gpu

    @property
    def simulated(self) -> float:
        return self.faster.tokens_per_s_per_gpu / self.slower.tokens_per_s_per_gpu

    @property
    def unexplained(self) -> float:
        """The factor of the measured ratio the simulator does not give (> 1: the first GPU is under-predicted)."""
        return self.measured / self.simulated

    @property
    def gemm_speedup_to_close(self) -> float:
        """How much faster the first row's GEMMs alone would have to run for the simulated ratio to be the measured
        one, read off its busiest stage's micro-batch with everything else held (meaningful where one stage is the
        step: the one-recipe pairs, PP 1)."""
        costs = self.faster.costs
        excess_s = costs.duration_s * (1 - self.simulated / self.measured)
        gemm_s = costs.compute_s[Part.GEMM.value]
        return gemm_s / (gemm_s - excess_s)


def pair_results() -> tuple[PairResult, ...]:
    """Every pair simulated at the fitted calibration (each row once)."""
    rows = _rows()
    names = {name for pair in PAIRS for name in (pair.faster, pair.slower)}
    results = {name: simulate_row(rows[name]) for name in sorted(names)}
    return tuple(PairResult(pair, results[pair.faster], results[pair.slower]) for pair in PAIRS)


# cuDNN's norm benchmark, backend "cudnn", BF16, one row per model shape (rows N x hidden C): (name, N, C, GB200
# forward, GB200 backward, GB300 forward, GB300 backward GB/s). NVIDIA/cudnn-frontend@3929da2e
# benchmark/norms/results/gb200/all_models_20260226_180237.csv and gb300/all_models_20260226_190305.csv (cuDNN
# backend 91901 on both, 20 iterations; gpt3-175b is a LayerNorm with bias, the others RMSNorm).
# fmt: off
CUDNN_NORMS_GBPS: tuple[tuple[str, int, int, float, float, float, float], ...] = (
    ("llama3-8b", 16384, 4096, 6424.6, 6187.3, 6459.5, 6133.5),
    ("llama3-70b", 8192, 8192, 5997.4, 5200.5, 5962.9, 5467.3),
    ("llama31-405b", 4096, 16384, 6119.7, 4787.2, 6079.4, 4896.8),
    ("llama4-e16", 8192, 5120, 5986.8, 4950.7, 5979.9, 5058.6),
    ("gpt3-175b", 1024, 12288, 3758.4, 1413.4, 3775.9, 1467.0),
    ("mixtral-8x7b", 8192, 4096, 5843.7, 5633.7, 5968.1, 5534.3),
    ("mixtral-8x22b", 4096, 6144, 5848.7, 4184.4, 5959.5, 4338.2),
    ("nemotronh-56b", 4096, 8192, 5934.0, 4885.9, 5976.0, 4908.6),
    ("deepseek-v3-2048x4096", 2048, 4096, 3773.7, 3377.1, 3856.9, 3497.2),
    ("deepseek-v3-131072x128", 131072, 128, 4168.5, 3769.1, 4235.8, 3928.1),
    ("deepseek-v3-8192x128", 8192, 128, 1234.6, 740.3, 1223.2, 769.1),
    ("qwen3-235b", 8192, 5120, 6000.5, 5051.7, 6105.0, 5071.9),
    ("qwen3-30b-4096x2048", 4096, 2048, 4790.9, 3642.7, 4662.5, 3702.7),
    ("qwen3-30b-131072x128", 131072, 128, 4112.0, 3769.1, 4269.8, 3937.9),
    ("qwen3-30b-16384x128", 16384, 128, 1860.6, 1180.1, 1873.8, 1231.4),
)
# fmt: on


def norm_ratios(backward: bool) -> tuple[float, ...]:
    """GB300's bytes per second over GB200's, per shape of cuDNN's norm benchmark, forward or backward."""
    return tuple((row[6] / row[4]) if backward else (row[5] / row[3]) for row in CUDNN_NORMS_GBPS)


def preset_hbm_ratio() -> float:
    """The gb300 preset's HBM bandwidth over the gb200 preset's: what moesim times memory-bound kernels by."""
    return cluster_preset("gb300", 8).gpu.hbm_bandwidth_Bps / cluster_preset("gb200", 8).gpu.hbm_bandwidth_Bps


def table() -> str:
    """The dense rows against the simulator, every pair's ratios, and the HBM-bound kernels' ratio."""
    results = pair_results()
    dense = {r.faster.row.name: r.faster for r in results} | {r.slower.row.name: r.slower for r in results}
    lines = [
        BRIDGE_25_11 + ", tokens/s/GPU (out of the corpus)",
        f"{'row':40} {'measured':>9} {'simulated':>9} {'error':>7}",
    ]
    for row in DENSE_ROWS:
        fitted = dense[row.name]
        lines.append(f"{row.name:40} {row.measured:9,.0f} {fitted.tokens_per_s_per_gpu:9,.0f} {fitted.error:+7.1%}")
        lines.append(f"  stage {fitted.costs.stage}, one micro-batch: {fitted.costs.phrase()}")
    lines.append("tokens/s/GPU ratios, measured against simulated (recipes as published: per GPU unless 'one recipe')")
    lines.append(f"{'pair':74} {'measured':>8} {'simulated':>9} {'unexplained':>11} {'GEMMs alone':>11}")
    for r in results:
        recipe = ", one recipe" if r.pair.same_recipe else ""
        alone = f" {r.gemm_speedup_to_close:10.3f}x" if r.pair.same_recipe else ""
        lines.append(f"{r.pair.label + recipe:74} {r.measured:7.3f}x {r.simulated:8.3f}x {r.unexplained:10.3f}x{alone}")
    lines.append(
        "  GEMMs alone: how much faster the first row's GEMMs would have to run, all else as simulated, for the "
        "simulated ratio to be the measured one"
    )
    for backward in (False, True):
        ratios = norm_ratios(backward)
        lines.append(
            f"HBM-bound: cuDNN RMSNorm / LayerNorm {'backward' if backward else 'forward'}, GB300 over GB200 bytes/s "
            f"(cudnn-frontend@3929da2e, {len(ratios)} shapes): median {statistics.median(ratios):.3f}x, "
            f"{min(ratios):.3f}-{max(ratios):.3f}x; the presets' HBM {preset_hbm_ratio():.3f}x"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
