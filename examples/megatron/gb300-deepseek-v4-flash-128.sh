# Megatron-LM arguments of Megatron-Bridge's MXFP8 DeepSeek-V4-Flash job on 128 GB300
# (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/perf_recipes/deepseek/gb300/deepseek_v4.py
# deepseek_v4_flash_pretrain_128gpu_gb300_fp8mx_config, the GB200 recipe with GB300 environment variables, on
# recipes/deepseek/gb200/deepseek_v4.py deepseek_v4_flash_pretrain_64gpu_gb200_fp8mx_config: TP 1, PP 1, EP 64, MBS 1,
# GBS 2,048, HybridEP on 32 SMs, full-iteration CUDA graph, selective recompute of mla_up_proj, fused mHC on
# Blackwell, the precision-aware optimizer with BF16 moments). Model: examples/models/deepseek-v4-flash.json (HF
# config.json; moe_router_load_balancing_type seq_aux_loss, coefficient 1e-4, forced balance). Published:
# docs/performance-summary.md, 26.08, DGX-GB300, DeepSeekV4 Flash: 8,224 tokens/s/GPU.
#   python -m experiments.validation.blackwell.check, or alone (fused mHC: a layout field, no Megatron-LM flag):
#   moesim run --megatron-args examples/megatron/gb300-deepseek-v4-flash-128.sh \
#     --model examples/models/deepseek-v4-flash.json --cluster gb300 --gpus 128 --set fused_mhc=true
# Not expressible as Megatron-LM flags (dev Megatron-Core, not at NVIDIA/Megatron-LM@d98e8a64): use_fused_mhc (the
# row's layout sets fused_mhc), apply_dsa_kernel_fusion, dsa_indexer_loss_coeff 0.01 with dsa_indexer_use_sparse_loss
# (the indexer loss is not charged), csa_compress_rotary_base; NVTE_CUTEDSL_FUSED_GROUPED_MLP=1,
# moe_mlp_glu_interleave_size 32, moe_hybridep_num_sms_preprocessing 108.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1
--context-parallel-size 1 --expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 2048 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights --mtp-num-layers 1
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4 --moe-router-padding-for-quantization
--recompute-granularity selective --recompute-modules mla_up_proj
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-expert-rank-capacity-factor 1.5 --moe-paged-stash --use-transformer-engine-op-fuser
--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
--use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16
--overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl native
