"""Attention shapes cuDNN's own training benchmark timed directly, where the per-head-dim tables only interpolate.

The attention tables (gemm_efficiency.py for Hopper, blackwell_tables.py for Blackwell) are measured at head dim 128
(and 64 / 256 on Hopper) without a window; a multi-latent attention op (query-key 192, value 128) is looked up at
head width 160 between them, and a sliding window at the non-causal length of the keys it walks
(simulator/costs/attention_cost.py). NVIDIA/cudnn-frontend's SDPA training benchmark (benchmark/sdpa_benchmark_training,
configs dsv3.py and gpt_oss.py) times both shapes themselves on an H200, a GB200 and a GB300, and they are not where
the interpolation puts them: at 4,096 to 16,384 tokens the tables time the MLA forward within 7% but its backward up
to 23% fast (the H200's), cuDNN's FP8 MLA 17-51% slow and the 128-key window 28-47% slow (at the benchmarks' clocks).

So for these shapes the table is corrected to the measurement: at each measured length by the ratio of the measured
efficiency to the table's, log-interpolated between lengths and held beyond the ends (attention_cost.measured_ratio),
so a measured length reproduces its time and a shorter one keeps the table's fall. Heads and batch only scale the
work (assumed: the benchmark's 128 heads at batch 1-2 fill the GPU as a training micro-batch does).

Backward variant: the MLA rows are cuDNN's deterministic backward, the only one the H200 run timed; Megatron-Bridge's
launcher forces it for DeepSeek models (NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, scripts/performance/perf_plugins.py since
NVIDIA-NeMo/Megatron-Bridge 8d709b2e, v0.4.0 to v0.5.0, a recipe variable at 067f987d), and on the GB200 and GB300 it is
within 5.3% of the non-deterministic one at 19 of 20 points (8.7% slower at one), so it serves both (assumed on
Hopper). The window rows are the non-deterministic backward (the deterministic is 25-30% slower there), the default
that GPT-OSS's recipes keep.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.hardware import GPU_PRESETS, GpuGeneration

_CUDNN_H200 = (
    "NVIDIA/cudnn-frontend@3929da2e benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn "
    "(cuDNN 9.19, backend 91901)"
)
_CUDNN_BLACKWELL = (
    "NVIDIA/cudnn-frontend@3929da2e benchmark/sdpa_benchmark_training/results/{dsv3,gpt_oss}/{gb200,gb300} "
    "20260424 (frontend 1.21.1, backend 92200)"
)


@dataclass(frozen=True)
class MeasuredShape:
    """One attention shape timed by cuDNN's benchmark on one GPU, causal, per sequence length: forward and backward
    milliseconds for ``batch`` sequences of ``heads`` query heads."""

    gpu: str  # the preset of the GPU it ran on (its BF16 peak turns times into efficiencies)
    family: str  # the kernel family it times: "cudnn" (BF16) or "cudnn-fp8" (its FP8 rows)
    head_dim: int
    head_dim_v: int
    window: int  # keys a query attends to; 0 = full causal
    batch: int
    heads: int
    seq_lens: tuple[int, ...]
    forward_ms: tuple[float, ...]
    backward_ms: tuple[float, ...]
    source: str


_SEQ_LENS = (2048, 4096, 8192, 16384, 32768)
# fmt: off
MEASURED_SHAPES: tuple[MeasuredShape, ...] = (
    # DeepSeek-V3's MLA (config dsv3: 128 heads, 192 / 128, top_left causal); H200 at batch 1 (its 16,384 and 32,768
    # runs ran out of memory), GB200 / GB300 at batch 2
    MeasuredShape("h200", "cudnn", 192, 128, 0, 1, 128, _SEQ_LENS[:3],
                  (0.330, 1.148, 4.278), (1.271, 4.424, 16.162), _CUDNN_H200),
    MeasuredShape("gb200", "cudnn", 192, 128, 0, 2, 128, _SEQ_LENS,
                  (0.321, 0.977, 3.470, 13.103, 50.456), (1.015, 3.301, 13.023, 50.136, 210.687), _CUDNN_BLACKWELL),
    MeasuredShape("gb300", "cudnn", 192, 128, 0, 2, 128, _SEQ_LENS,
                  (0.268, 0.864, 3.013, 11.178, 44.189), (0.935, 3.017, 10.887, 41.569, 175.497), _CUDNN_BLACKWELL),
    MeasuredShape("gb200", "cudnn-fp8", 192, 128, 0, 2, 128, _SEQ_LENS,
                  (0.207, 0.656, 2.294, 8.845, 35.942), (0.682, 2.108, 7.530, 29.760, 122.033), _CUDNN_BLACKWELL),
    MeasuredShape("gb300", "cudnn-fp8", 192, 128, 0, 2, 128, _SEQ_LENS,
                  (0.150, 0.493, 1.758, 6.653, 26.146), (0.592, 1.800, 6.181, 23.761, 94.596), _CUDNN_BLACKWELL),
    # GPT-OSS's sliding window (config gpt_oss: 128 keys, head dim 64, 128 heads, batch 2), BF16
    MeasuredShape("gb200", "cudnn", 64, 64, 128, 2, 128, _SEQ_LENS,
                  (0.109, 0.210, 0.414, 0.822, 2.634), (0.237, 0.465, 0.911, 1.818, 3.692), _CUDNN_BLACKWELL),
    MeasuredShape("gb300", "cudnn", 64, 64, 128, 2, 128, _SEQ_LENS,
                  (0.104, 0.202, 0.397, 0.790, 2.530), (0.227, 0.442, 0.862, 1.712, 3.450), _CUDNN_BLACKWELL),
    # the H200 run of the same config at its earlier 1,024-key window (64 query / 8 KV heads, batch 2)
    MeasuredShape("h200", "cudnn", 64, 64, 1024, 2, 64, _SEQ_LENS,
                  (0.166, 0.358, 0.738, 1.499, 3.021), (0.488, 1.042, 2.149, 4.392, 9.045), _CUDNN_H200),
)
# fmt: on


def measured_shape(
    family: str, head_dim: int, head_dim_v: int, window: int, generation: GpuGeneration
) -> MeasuredShape | None:
    """The measurement of this kernel family at these head widths and window on ``generation``, if one was published
    (a B200 takes the GB200's, a B300 the GB300's, as fractions of their peaks, as the attention tables do)."""
    for shape in MEASURED_SHAPES:
        same = (shape.family, shape.head_dim, shape.head_dim_v, shape.window) == (family, head_dim, head_dim_v, window)
        if same and GPU_PRESETS[shape.gpu].generation == generation:
            return shape
    return None
