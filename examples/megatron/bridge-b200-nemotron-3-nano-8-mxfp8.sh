# Megatron-LM arguments of Megatron-Bridge's MXFP8 Nemotron 3 Nano job on 8 DGX-B200 GPUs, the 26.04.01 NeMo container's
# recipe (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/nemotronh/
# nemotron_3_workload_base_configs.py NEMOTRON_3_NANO_PRETRAIN_CONFIG_B200_FP8_MX_V1: 8 GPUs, GBS 512, MBS 2, TP 1, ETP
# 1, EP 8, HybridEP, CUDA graphs transformer_engine on attn, mamba, moe_router and moe_preprocess;
# nemotron_3_llm_pretrain.py (BF16 gradient reduce, forced balance), utils/precision.py fp8_mx (bf16_with_mxfp8_mixed:
# FP8 parameter gather into the gradient buffer); the model recipe
# src/megatron/bridge/recipes/nemotronh/nemotron_3_nano.py: squared ReLU with use_fused_weighted_squared_relu, sigmoid
# router with expert bias and seq_aux_loss 1e-4, router fusion off, permute fusion on, HybridEP 16 SMs, fused (cuDNN)
# attention, no recompute; its native cross-entropy fusion made TE's by utils/overrides.py _set_common_perf_overrides).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-B200, Nemotron_3_Nano, MXFP8:
# 32,768 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 2 --global-batch-size 512 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--attention-backend fused
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 16
--moe-grouped-gemm --moe-permute-fusion --moe-router-force-load-balancing
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--cuda-graph-impl transformer_engine --cuda-graph-modules attn mamba moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
