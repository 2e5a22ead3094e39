# Megatron-LM arguments of Megatron-Bridge's MXFP8 Qwen3-Next-80B-A3B pre-training job on 64 DGX-B200, the 26.04.01
# NeMo container's recipe (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/qwen/
# qwen3_workload_base_configs.py QWEN3_NEXT_80B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1: TP 1, PP 1, EP 64 (8 nodes), ETP 1,
# MBS 1, GBS 1024, the flex dispatcher's DeepEP backend (20 SMs, Megatron-Core's default at the container's
# 3rdparty/Megatron-LM 2edffadb), no CUDA graphs (the recipe's cuda_graph_impl none), no EP overlap;
# qwen3_llm_pretrain.py qwen3_next_80b_a3b_pretrain_config_b200 and set_qwen3_common_configs (no recompute, router
# fusion, force-balanced routing, BF16 gradient reduce, seq 4096); utils/precision.py get_precision_config fp8_mx
# (bf16_with_mxfp8_mixed: FP8 param gather reusing the grad buffer); utils/overrides.py set_workload_base_configs and
# _set_common_perf_overrides (TE cross-entropy); the model recipe src/megatron/bridge/recipes/qwen/qwen3_next.py
# qwen3_next_80b_a3b_pretrain_config (1 MTP layer, loss scale 0.1, grouped GEMM, permute fusion, distributed optimizer
# with overlapped grad reduce / param gather, FP32 optimizer states, no shared-expert overlap) and
# models/qwen/qwen3_next_bridge.py Qwen3NextBridge.provider_bridge (gated attention output, Gated DeltaNet in all but
# every 4th layer, zero-centred RMSNorm, shared-expert gate, global_aux_loss 1e-3, FP32 router).
# perf_plugins.py PerfEnvPlugin: CUDA_DEVICE_MAX_CONNECTIONS=32, NVTE_{FWD,BWD}_LAYERNORM_SM_MARGIN=20.
# Model: examples/models/qwen3-next-80b-a3b.json. Published: docs/performance-summary.md (867af0079, removed in
# 84ff628e5), "26.04.01 NeMo Container", Qwen3_Next_80B_a3B, DGX-B200, 64 GPUs, MXFP8, MBS 1: 4,864 tokens/s/GPU
# (119 model TFLOP/s/GPU). Not expressible here: --experimental-attention-variant gated_delta_net
# --linear-attention-freq 4 (moesim takes the GDN layers from the config.json and refuses the flag), zero-centred
# RMSNorm (--normalization RMSNorm --apply-layernorm-1p), partial RoPE 0.25 with base 1e7, the 128M-parameter DDP
# buckets (comm_overlap.py), manual GC every 100 steps, the environment.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 1024 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights --disable-bias-linear --qk-layernorm --attention-output-gate
--mtp-num-layers 1 --mtp-loss-scaling-factor 0.1
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep --moe-deepep-num-sms 20
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing --moe-shared-expert-gate
--moe-router-load-balancing-type global_aux_loss --moe-aux-loss-coeff 1e-3 --moe-router-dtype fp32
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
