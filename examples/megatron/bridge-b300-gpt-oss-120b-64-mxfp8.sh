# Megatron-LM arguments of Megatron-Bridge's MXFP8 GPT-OSS-120B pre-training job on 64 DGX-B300 (NVIDIA-NeMo/
# Megatron-Bridge v0.5.0 scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py
# GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2, which is the BF16 V2 config (bridge-b300-gpt-oss-120b-64-bf16.sh: TP 1,
# PP 1, EP 8, MBS 4, GBS 1280, HybridEP on 32 SMs, TE CUDA graphs over attn, moe_router and moe_preprocess, no
# recompute) in utils/precision.py fp8_mx, training/mixed_precision.py bf16_with_mxfp8_mixed (MXFP8 with FP8 parameter
# gather into the gradient buffer); no precision-aware optimizer (utils/overrides.py set_post_overrides sets it for BF16
# only)). Published: docs/performance-summary-archive.md (4ab94dfa), "26.06 NeMo Container", DGX-B300, GPT OSS 120B,
# MXFP8: 18,534 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 4 --global-batch-size 1280 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type none
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
--grad-reduce-in-bf16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te
