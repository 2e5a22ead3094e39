# Megatron-LM arguments of Megatron-Bridge's NVFP4 Nemotron 3 Super 120B-A12B pre-training job on 64 DGX-B200 GPUs (8
# nodes over InfiniBand), the 26.04.01 NeMo container's recipe (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293)
# scripts/performance/configs/nemotronh/nemotron_3_workload_base_configs.py
# NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B200_NVFP4_V1: TP 2 (sequence parallel: utils/overrides.py), EP 64 across the 8
# nodes, MBS 1, GBS 512, HybridEP (32 SMs), TE graphs on mamba, attn, moe_router and moe_preprocess, no recompute
# (recompute_modules None keeps the model recipe's, none); nemotron_3_llm_pretrain.py set_nemotron_3_super_common_configs:
# BF16 gradient reduce, forced balance, router padding for quantization, nemotron_3_super_bf16_with_nvfp4_mixed without
# FP4 parameter gather and te_quant.cfg; the model recipe src/megatron/bridge/recipes/nemotronh/nemotron_3_super.py: two
# MTP depths sharing one module, fused attention, squared ReLU with use_fused_weighted_squared_relu, TE cross-entropy,
# distributed optimizer with overlapped reduce and gather). Model: examples/models/nemotron-3-super-120b-a12b.yaml.
# Published: docs/performance-summary-archive.md (067f987d), "26.04.01 NeMo Container", DGX-B200, Nemotron_3_Super,
# NVFP4: 5,632 tokens/s/GPU, 0.88x the MXFP8 row's on the same GPU. Out of the validation corpus (python -m
# experiments.validation.blackwell.check). The per-module recipe (te_quant.cfg: the attention, the latent projections
# and the MTP modules in BF16, Mamba's out_proj in MXFP8) is te-precision-nemotron-3-super-nvfp4.yaml, given to
# --te-precision-config-file; the last 14 layers run BF16 GEMMs (--first-last-layers-bf16: Bridge's
# nemotron_3_super_bf16_with_nvfp4_mixed, its start count 0); fp4_param_gather is off until MCore PR 4358.
--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 512 --seq-length 8192
--bf16 --fp4-format e2m1 --fp4-recipe nvfp4
--first-last-layers-bf16 --num-layers-at-start-in-bf16 0 --num-layers-at-end-in-bf16 14
--te-precision-config-file te-precision-nemotron-3-super-nvfp4.yaml
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--position-embedding-type none --attention-backend fused
--mtp-num-layers 2 --mtp-use-repeated-layer --mtp-hybrid-override-pattern "*E"
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-force-load-balancing --moe-router-padding-for-quantization
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--cuda-graph-impl transformer_engine --cuda-graph-modules attn mamba moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
