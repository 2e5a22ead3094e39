"""The published Blackwell training rows the out-of-corpus check (experiments/validation/blackwell/check.py)
simulates: each one's source (experiments/validation/blackwell/sources.py: what each is), flag file, model preset,
cluster and measurement."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.validation.blackwell.sources import (
    BRIDGE_26_08,
    BRIDGE_BF16_NVL,
    BRIDGE_CARDS,
    BRIDGE_DENSE,
    BRIDGE_DGX,
    BRIDGE_DSV4,
    BRIDGE_FINETUNE,
    BRIDGE_HYBRID,
    BRIDGE_LATENT,
    BRIDGE_MUON,
    BRIDGE_QWEN3_NEXT,
    BRIDGE_ULTRA,
    MCORE_REPORT,
    MLM_PR_5728,
)
from simulator.report.megatron_flops import megatron_args, megatron_flops
from workloads.inputs.megatron import MegatronRun, parse_megatron_args
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import LayoutSpec

ROOT = Path(__file__).resolve().parents[3]
# LoRA as Megatron-Bridge's fine-tuning recipes run it (no Megatron-LM flag: layout fields; workloads/specs/peft.py)
LORA_QKV = LayoutSpec("megatron-args", peft="lora", lora_modules=("linear_qkv",))
# DeepSeek-V4's Blackwell recipes fuse mHC's kernels (use_fused_mhc: no Megatron-LM flag; LayoutSpec.fused_mhc)
FUSED_MHC = LayoutSpec("megatron-args", fused_mhc=True)


@dataclass(frozen=True)
class BlackwellRow:
    """One published row: the flag file that rebuilds its recipe, the model preset, the cluster and the measurement."""

    name: str  # examples/megatron/<name>.sh
    model: str  # examples/models/<model>.json (a config.json), or <model>.yaml (a moesim model file)
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
        models = ROOT / "examples" / "models"
        model = models / f"{self.model}.json"
        return job.resolve(load_model(model if model.exists() else models / f"{self.model}.yaml"), self.layout)

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
    # dispatcher in the way, the Blackwell GEMM tables and the FP4 curve alone; FP8 current scaling at PP 1 and MBS 2
    # under Megatron FSDP over all 64, the activations of 20 (GB300) or 40 (GB200) layers offloaded to host memory
    # (memory only: the copies are not timed)
    *_dense_rows(
        "llama3-70b",
        64,
        256,
        (
            ("gb300", "mxfp8", 4864),
            ("gb300", "nvfp4", 7296),
            ("gb200", "mxfp8", 3712),
            ("gb200", "nvfp4", 4864),
            ("gb300", "fp8", 5248),
            ("gb200", "fp8", 4224),
        ),
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
    # and 26.06's MXFP8 recipe on DGX-B300 (v0.5.0): the BF16 V2 config in MXFP8, nothing else changed
    BlackwellRow("bridge-b300-gpt-oss-120b-64-mxfp8", "gpt-oss-120b", "b300", 64, 1280, 4096, 18534, False, BRIDGE_DGX),
    BlackwellRow("bridge-b200-qwen3-30b-a3b-8-mxfp8", "qwen3-30b-a3b", "b200", 8, 512, 4096, 27136, False, BRIDGE_DGX),
    BlackwellRow("bridge-b300-qwen3-30b-a3b-8-mxfp8", "qwen3-30b-a3b", "b300", 8, 512, 4096, 30720, False, BRIDGE_DGX),
    # and 26.06's on DGX-B300 (v0.5.0): a full-iteration CUDA graph, EP overlap, the fused grouped MLP, FP8 attention
    BlackwellRow(
        "bridge-b300-qwen3-30b-a3b-8-mxfp8-fullcg", "qwen3-30b-a3b", "b300", 8, 512, 4096, 40769, True, BRIDGE_DGX
    ),
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
    # and 26.04.01's DGX-B200 row (v0.4.2, MBS 2): measured as the same release's DGX-GB200 row (32,768 both)
    BlackwellRow(
        "bridge-b200-nemotron-3-nano-8-mxfp8",
        "nemotron-3-nano-30b-a3b",
        "b200",
        8,
        512,
        8192,
        32768,
        False,
        BRIDGE_HYBRID,
    ),
    # 26.08's Nemotron 3.5 Lightning on 8 GB200: Nano's architecture with two MTP depths (one shared module)
    BlackwellRow(
        "bridge-gb200-nemotron-3.5-lightning-8-mxfp8",
        "nemotron-3-nano-30b-a3b",
        "gb200",
        8,
        512,
        8192,
        28672,
        True,
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
    # BRIDGE_MUON: Kimi K2 (1.04 T parameters, DeepSeek-V3's architecture with 384 experts) in MXFP8 on 256 GB300,
    # Muon's layer-wise distributed optimizer (workloads/specs/muon.py)
    BlackwellRow("bridge-gb300-kimi-k2-256-mxfp8", "kimi-k2", "gb300", 256, 4096, 4096, 5367, False, BRIDGE_MUON),
    # BRIDGE_LATENT: Nemotron 3 Super 120B-A12B (hybrid Mamba-2 / attention, latent MoE, 512 experts, top-22, 2 MTP
    # depths) on 64 GPUs, EP 64 in one NVLink domain, MXFP8 (cuDNN's FP8 attention) and NVFP4; TP 1 on GB300, 2 on GB200
    *(
        BlackwellRow(
            f"bridge-{gpu}-nemotron-3-super-64-{precision}",
            "nemotron-3-super-120b-a12b",
            gpu,
            64,
            512,
            8192,
            tokens,
            precision == "mxfp8",
            BRIDGE_LATENT,
        )
        for gpu, precision, tokens in (
            ("gb300", "mxfp8", 9856),
            ("gb300", "nvfp4", 10240),
            ("gb200", "mxfp8", 7040),
            ("gb200", "nvfp4", 7168),
            ("b300", "mxfp8", 7867),  # 26.06, on 8-GPU DGX-B300 nodes: EP 8 inside a node
            ("b300", "nvfp4", 8131),
            ("b200", "mxfp8", 6400),  # 26.04.01, on 8-GPU DGX-B200 nodes: EP 64 over 8 nodes, MXFP8 eager
            ("b200", "nvfp4", 5632),  # and NVFP4 at TP 2 with TE graphs: 0.88x the MXFP8 row measured
        )
    ),
    # BRIDGE_ULTRA: Nemotron 3 Ultra 550B-A55B (Super's architecture at 108 layers) on 256 GPUs, MXFP8, EP 64, Megatron
    # FSDP inside each 64-GPU NVLink domain and the optimizer state sharded across the 4 (workloads/specs/hybrid_dp.py);
    # TP 1 on GB300, 2 on GB200; the expert MLP's activation input offloaded to host memory (memory only)
    *(
        BlackwellRow(
            f"bridge-{gpu}-nemotron-3-ultra-256-mxfp8",
            "nemotron-3-ultra-550b-a55b",
            gpu,
            256,
            256,
            8192,
            tokens,
            False,
            BRIDGE_ULTRA,
        )
        for gpu, tokens in (("gb300", 3552), ("gb200", 2528))
    ),
    # BRIDGE_DSV4: DeepSeek-V4-Flash (284B-A13B) on 128 GPUs, MXFP8, TP 1, PP 1, EP 64 over one NVL72 domain, its hybrid
    # compressed attention and mHC (workloads/recipes/dsv4_attention.py, residual.py) with the recipe's fused mHC kernel
    *(
        BlackwellRow(
            f"{gpu}-deepseek-v4-flash-128",
            "deepseek-v4-flash",
            gpu,
            128,
            2048,
            4096,
            tokens,
            False,
            BRIDGE_DSV4,
            FUSED_MHC,
        )
        for gpu, tokens in (("gb300", 8224), ("gb200", 7776))
    ),
    # BRIDGE_BF16_NVL: GPT-OSS-120B's BF16 recipe (the DGX-B200 / B300 rows') on 64 GPUs of one NVL72 domain, EP 64
    *(
        BlackwellRow(
            f"bridge-{gpu}-gpt-oss-120b-64-bf16", "gpt-oss-120b", gpu, 64, 1280, 4096, tokens, False, BRIDGE_BF16_NVL
        )
        for gpu, tokens in (("gb300", 19200), ("gb200", 16640))
    ),
    # BRIDGE_CARDS: Super at TP 2, EP 64 (its card's 9,926 ms step: 6,602 tokens/s/GPU), Lightning at EP 8, MBS 2
    *(
        BlackwellRow(f"bridge-gb200-{name}-bf16", model, "gb200", gpus, 512, 8192, tokens, False, BRIDGE_CARDS)
        for name, model, gpus, tokens in (
            ("nemotron-3-super-64", "nemotron-3-super-120b-a12b", 64, 6602),
            ("nemotron-3.5-lightning-8", "nemotron-3-nano-30b-a3b", 8, 28750),
        )
    ),
    # BRIDGE_QWEN3_NEXT: PP 2 / VP 4 / EP 32 with HybridEP and TE graphs on GB300 (MBS 4) and GB200 (MBS 2), PP 1 / EP 64
    # with DeepEP over 8 DGX-B200 nodes (MBS 1), eager
    *(
        BlackwellRow(
            f"bridge-{gpu}-qwen3-next-80b-a3b-64-mxfp8",
            "qwen3-next-80b-a3b",
            gpu,
            64,
            1024,
            4096,
            tokens,
            False,
            BRIDGE_QWEN3_NEXT,
        )
        for gpu, tokens in (("gb300", 11328), ("gb200", 9856), ("b200", 4864))
    ),
)


def megatron_flops_per_token(row: BlackwellRow) -> float:
    """Megatron-LM's model FLOPs per token of the row's recipe (the count behind its TFLOP/s/GPU log line)."""
    run = row.job()
    return megatron_flops(megatron_args(run.model, run.layout, row.seq_len), 1, row.seq_len) / row.seq_len
