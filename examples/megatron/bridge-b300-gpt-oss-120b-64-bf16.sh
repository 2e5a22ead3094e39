# Megatron-LM arguments of Megatron-Bridge's BF16 GPT-OSS-120B pre-training job on 64 DGX-B300 (NVIDIA-NeMo/
# Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py
# GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2: TP 1, PP 1, EP 8, MBS 4, GBS 1280, the flex dispatcher's HybridEP
# backend (on 32 SMs: utils/overrides.py _set_common_perf_overrides), TE CUDA graphs over attn, moe_router and
# moe_preprocess, no recompute; gpt_oss_llm_pretrain.py
# gpt_oss_120b_pretrain_config_b300, the same function as the H100 case's, so its other flags are
# experiments/validation/cases/bridge-gpt-oss-120b-h100-0064.yaml's: precision-aware optimizer).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-B300, GPT OSS 120B, BF16:
# 15,232 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 4 --global-batch-size 1280 --seq-length 4096
--bf16 --swiglu --untie-embeddings-and-output-weights
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type none
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --use-precision-aware-optimizer --overlap-grad-reduce --overlap-param-gather
--grad-reduce-in-bf16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te
