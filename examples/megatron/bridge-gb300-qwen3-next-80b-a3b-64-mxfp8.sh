# Megatron-LM arguments of Megatron-Bridge's MXFP8 Qwen3-Next-80B-A3B pre-training job on 64 DGX-GB300, the 26.04.01
# NeMo container's recipe (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/qwen/
# qwen3_workload_base_configs.py QWEN3_NEXT_80B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1 (= the GB300 BF16 V1 preset): TP 1,
# PP 2, VP 4 with layout Et*4|(t*7|)*5t*8|tmL (MTP and loss in the last virtual stage), EP 32, ETP 1, MBS 4, GBS 1024,
# the flex dispatcher's HybridEP backend, TE CUDA graphs over attn, moe_router, moe_preprocess, no EP overlap;
# qwen3_llm_pretrain.py qwen3_next_80b_a3b_pretrain_config_gb300 and set_qwen3_common_configs (no recompute, router
# fusion, force-balanced routing, BF16 gradient reduce, seq 4096); utils/precision.py get_precision_config fp8_mx
# (bf16_with_mxfp8_mixed: FP8 param gather reusing the grad buffer); utils/overrides.py set_workload_base_configs and
# _set_common_perf_overrides (TE cross-entropy; its HybridEP 32 SMs is skipped: the recipe's backend field still reads
# deepep when it runs, so the recipe's moe_hybridep_num_sms 16 stays); the model recipe src/megatron/bridge/recipes/
# qwen/qwen3_next.py qwen3_next_80b_a3b_pretrain_config (1 MTP layer, loss scale 0.1, grouped GEMM, permute fusion,
# distributed optimizer with overlapped grad reduce / param gather, FP32 optimizer states, no shared-expert overlap)
# and models/qwen/qwen3_next_bridge.py Qwen3NextBridge.provider_bridge (gated attention output, Gated DeltaNet in all
# but every 4th layer, zero-centred RMSNorm, shared-expert gate, global_aux_loss 1e-3, FP32 router).
# perf_plugins.py PerfEnvPlugin: CUDA_DEVICE_MAX_CONNECTIONS=32, NVTE_{FWD,BWD}_LAYERNORM_SM_MARGIN=20, USE_MNNVL=1,
# NVLINK_DOMAIN_SIZE=72, NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=32, NUM_OF_TOKENS_PER_CHUNK_COMBINE_API=128,
# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, NCCL_GRAPH_REGISTER=0.
# Model: examples/models/qwen3-next-80b-a3b.json. Published: docs/performance-summary.md (867af0079, removed in
# 84ff628e5), "26.04.01 NeMo Container", Qwen3_Next_80B_a3B, DGX-GB300, 64 GPUs, MXFP8, MBS 4: 11,328 tokens/s/GPU
# (277 model TFLOP/s/GPU). The layout is Bridge's, over its GPT model's 48
# layers (moesim places two blocks, mixer then MoE, per layer of the config.json). Megatron-LM refuses
# --num-virtual-stages-per-pipeline-rank beside a layout (VP 4 follows from its 8 blocks). Not expressible here:
# --experimental-attention-variant gated_delta_net --linear-attention-freq 4 (moesim takes the GDN layers from the
# config.json and refuses the flag), zero-centred RMSNorm (--normalization RMSNorm --apply-layernorm-1p), partial RoPE
# 0.25 with base 1e7, the 128M-parameter DDP buckets (comm_overlap.py), manual GC every 100 steps, the environment.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2
--num-layers 48 --pipeline-model-parallel-layout "Et*4|(t*7|)*5t*8|tmL"
--context-parallel-size 1 --expert-model-parallel-size 32 --expert-tensor-parallel-size 1
--micro-batch-size 4 --global-batch-size 1024 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights --disable-bias-linear --qk-layernorm --attention-output-gate
--mtp-num-layers 1 --mtp-loss-scaling-factor 0.1
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 16
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing --moe-shared-expert-gate
--moe-router-load-balancing-type global_aux_loss --moe-aux-loss-coeff 1e-3 --moe-router-dtype fp32
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
