# Megatron-LM arguments of Megatron-Bridge's MXFP8 Nemotron 3 Nano job on 8 GB300 (NVIDIA-NeMo/Megatron-Bridge@067f987d
# src/megatron/bridge/perf_recipes/nemotronh/gb300/nemotronh.py nemotron_3_nano_pretrain_8gpu_gb300_fp8mx_config, with
# _build_nemotron_3_nano_gb300_mxfp8, perf_recipes/nemotronh/common.py _apply_nemotron_3_nano_perf_defaults (no
# recompute, FP32 optimizer states), perf_recipes/_common.py _benchmark_common (TE cross-entropy, BF16 gradient reduce),
# _perf_precision("fp8_mx") (bf16_with_mxfp8_mixed: FP8 parameter gather into the gradient buffer), and the model recipe
# recipes/nemotronh/h100/nemotron_3_nano.py (squared ReLU with use_fused_weighted_squared_relu, sigmoid router with
# expert bias and seq_aux_loss 1e-4, router fusion off, permute fusion on, fused (cuDNN) attention)). Published:
# docs/performance-summary.md, 26.08 container, DGX-GB300, 39,936 tokens/s/GPU. Out of the validation corpus:
#   python -m experiments.validation.blackwell.check
# Not expressible as Megatron-LM flags (Bridge sets them on the config): fp8_dot_product_attention (TE fp8_dpa),
# NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, moe_mlp_glu_interleave_size 32.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 4 --global-batch-size 512 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--attention-backend fused
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 16
--moe-grouped-gemm --moe-permute-fusion --moe-router-force-load-balancing
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--use-transformer-engine-op-fuser
--cuda-graph-impl transformer_engine --cuda-graph-modules attn mamba moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
