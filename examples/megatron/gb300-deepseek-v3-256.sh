# Megatron-LM arguments of Megatron-Bridge's MXFP8 DeepSeek-V3 job on 256 GB300 (NVIDIA-NeMo/Megatron-Bridge@067f987d
# src/megatron/bridge/perf_recipes/deepseek/gb300/deepseek_v3.py deepseek_v3_pretrain_256gpu_gb300_fp8mx_config, with
# deepseek/common.py _deepseek_v3_common (selective recompute, Megatron's default module core_attn) and
# _enable_deepseek_full_iteration_mxfp8; the layout of recipes/deepseek/h100/deepseek_v3.py for 16 virtual stages).
# Published: docs/performance-summary.md, 26.08, DGX-GB300, 6,288 tokens/s/GPU.
#   python -m experiments.validation.blackwell.check
# Not expressible as Megatron-LM flags (Bridge sets them on the config): fp8_dot_product_attention (TE fp8_dpa; no CLI
# flag at NVIDIA/Megatron-LM@d98e8a64 arguments.py), NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, moe_mlp_glu_interleave_size 32,
# high_priority_a2a_comm_stream, fp8_output_proj.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2
--pipeline-model-parallel-layout "Et*4|(t*4|)*14tmL"
--context-parallel-size 1 --expert-model-parallel-size 32 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 4096 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights --multi-latent-attention --mtp-num-layers 1
--moe-router-num-groups 8 --moe-router-group-topk 4
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--recompute-granularity selective
--overlap-moe-expert-parallel-comm --delay-wgrad-compute
# moe_hybridep_num_sms = 32: perf_recipes/_common.py _benchmark_common at 067f987d (HybridEP's SMs)
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-expert-rank-capacity-factor 1.5 --moe-paged-stash --use-transformer-engine-op-fuser
--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
