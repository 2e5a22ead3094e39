# Megatron-LM arguments of Megatron-Bridge's NVFP4 Nemotron 3 Super 120B-A12B pre-training job on 64 GB300
# (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/perf_recipes/nemotronh/gb300/nemotronh.py
# nemotron_3_super_pretrain_64gpu_gb300_nvfp4_config; perf_recipes/nemotronh/common.py
# _apply_nemotron_3_super_perf_defaults (overlapped gradient reduce and parameter gather, FP32 optimizer states,
# force-balanced routing) and perf_recipes/_common.py _benchmark_common (TE cross-entropy, BF16 gradient reduce,
# HybridEP's 32 SMs); the model recipe recipes/nemotronh/h100/nemotron_3_super.py (two MTP depths sharing one module,
# fused attention, squared ReLU with use_fused_weighted_squared_relu, sigmoid router with expert bias, no recompute)).
# Model: examples/models/nemotron-3-super-120b-a12b.yaml. Published: docs/performance-summary.md, 26.08 container,
# DGX-GB300, Nemotron_3_Super, NVFP4: 10,240 tokens/s/GPU. Out of the validation corpus (python -m
# experiments.validation.blackwell.check). The per-module recipe (te_quant.cfg: the attention, the latent projections
# and the MTP modules in BF16, Mamba's out_proj in MXFP8) is te-precision-nemotron-3-super-nvfp4.yaml, given to
# --te-precision-config-file; the last 14 layers run BF16 GEMMs (--first-last-layers-bf16: Bridge's
# nemotron_3_super_bf16_with_nvfp4_mixed, its start count 0); fp4_param_gather is off until MCore PR 4358.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
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
