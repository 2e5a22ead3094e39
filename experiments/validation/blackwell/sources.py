"""Where the out-of-corpus Blackwell rows (experiments/validation/blackwell/rows.py) come from: one label a source,
and what each source is.

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
and NVFP4, and FP8 current scaling under Megatron FSDP with the activations of 20 / 40 layers offloaded to host
memory ("26.04.01 NeMo Container" in docs/performance-summary-archive.md at 4ab94dfa; recipes at the release's tag
v0.4.2, written as flags in examples/megatron/bridge-{gb300,gb200}-llama3-70b-64-*.sh), and its Llama 3.1 405B on 256, FP8 current scaling, MXFP8 and
NVFP4 ("26.06 NeMo Container" in docs/performance-summary.md at v0.5.0, its recipes; bridge-*-llama3.1-405b-256-*.sh):
no expert, dispatcher or routing, so they test the Blackwell GEMM and attention tables alone, and the NVFP4 / MXFP8
pairs test the FP4 curve. Rows of a fifth source, on 8-GPU DGX-B200 / DGX-B300 nodes over InfiniBand: Megatron-Bridge's
GPT-OSS-120B in BF16 on 64 and Qwen3-30B-A3B in MXFP8 on 8 ("26.04.01 NeMo Container", recipes at v0.4.2;
bridge-{b200,b300}-gpt-oss-120b-64-bf16.sh, bridge-{b200,b300}-qwen3-30b-a3b-8-mxfp8.sh), and DeepSeek-V3 in MXFP8 on
256 (DGX-B200: 26.04.01, v0.4.2; DGX-B300: "26.06 NeMo Container", v0.5.0; bridge-{b200,b300}-deepseek-v3-256-mxfp8.sh)
and Qwen3-235B-A22B in MXFP8 on 256 (26.04.01; bridge-{b200,b300}-qwen3-235b-a22b-256-mxfp8.sh), and GPT-OSS-120B's
BF16 recipe in MXFP8 on DGX-B300 ("26.06 NeMo Container", v0.5.0; bridge-b300-gpt-oss-120b-64-mxfp8.sh), and 26.06's
Qwen3-30B-A3B recipe on DGX-B300 (v0.5.0; bridge-b300-qwen3-30b-a3b-8-mxfp8-fullcg.sh: a full-iteration CUDA graph,
EP overlap and the fused grouped MLP where 26.04.01's ran partial graphs, measured 1.33x it on the same GPU).

Rows of a sixth source: the hybrid Nemotron 3 Nano in MXFP8 on 8 GPUs, 26.08's DGX-GB300 row (its recipe at 067f987d,
examples/megatron/gb300-nemotron-3-nano-8.sh), 26.06's DGX-GB200 and DGX-B300 rows (recipes at v0.5.0,
bridge-{gb200,b300}-nemotron-3-nano-8-mxfp8.sh) and 26.04.01's DGX-B200 row (v0.4.2,
bridge-b200-nemotron-3-nano-8-mxfp8.sh): its Mamba-2 scan at the rate workloads/recipes/mamba.py assumes. With them
26.08's Nemotron 3.5 Lightning on 8 DGX-GB200 ("the same architecture as Nemotron 3 Nano", trained with two MTP
depths: bridge-gb200-nemotron-3.5-lightning-8-mxfp8.sh on Nano's model file).

Rows of a seventh source: Megatron-Bridge 26.06's Llama 3 70B fine-tuning on DGX-GB300 / DGX-GB200 (archive at 4ab94dfa,
recipes at v0.5.0; bridge-{gb300,gb200}-llama3-70b-{sft-32,lora-8}-{fp8,mxfp8}.sh): SFT on 32 GPUs and LoRA on 8
(``layout``: peft lora, rank 32 on linear_qkv as the recipes set; workloads/specs/peft.py), packed SQuAD sequences
timed as whole causal ones.

Rows of an eighth source: Megatron-Bridge 26.06's Kimi K2 pre-training on 256 DGX-GB300 in MXFP8 ("Muon optimizer was
used for pre-training Kimi-K2"; recipe at v0.5.0, bridge-gb300-kimi-k2-256-mxfp8.sh): the Newton-Schulz GEMMs and
Muon's states (workloads/specs/muon.py) beside DeepSeek-V3's architecture at 384 experts: 5,367 tokens/s/GPU at v0.5.0
(5,372 in the archive's 26.06 table at 067f987d; 5,072 in 26.02.01, 5,332 in 26.04, 5,328 in 26.04.01).

Rows of a ninth source: Nemotron 3 Super 120B-A12B on 64 GPUs, MXFP8 and NVFP4: 26.08's DGX-GB300 / DGX-GB200 rows
(recipes at 067f987d, bridge-{gb300,gb200}-nemotron-3-super-64-{mxfp8,nvfp4}.sh), 26.06's DGX-B300 rows, EP 8 inside
each node (recipes at v0.5.0, bridge-b300-nemotron-3-super-64-{mxfp8,nvfp4}.sh), and 26.04.01's DGX-B200 rows, EP 64
over 8 nodes, MXFP8 eager and NVFP4 at TP 2 with TE graphs, NVFP4 measured 0.88x MXFP8 (recipes at v0.4.2,
bridge-b200-nemotron-3-super-64-{mxfp8,nvfp4}.sh); the model from Megatron-LM's own
flags, examples/models/nemotron-3-super-120b-a12b.yaml: the latent MoE (workloads/specs/models.py moe_latent_size) and
the hybrid model at 512 experts. The NVFP4 recipes run their last 14 layers in BF16 (--first-last-layers-bf16,
simulated) and keep the attention, the latent projections and the MTP modules in BF16 too (perf_recipes/nemotronh/
te_quant.cfg, no Megatron-LM flag: simulated in NVFP4).

Rows of a tenth source: 26.08's Nemotron 3 Ultra 550B-A55B on 256 DGX-GB300 / DGX-GB200 in MXFP8 (recipes at 067f987d,
bridge-{gb300,gb200}-nemotron-3-ultra-256-mxfp8.sh): Megatron FSDP sharded inside each 64-GPU NVLink domain, the
optimizer state across the four too (Hybrid-FSDP, --num-distributed-optimizer-instances 4, workloads/specs/hybrid_dp.py).

Rows of an eleventh source: 26.08's DeepSeek-V4-Flash on 128 DGX-GB300 / DGX-GB200 in MXFP8 (recipes at 067f987d,
{gb300,gb200}-deepseek-v4-flash-128.sh): the hybrid compressed attention (CSA with its indexer, HCA, a 128-key window)
and mHC's four residual streams, from the checkpoint's config.json (examples/models/deepseek-v4-flash.json).

Rows of a twelfth source: 26.04.01's GPT-OSS-120B in BF16 on 64 DGX-GB300 / DGX-GB200 (recipes at v0.4.2,
bridge-{gb300,gb200}-gpt-oss-120b-64-bf16.sh): the BF16 recipe of the DGX-B200 / DGX-B300 rows, eager but for TE's
partial graphs (GB300) or with EP overlap (GB200), EP 64 over the NVL72 domain with the alltoall dispatcher.

Rows of a thirteenth source: Megatron-Bridge's verification cards (067f987d, card.yaml pretrain_performance.GB200)
whose recipe no row above has, Nemotron 3 Super and 3.5 Lightning in BF16 (bridge-gb200-nemotron-*-bf16.sh). Of a
fourteenth: 26.04.01's Qwen3-Next-80B-A3B in MXFP8 on 64 GPUs (in the summary from 867af079 to 84ff628e, 2026-05-14 /
15; recipes at v0.4.2, bridge-{gb300,gb200,b200}-qwen3-next-80b-a3b-64-mxfp8.sh): Gated DeltaNet layers.
"""

from __future__ import annotations

BRIDGE_26_08 = "NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md, 26.08 container, MXFP8"
MLM_PR_5728 = "NVIDIA/Megatron-LM PR #5728 (2026-07-09), recipes examples/moe_recipes@71464846, model TFLOP/s/GPU"
MCORE_REPORT = "NVIDIA Megatron-Core MoE report, arXiv 2603.07685v1 Table 11 (recipes Table 20, App. B.2), tokens/s/GPU"
BRIDGE_DENSE = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, 26.04.01 (70B) and 26.06 (405B), dense"
BRIDGE_DGX = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, 26.04.01 and 26.06, DGX-B200 / DGX-B300"
BRIDGE_HYBRID = (
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, 26.04.01 to 26.08, MXFP8, hybrid (Nemotron 3 Nano)"
)
BRIDGE_FINETUNE = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, 26.06, Llama 3 70B SFT and LoRA"
BRIDGE_MUON = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md at v0.5.0, 26.06, Kimi K2 trained with Muon"
BRIDGE_LATENT = (
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, 26.04.01 to 26.08, Nemotron 3 Super (latent MoE)"
)
BRIDGE_ULTRA = "NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md, 26.08, Nemotron 3 Ultra (Hybrid-FSDP)"
BRIDGE_DSV4 = "NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md, 26.08, DeepSeekV4 Flash"
BRIDGE_BF16_NVL = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md, 26.04.01, GPT OSS 120B BF16 (NVL72)"
BRIDGE_CARDS = "NVIDIA-NeMo/Megatron-Bridge@067f987d examples/model_verification_cards, 2026-07, BF16 hybrids on GB200"
BRIDGE_QWEN3_NEXT = (
    "NVIDIA-NeMo/Megatron-Bridge@867af079 docs/performance-summary.md, 26.04.01, Qwen3-Next (Gated DeltaNet)"
)
SOURCES = (
    BRIDGE_26_08,
    MLM_PR_5728,
    MCORE_REPORT,
    BRIDGE_DENSE,
    BRIDGE_DGX,
    BRIDGE_HYBRID,
    BRIDGE_FINETUNE,
    BRIDGE_MUON,
    BRIDGE_LATENT,
    BRIDGE_ULTRA,
    BRIDGE_DSV4,
    BRIDGE_BF16_NVL,
    BRIDGE_CARDS,
    BRIDGE_QWEN3_NEXT,
)
