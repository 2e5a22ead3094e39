# Megatron-LM arguments of Megatron-Bridge's MXFP8 Qwen3-235B-A22B job on 256 GB200 (NVIDIA-NeMo/Megatron-Bridge@067f987d
# src/megatron/bridge/perf_recipes/qwen/gb200/qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config over
# recipes/qwen/h100/qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config, with qwen/common.py
# _enable_hybridep_full_iteration_mxfp8). Published: docs/performance-summary.md, 26.08, DGX-GB200, 7,280 tokens/s/GPU.
#   python -m experiments.validation.blackwell.check
# Not expressible as Megatron-LM flags (Bridge sets them on the config): fp8_dot_product_attention (TE fp8_dpa; no CLI
# flag at NVIDIA/Megatron-LM@d98e8a64 arguments.py), NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, moe_mlp_glu_interleave_size 32,
# high_priority_a2a_comm_stream.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 3
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--context-parallel-size 1 --expert-model-parallel-size 32 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 8192 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3
--overlap-moe-expert-parallel-comm --delay-wgrad-compute
# moe_hybridep_num_sms = 32: perf_recipes/_common.py _benchmark_common at 067f987d (HybridEP's SMs)
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-expert-rank-capacity-factor 1.5 --moe-paged-stash --use-transformer-engine-op-fuser
--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
