# Megatron-LM arguments of Megatron-Bridge's MXFP8 GPT-OSS-120B job on 64 GB200 (NVIDIA-NeMo/Megatron-Bridge@067f987d
# src/megatron/bridge/perf_recipes/gpt_oss/gb200/gpt_oss.py gpt_oss_120b_pretrain_64gpu_gb200_fp8mx_config, with
# gpt_oss/common.py _apply_gpt_oss_120b_full_iter_fp8mx_configs: no EP overlap). Published: docs/performance-summary.md,
# 26.08, DGX-GB200, 28,672 tokens/s/GPU.
#   python -m experiments.validation.blackwell.check
# Not expressible as Megatron-LM flags (Bridge sets them on the config): fp8_dot_product_attention (TE fp8_dpa; no CLI
# flag at NVIDIA/Megatron-LM@d98e8a64 arguments.py), NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, moe_mlp_glu_interleave_size 32,
# high_priority_a2a_comm_stream, fp8_output_proj.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 4 --global-batch-size 1280 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type none
# moe_hybridep_num_sms = 32: perf_recipes/_common.py _benchmark_common at 067f987d (HybridEP's SMs)
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-expert-rank-capacity-factor 1.5 --moe-paged-stash --use-transformer-engine-op-fuser
--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
