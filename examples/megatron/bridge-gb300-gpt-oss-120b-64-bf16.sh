# Megatron-LM arguments of Megatron-Bridge's BF16 GPT-OSS-120B pre-training job on 64 DGX-GB300 (NVIDIA-NeMo/
# Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py
# GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2: TP 1, PP 1, EP 64 in the NVL72 domain, MBS 4, GBS 1280, the recipe's
# alltoall dispatcher (no flex backend set), TE CUDA graphs over attn, moe_router and moe_preprocess, no recompute;
# gpt_oss_llm_pretrain.py gpt_oss_120b_pretrain_config_gb300, the same recipe function as the H100 case's, so its other
# flags are experiments/validation/cases/bridge-gpt-oss-120b-h100-0064.yaml's: precision-aware optimizer).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-GB300, GPT OSS 120B, BF16:
# 19,200 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 4 --global-batch-size 1280 --seq-length 4096
--bf16 --swiglu --untie-embeddings-and-output-weights
--moe-token-dispatcher-type alltoall
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type none
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --use-precision-aware-optimizer --overlap-grad-reduce --overlap-param-gather
--grad-reduce-in-bf16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te
