"""Out-of-corpus check on Blackwell: the published GB300 / GB200 MoE training rows against the simulator.

No Blackwell run is in the validation corpus (``moesim validate``): these rows are not cases, they are not in any
MAPE and nothing is fitted on them. They are the only published end-to-end Blackwell training throughputs of the
MoE models moesim ships, so this prints, per row, what the Blackwell kernel tables (simulator/costs/generations.py)
predict beside what was measured, where one micro-batch of the busiest stage goes (experiments/common/stage_costs.py),
and the same at compute_residual 1 (issue 40 item 4: the residual was fitted on H800 MegaScale-MoE; whether it
belongs on Blackwell is read off the two columns, not fitted).

Rows: NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md, "26.08 NeMo Container", pre-training, MXFP8,
DGX-GB300 and DGX-GB200 (tokens / sec / GPU). Recipes: the same commit's src/megatron/bridge/perf_recipes/<family>/
<system>/*.py, written as Megatron-LM flags in examples/megatron/gb300-*.sh and gb200-*.sh (what Megatron-LM has no
flag for is named in each file's header: fp8_dot_product_attention, NVTE_CUTEDSL_FUSED_GROUPED_MLP, fp8_output_proj).
Of those, fp8_dot_product_attention is simulated: a row whose recipe sets it runs with attention_backend "cudnn-fp8"
(cuDNN's published FP8 attention, simulator/costs/blackwell_tables.py). TE runs FP8 attention with a sliding window
and GPT-OSS's learnable softmax on SM100 with cuDNN >= 9.21 (NVIDIA/TransformerEngine@d0067d0d transformer_engine/
pytorch/attention/dot_product_attention/utils.py get_attention_backend); cuDNN 9.19's GB200 run of GPT-OSS's shape
times its FP8 sliding-window backward at 2-20x the simulated (tests/paper/test_blackwell_check.py), so the GPT-OSS
rows' attention is a lower bound.

Rows whose memory the simulator refuses (peak over HBM) are simulated with allow_oom and marked: the memory model of
these recipes (paged stash, capacity-factor buffers) is outside this check.

Rows of a second source: NVIDIA/Megatron-LM PR #5728 ("docs: refresh Qwen3 MoE recipe performance", 2026-07-09, open
at the time of writing), the median model TFLOP/s/GPU of iterations 30-45 of Megatron-LM's Qwen3 MoE recipes,
NVIDIA/Megatron-LM@71464846 (dev) examples/moe_recipes/qwen3_{235b,30b}/{gb200,gb300}/*.yaml, written as flags in
examples/megatron/mlm-*.sh (the PR measured them with the matching Megatron-Bridge recipes, NVIDIA-NeMo/Megatron-Bridge
#4469, at the YAMLs' GPU count, parallelism, batch, sequence, precision and CUDA graph mode). Model TFLOP/s/GPU is converted to tokens/s/GPU with Megatron's own FLOP count
(simulator/report/megatron_flops.py; 148.03 GFLOP per token for Qwen3-235B-A22B, 23.006 for Qwen3-30B-A3B at 4,096
tokens). Every flag of these recipes is a flag of the Megatron-LM commit the parser is pinned to (d98e8a64); those
moesim does not model are named in each file's header. None sets TE's FP8 attention (no Megatron-LM flag for it).

Rows of a third source: NVIDIA's Megatron-Core MoE report (arXiv 2603.07685v1, 2026-03-08), Table 11 (tokens/s/GPU,
Megatron-Core v0.16, force-balanced routing) with each row's recipe from Table 20 and Appendix B.2 (dispatcher,
recompute, 1F1B overlap, CUDA-graph scopes), written as flags in examples/megatron/mcore-*.sh; what the report names
but no flag expresses (activation and optimizer-state offloading, CPU/NUMA binding) is named in each file's header
(docs/mcore-report-anchors.md). With them the report's one measured CUDA-graph gain on a stated recipe: partial
graphs (attn, moe_router, moe_preprocess) "achieve 10% end-to-end speedup with about 7 GB extra memory on DeepSeek-V3
GB200 training" (Sec. 4.3.6), the GB200 row's recipe simulated with and without its graphs (``partial_graph_gain``).
Rows of a fourth source, dense: Megatron-Bridge's Llama 3 70B pre-training on 64 DGX-GB300 / DGX-GB200 GPUs, MXFP8
and NVFP4 ("26.04.01 NeMo Container" in docs/performance-summary-archive.md at 4ab94dfa; recipes at the release's tag
v0.4.2, written as flags in examples/megatron/bridge-{gb300,gb200}-llama3-70b-64-*.sh; the FP8 rows of that table run
Megatron FSDP with CPU offloading, not modelled), and its Llama 3.1 405B on 256, FP8 current scaling, MXFP8 and
NVFP4 ("26.06 NeMo Container" in docs/performance-summary.md at v0.5.0, its recipes; bridge-*-llama3.1-405b-256-*.sh):
no expert, dispatcher or routing, so they test the Blackwell GEMM and attention tables alone, and the NVFP4 / MXFP8
pairs test the FP4 curve. Rows of a fifth source, on 8-GPU DGX-B200 / DGX-B300 nodes over InfiniBand: Megatron-Bridge's
GPT-OSS-120B in BF16 on 64 and Qwen3-30B-A3B in MXFP8 on 8 ("26.04.01 NeMo Container", recipes at v0.4.2;
bridge-{b200,b300}-gpt-oss-120b-64-bf16.sh, bridge-{b200,b300}-qwen3-30b-a3b-8-mxfp8.sh), and DeepSeek-V3 in MXFP8 on
256 (DGX-B200: 26.04.01, v0.4.2; DGX-B300: "26.06 NeMo Container", v0.5.0; bridge-{b200,b300}-deepseek-v3-256-mxfp8.sh)
and Qwen3-235B-A22B in MXFP8 on 256 (26.04.01; bridge-{b200,b300}-qwen3-235b-a22b-256-mxfp8.sh).

Rows of a sixth source: the hybrid Nemotron 3 Nano in MXFP8 on 8 GPUs, 26.08's DGX-GB300 row (its recipe at 067f987d,
examples/megatron/gb300-nemotron-3-nano-8.sh) and 26.06's DGX-GB200 and DGX-B300 rows (recipes at v0.5.0,
bridge-{gb200,b300}-nemotron-3-nano-8-mxfp8.sh): its Mamba-2 scan at the rate workloads/recipes/mamba.py assumes.

Rows of a seventh source: Megatron-Bridge 26.06's Llama 3 70B fine-tuning on DGX-GB300 / DGX-GB200 (archive at 4ab94dfa,
recipes at v0.5.0; bridge-{gb300,gb200}-llama3-70b-{sft-32,lora-8}-{fp8,mxfp8}.sh): SFT on 32 GPUs and LoRA on 8
(``layout``: peft lora, rank 32 on linear_qkv as the recipes set; workloads/specs/peft.py), packed SQuAD sequences
timed as whole causal ones.

``python -m experiments.validation.blackwell.check`` prints the table, one block per source.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from experiments.common.stage_costs import StageCosts, busiest_stage, per_micro_batch
from experiments.validation.blackwell.kernels import (
    CUBLASLT_FP4_TFLOPS,
    TE_B300_MXFP8_QUANT_S,
    TORCHAO_GROUPED_S,
    cublaslt_fp4_simulated_tflops,
    te_b300_mxfp8_quantization_s,
    torchao_grouped_simulated_s,
)
from simulator.costs.calibration import (
    DEFAULT_CALIBRATION,
    UNFITTED_CALIBRATION,
    Calibration,
)
from simulator.engine.timing import task_timer
from simulator.report.megatron_flops import megatron_args, megatron_flops
from simulator.report.simulate import prepare, simulate
from simulator.streams.op_costs import host_launch_per_kernel_s, launch_times_s
from workloads.inputs.megatron import MegatronRun, parse_megatron_args
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import LayoutSpec

ROOT = Path(__file__).resolve().parents[3]
BRIDGE_26_08 = "NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md, 26.08 container, MXFP8"
MLM_PR_5728 = "NVIDIA/Megatron-LM PR #5728 (2026-07-09), recipes examples/moe_recipes@71464846, model TFLOP/s/GPU"
MCORE_REPORT = "NVIDIA Megatron-Core MoE report, arXiv 2603.07685v1 Table 11 (recipes Table 20, App. B.2), tokens/s/GPU"
BRIDGE_DENSE = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, 26.04.01 (70B) and 26.06 (405B), dense"
BRIDGE_DGX = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, 26.04.01 and 26.06, DGX-B200 / DGX-B300"
BRIDGE_HYBRID = (
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, 26.06 and 26.08, MXFP8, hybrid (Nemotron 3 Nano)"
)
BRIDGE_FINETUNE = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, 26.06, Llama 3 70B SFT and LoRA"
SOURCES = (BRIDGE_26_08, MLM_PR_5728, MCORE_REPORT, BRIDGE_DENSE, BRIDGE_DGX, BRIDGE_HYBRID, BRIDGE_FINETUNE)
# LoRA as Megatron-Bridge's fine-tuning recipes run it (no Megatron-LM flag: layout fields; workloads/specs/peft.py)
LORA_QKV = LayoutSpec("megatron-args", peft="lora", lora_modules=("linear_qkv",))


@dataclass(frozen=True)
class BlackwellRow:
    """One published row: the flag file that rebuilds its recipe, the model preset, the cluster and the measurement."""

    name: str  # examples/megatron/<name>.sh
    model: str  # examples/models/<model>.json
    cluster: str
    gpus: int
    global_batch: int
    seq_len: int
    measured: float  # in the source's unit: Megatron's model TFLOP/s/GPU (MLM_PR_5728), else tokens/s/GPU
    # the recipe's mixed_precision.fp8_dot_product_attention (no Megatron-LM flag): cuDNN's FP8 attention
    fp8_attention: bool
    source: str = BRIDGE_26_08
    layout: LayoutSpec | None = None  # the fields Megatron-LM has no flag for (LoRA), None: Megatron's defaults

    def job(self) -> MegatronRun:
        """The flag file's Megatron job resolved on the model preset (and the row's layout fields)."""
        job = parse_megatron_args(ROOT / "examples" / "megatron" / f"{self.name}.sh")
        return job.resolve(load_model(ROOT / "examples" / "models" / f"{self.model}.json"), self.layout)

    @property
    def measured_tokens_per_s_per_gpu(self) -> float:
        """The measurement in tokens/s/GPU: model TFLOP/s/GPU over Megatron's FLOPs per token of the recipe."""
        if self.source != MLM_PR_5728:
            return self.measured
        return self.measured * 1e12 / megatron_flops_per_token(self)


def _dense_rows(name: str, gpus: int, batch: int, rows: tuple[tuple[str, str, int], ...]) -> tuple[BlackwellRow, ...]:
    """Megatron-Bridge's dense Llama rows of BRIDGE_DENSE: (GPU, precision, tokens/s/GPU) each, flag file
    examples/megatron/bridge-<gpu>-<name>-<gpus>-<precision>.sh, model examples/models/llama-<3.1 size>.json."""
    model = "llama-3.1-" + name.split("-")[-1]
    return tuple(
        BlackwellRow(f"bridge-{gpu}-{name}-{gpus}-{p}", model, gpu, gpus, batch, 8192, tokens, False, BRIDGE_DENSE)
        for gpu, p, tokens in rows
    )


ROWS: tuple[BlackwellRow, ...] = (
    BlackwellRow("gb300-deepseek-v3-256", "deepseek-v3", "gb300", 256, 4096, 4096, 6288, True),
    BlackwellRow("gb200-deepseek-v3-256", "deepseek-v3", "gb200", 256, 4096, 4096, 4912, False),
    BlackwellRow("gb300-gpt-oss-120b-64", "gpt-oss-120b", "gb300", 64, 1280, 4096, 33024, True),
    BlackwellRow("gb200-gpt-oss-120b-64", "gpt-oss-120b", "gb200", 64, 1280, 4096, 28672, True),
    BlackwellRow("gb300-qwen3-30b-a3b-8", "qwen3-30b-a3b", "gb300", 8, 512, 4096, 44544, True),
    BlackwellRow("gb200-qwen3-30b-a3b-8", "qwen3-30b-a3b", "gb200", 8, 512, 4096, 39936, True),
    BlackwellRow("gb300-qwen3-235b-a22b-256", "qwen3-235b-a22b", "gb300", 256, 8192, 4096, 8816, True),
    BlackwellRow("gb200-qwen3-235b-a22b-256", "qwen3-235b-a22b", "gb200", 256, 8192, 4096, 7280, True),
    # MLM_PR_5728: Qwen3-235B-A22B on 128 GPUs (EP 64, 8,192 x 4,096 tokens), Qwen3-30B-A3B on 16 (EP 16, 512 x 4,096)
    *(
        BlackwellRow(name, "qwen3-235b-a22b", cluster, 128, 8192, 4096, tflops, False, MLM_PR_5728)
        for name, cluster, tflops in (
            ("mlm-gb200-qwen3-235b-a22b-128-full-cg", "gb200", 1208.3),
            ("mlm-gb200-qwen3-235b-a22b-128-partial-cg", "gb200", 876.2),
            ("mlm-gb300-qwen3-235b-a22b-128-full-cg", "gb300", 1396.1),
        )
    ),
    *(
        BlackwellRow(name, "qwen3-30b-a3b", "gb200", 16, 512, 4096, tflops, False, MLM_PR_5728)
        for name, tflops in (
            ("mlm-gb200-qwen3-30b-a3b-16-bf16", 504.2),
            ("mlm-gb200-qwen3-30b-a3b-16-partial-cg", 480.3),
            ("mlm-gb200-qwen3-30b-a3b-16-paged-stash", 598.1),
        )
    ),
    # MCORE_REPORT: Table 11's Blackwell rows (the H100 rows are other recipes of corpus cases' models, not added)
    BlackwellRow("mcore-gb300-deepseek-v3-256", "deepseek-v3", "gb300", 256, 8192, 4096, 4730, False, MCORE_REPORT),
    BlackwellRow("mcore-gb200-deepseek-v3-256", "deepseek-v3", "gb200", 256, 8192, 4096, 4020, False, MCORE_REPORT),
    BlackwellRow(
        "mcore-gb200-deepseek-v3-256-bf16", "deepseek-v3", "gb200", 256, 4096, 4096, 3298, False, MCORE_REPORT
    ),
    BlackwellRow(
        "mcore-gb300-qwen3-235b-a22b-256", "qwen3-235b-a22b", "gb300", 256, 3072, 4096, 6583, False, MCORE_REPORT
    ),
    BlackwellRow(
        "mcore-gb200-qwen3-235b-a22b-256", "qwen3-235b-a22b", "gb200", 256, 3072, 4096, 6212, False, MCORE_REPORT
    ),
    BlackwellRow(
        "mcore-gb200-qwen3-235b-a22b-256-bf16", "qwen3-235b-a22b", "gb200", 256, 8192, 4096, 5100, False, MCORE_REPORT
    ),
    BlackwellRow(
        "mcore-gb300-qwen3-235b-a22b-128-128k", "qwen3-235b-a22b", "gb300", 128, 1024, 131072, 1556, False, MCORE_REPORT
    ),
    # BRIDGE_DENSE: Llama 3 70B on 64 GPUs, MXFP8 and NVFP4 (PP 4, VP 5; TP 1 on GB300, 2 on GB200): no expert or
    # dispatcher in the way, the Blackwell GEMM tables and the FP4 curve alone (the FP8 rows of the same table run
    # Megatron FSDP with CPU offloading, not modelled)
    *_dense_rows(
        "llama3-70b",
        64,
        256,
        (("gb300", "mxfp8", 4864), ("gb300", "nvfp4", 7296), ("gb200", "mxfp8", 3712), ("gb200", "nvfp4", 4864)),
    ),
    # and Llama 3.1 405B on 256 GPUs (26.06), FP8 current scaling, MXFP8 and NVFP4 (PP 8 on GB300, 16 on GB200)
    *_dense_rows(
        "llama3.1-405b",
        256,
        1536,
        (
            ("gb300", "fp8", 1048),
            ("gb300", "mxfp8", 952),
            ("gb300", "nvfp4", 1413),
            ("gb200", "fp8", 843),
            ("gb200", "mxfp8", 783),
            ("gb200", "nvfp4", 1166),
        ),
    ),
    # BRIDGE_DGX: 8-GPU DGX nodes over InfiniBand, not NVL72 (26.04.01's recipes at v0.4.2): GPT-OSS-120B in BF16 on 64,
    # EP 8 inside a node, PP 1, MBS 4 (the same recipe function as the H100 corpus case's, PP 4 and MBS 1 there), and
    # Qwen3-30B-A3B in MXFP8 on one node, EP 8, HybridEP
    BlackwellRow("bridge-b200-gpt-oss-120b-64-bf16", "gpt-oss-120b", "b200", 64, 1280, 4096, 13568, False, BRIDGE_DGX),
    BlackwellRow("bridge-b300-gpt-oss-120b-64-bf16", "gpt-oss-120b", "b300", 64, 1280, 4096, 15232, False, BRIDGE_DGX),
    BlackwellRow("bridge-b200-qwen3-30b-a3b-8-mxfp8", "qwen3-30b-a3b", "b200", 8, 512, 4096, 27136, False, BRIDGE_DGX),
    BlackwellRow("bridge-b300-qwen3-30b-a3b-8-mxfp8", "qwen3-30b-a3b", "b300", 8, 512, 4096, 30720, False, BRIDGE_DGX),
    # DeepSeek-V3 in MXFP8 on 256: DGX-B200 (26.04.01, v0.4.2: PP 8, VP 2, EP 32 over 4 nodes, DeepEP, EP overlap) and
    # DGX-B300 (26.06, v0.5.0: PP 8, EP 8 inside a node, HybridEP); TE graphs on both
    BlackwellRow("bridge-b200-deepseek-v3-256-mxfp8", "deepseek-v3", "b200", 256, 4096, 4096, 3328, False, BRIDGE_DGX),
    BlackwellRow("bridge-b300-deepseek-v3-256-mxfp8", "deepseek-v3", "b300", 256, 4096, 4096, 3541, False, BRIDGE_DGX),
    # Qwen3-235B-A22B in MXFP8 on 256 (26.04.01): PP 8, EP 8 inside a node, no graphs; alltoall on B200, HybridEP on B300
    BlackwellRow(
        "bridge-b200-qwen3-235b-a22b-256-mxfp8", "qwen3-235b-a22b", "b200", 256, 8192, 4096, 3776, False, BRIDGE_DGX
    ),
    BlackwellRow(
        "bridge-b300-qwen3-235b-a22b-256-mxfp8", "qwen3-235b-a22b", "b300", 256, 8192, 4096, 5936, False, BRIDGE_DGX
    ),
    # BRIDGE_HYBRID: the hybrid Mamba-2 / attention / MoE model (workloads/recipes/mamba.py): 26.08's GB300 row (its
    # recipe sets fp8_dot_product_attention) and 26.06's DGX-GB200 and DGX-B300 rows (recipes at v0.5.0)
    BlackwellRow(
        "gb300-nemotron-3-nano-8", "nemotron-3-nano-30b-a3b", "gb300", 8, 512, 8192, 39936, True, BRIDGE_HYBRID
    ),
    BlackwellRow(
        "bridge-gb200-nemotron-3-nano-8-mxfp8",
        "nemotron-3-nano-30b-a3b",
        "gb200",
        8,
        512,
        8192,
        33522,
        False,
        BRIDGE_HYBRID,
    ),
    BlackwellRow(
        "bridge-b300-nemotron-3-nano-8-mxfp8",
        "nemotron-3-nano-30b-a3b",
        "b300",
        8,
        512,
        8192,
        37316,
        False,
        BRIDGE_HYBRID,
    ),
    # BRIDGE_FINETUNE: Llama 3 70B fine-tuned on packed 4,096-token SQuAD sequences (timed as whole causal ones),
    # FP8 current scaling and MXFP8, TE graphs on the MLPs: SFT on 32 GPUs, LoRA (rank 32, linear_qkv) on 8
    *(
        BlackwellRow(
            f"bridge-{gpu}-llama3-70b-{task}-{gpus}-{precision}",
            "llama-3.1-70b",
            gpu,
            gpus,
            32,
            4096,
            tokens,
            False,
            BRIDGE_FINETUNE,
            LORA_QKV if task == "lora" else None,
        )
        for gpu, task, gpus, precision, tokens in (
            ("gb300", "sft", 32, "fp8", 4819),
            ("gb300", "sft", 32, "mxfp8", 4312),
            ("gb200", "sft", 32, "fp8", 3864),
            ("gb200", "sft", 32, "mxfp8", 3593),
            ("gb300", "lora", 8, "fp8", 7481),
            ("gb300", "lora", 8, "mxfp8", 7447),
            ("gb200", "lora", 8, "fp8", 6206),
            ("gb200", "lora", 8, "mxfp8", 5958),
        )
    ),
)


def megatron_flops_per_token(row: BlackwellRow) -> float:
    """Megatron-LM's model FLOPs per token of the row's recipe (the count behind its TFLOP/s/GPU log line)."""
    run = row.job()
    return megatron_flops(megatron_args(run.model, run.layout), 1, row.seq_len) / row.seq_len


@dataclass(frozen=True)
class RowResult:
    """A row simulated at a calibration: throughput, whether memory was over HBM, the busiest stage's costs."""

    row: BlackwellRow
    tokens_per_s_per_gpu: float
    over_hbm: bool
    costs: StageCosts

    @property
    def error(self) -> float:
        """Simulated / measured - 1 (< 0: the simulator is slow)."""
        return self.tokens_per_s_per_gpu / self.row.measured_tokens_per_s_per_gpu - 1


def row_recipe(row: BlackwellRow):
    """The row's model and layout as simulated: its flag file's, with cuDNN's FP8 attention where the recipe sets it."""
    run = row.job()
    return run.model, run.layout.with_(attention_backend="cudnn-fp8") if row.fp8_attention else run.layout


@cache
def simulate_row(row: BlackwellRow, calibration: Calibration = DEFAULT_CALIBRATION) -> RowResult:
    """The row's recipe simulated on its cluster (allow_oom: the memory verdict is reported, not enforced); once per
    row and calibration in a process (the table, the ratios and the tests ask again)."""
    model, layout = row_recipe(row)
    sizes = (row.global_batch, row.seq_len)
    workload, cluster, over_hbm = prepare(model, layout, row.gpus, row.cluster, *sizes, None, True, calibration)
    rate = row_report(row, calibration, model, layout).tokens_per_s_per_gpu
    return RowResult(row, rate, over_hbm, busiest_stage(workload, cluster, calibration))


def row_report(row: BlackwellRow, calibration: Calibration = DEFAULT_CALIBRATION, model=None, layout=None):
    """The row's simulated report (its own recipe unless ``model`` and ``layout`` are given; allow_oom: ``oom`` says
    whether the peak exceeds HBM, the step is simulated either way)."""
    if model is None:
        model, layout = row_recipe(row)
    return simulate(
        model,
        layout,
        row.gpus,
        cluster=row.cluster,
        global_batch=row.global_batch,
        seq_len=row.seq_len,
        calibration=calibration,
        allow_oom=True,
    )


# Sec. 4.3.6 of the report: partial CUDA graphs (attn, moe_router, moe_preprocess) "achieve 10% end-to-end speedup with
# about 7 GB extra memory on DeepSeek-V3 GB200 training"; Table 17 / Appendix B.2 give that run's recipe (the
# mcore-gb200-deepseek-v3-256 row). The gain is read as eager step / graphed step.
REPORT_PARTIAL_GRAPH_GAIN = 1.10
PARTIAL_GRAPH_ROW = "mcore-gb200-deepseek-v3-256"


@dataclass(frozen=True)
class GraphGain:
    """A row simulated with its CUDA graphs and eagerly: the gain, and the eager host of its busiest stage."""

    graphed: float  # tokens/s/GPU
    eager: float
    eager_launches: float  # host launches per micro-batch of the eager busiest stage
    eager_host_s: float  # their host time per micro-batch
    measured_micro_batch_s: float  # the measured step over the micro-batches each stage runs

    @property
    def simulated(self) -> float:
        return self.graphed / self.eager

    @property
    def bound_per_kernel_s(self) -> float:
        """The host time per eager launch at which the eager stage's launches alone take the measured micro-batch
        time times the measured gain: the least per-kernel cost at which the host could make that gain."""
        return REPORT_PARTIAL_GRAPH_GAIN * self.measured_micro_batch_s / self.eager_launches


def partial_graph_gain(calibration: Calibration = DEFAULT_CALIBRATION) -> GraphGain:
    """The report's DeepSeek-V3 GB200 row simulated with its partial CUDA graphs and without any (eager), with the
    eager host launches of the stage that issues the most (the first the host would bind)."""
    row = next(row for row in ROWS if row.name == PARTIAL_GRAPH_ROW)
    run = row.job()
    eager = run.layout.with_(cuda_graph_scope=())
    rates = [row_report(row, calibration, run.model, layout).tokens_per_s_per_gpu for layout in (run.layout, eager)]
    sizes = (row.global_batch, row.seq_len)
    workload, cluster, _ = prepare(run.model, eager, row.gpus, row.cluster, *sizes, None, True, calibration)
    timer = task_timer(workload, cluster, calibration)
    host_s = max(
        sum(
            share * sum(launch_times_s(tuple(t.op for t in timer(stage, kind).ops), calibration, cluster.gpu))
            for kind, share in per_micro_batch(workload, stage).items()
        )
        for stage in range(workload.pp)
    )
    launches = host_s / host_launch_per_kernel_s(calibration, cluster.gpu)
    step_s = row.global_batch * row.seq_len / (row.measured_tokens_per_s_per_gpu * row.gpus)
    return GraphGain(rates[0], rates[1], launches, host_s, step_s / workload.schedule.micro_batches)


def _row_lines(row: BlackwellRow) -> str:
    """One row: measured, simulated and the error at the fitted residual and at 1, then its busiest stage's costs."""
    fitted, unfitted = simulate_row(row), simulate_row(row, UNFITTED_CALIBRATION)
    oom = "  (over HBM: allow_oom)" if fitted.over_hbm else ""
    return (
        f"{row.name:40} {row.measured_tokens_per_s_per_gpu:9,.0f} {fitted.tokens_per_s_per_gpu:9,.0f} "
        f"{fitted.error:+7.1%} {unfitted.tokens_per_s_per_gpu:9,.0f} {unfitted.error:+7.1%}{oom}\n"
        f"  stage {fitted.costs.stage}, one micro-batch: {fitted.costs.phrase()}"
    )


def table() -> str:
    """Measured against simulated per row, at the fitted residual and at 1, with the busiest stage's costs."""
    lines = ["tokens/s/GPU, out of the corpus: no Blackwell run is in `moesim validate`"]
    for source in SOURCES:
        lines.append(source)
        lines.append(f"{'row':40} {'measured':>9} {'simulated':>9} {'error':>7} {'resid. 1':>9} {'error':>7}")
        lines.extend(_row_lines(row) for row in ROWS if row.source == source)
    gain = partial_graph_gain()
    lines.append(
        f"partial CUDA graphs on {PARTIAL_GRAPH_ROW} (report Sec. 4.3.6): measured {REPORT_PARTIAL_GRAPH_GAIN:.2f}x, "
        f"simulated {gain.simulated:.3f}x; eager, the stage issuing the most launches {gain.eager_launches:,.0f} kernels "
        f"in {gain.eager_host_s * 1e3:.1f} ms per micro-batch (measured micro-batch {gain.measured_micro_batch_s * 1e3:.0f}"
        f" ms): the host makes the gain only at >= {gain.bound_per_kernel_s * 1e6:.0f} us per kernel"
    )
    quant_s = te_b300_mxfp8_quantization_s()
    lines.append(
        f"TE's MXFP8 quantization on B300 (gemm_profiling, one layer): measured {TE_B300_MXFP8_QUANT_S * 1e3:.3f} ms, "
        f"simulated {quant_s * 1e3:.3f} ms ({quant_s / TE_B300_MXFP8_QUANT_S - 1:+.1%})"
    )
    grouped_s = torchao_grouped_simulated_s()
    lines.append(
        f"torchao's MXFP8 grouped GEMM on B200 (torch._scaled_grouped_mm, 8 x 16,384 rows, not TE's kernel): measured "
        f"{TORCHAO_GROUPED_S * 1e6:.1f} us, moesim's TE MXFP8 curve {grouped_s * 1e6:.1f} us "
        f"({grouped_s / TORCHAO_GROUPED_S - 1:+.1%})"
    )
    fp4 = cublaslt_fp4_simulated_tflops()
    lines.append(
        "cuBLASLt's FP4 GEMM on B200 (DeepGEMM #348, MXFP4 scales), TFLOP/s measured / moesim's NVFP4 curve: "
        + ", ".join(
            f"{m}x{n}x{k} {tflops:,.0f} / {fp4[(m, n, k)]:,.0f}" for (m, n, k), tflops in CUBLASLT_FP4_TFLOPS.items()
        )
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
