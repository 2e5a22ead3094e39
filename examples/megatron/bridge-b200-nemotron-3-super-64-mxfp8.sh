# Megatron-LM arguments of Megatron-Bridge's MXFP8 Nemotron 3 Super 120B-A12B pre-training job on 64 DGX-B200 GPUs (8
# nodes over InfiniBand), the 26.04.01 NeMo container's recipe (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293)
# scripts/performance/configs/nemotronh/nemotron_3_workload_base_configs.py
# NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B200_FP8_MX_V1: TP 1, EP 64 across the 8 nodes, MBS 1, GBS 512, HybridEP
# (utils/overrides.py: 32 SMs), no CUDA graphs (cuda_graph_impl "none"), selective recompute of moe_act and layernorm;
# nemotron_3_llm_pretrain.py set_nemotron_3_super_common_configs: BF16 gradient reduce, forced balance, router padding
# for quantization; the model recipe src/megatron/bridge/recipes/nemotronh/nemotron_3_super.py: two MTP depths sharing
# one module, fused attention, squared ReLU with use_fused_weighted_squared_relu, TE cross-entropy, distributed
# optimizer with overlapped reduce and gather). Model: examples/models/nemotron-3-super-120b-a12b.yaml. Published:
# docs/performance-summary-archive.md (067f987d), "26.04.01 NeMo Container", DGX-B200, Nemotron_3_Super, MXFP8: 6,400
# tokens/s/GPU. Out of the validation corpus (python -m experiments.validation.blackwell.check). Not expressible as
# Megatron-LM flags (Bridge sets them on the config): keep_mtp_spec_in_bf16 (the MTP module's GEMMs in BF16: simulated
# in MXFP8).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 512 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--position-embedding-type none --attention-backend fused
--mtp-num-layers 2 --mtp-use-repeated-layer --mtp-hybrid-override-pattern "*E"
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-force-load-balancing --moe-router-padding-for-quantization
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--recompute-granularity selective --recompute-modules moe_act layernorm
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
