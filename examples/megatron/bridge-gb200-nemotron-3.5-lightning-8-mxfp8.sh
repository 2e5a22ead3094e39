# Megatron-LM arguments of Megatron-Bridge's MXFP8 Nemotron 3.5 Lightning 30B-A3B pre-training job on 8 GB200
# (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/perf_recipes/nemotronh/gb200/nemotronh.py
# nemotron_3_5_lightning_pretrain_8gpu_gb200_fp8mx_config with _build_nemotron_3_5_lightning_gb200_mxfp8 and
# _build_nemotron_3_nano_gb200_mxfp8: Nemotron 3 Nano's architecture ("the same architecture as Nemotron 3 Nano, but
# its checkpoint was trained natively with multi-token prediction", examples/models/nemotron/nemotron_3/lightning/
# README.md) with two MTP depths sharing one "*E" module, HybridEP on 16 SMs, EP 8, MBS 2, GBS 512, TE graphs on attn,
# mamba, moe_router and moe_preprocess; perf_recipes/nemotronh/common.py _apply_nemotron_3_nano_perf_defaults (no
# recompute, FP32 optimizer states), perf_recipes/_common.py _benchmark_common (TE cross-entropy, BF16 gradient
# reduce), _perf_precision("fp8_mx") (FP8 parameter gather)). Model: examples/models/nemotron-3-nano-30b-a3b.json.
# Published: docs/performance-summary.md, 26.08 container, DGX-GB200, Nemotron_3_5_Lightning, MXFP8: 28,672
# tokens/s/GPU. Out of the validation corpus: python -m experiments.validation.blackwell.check
# Not expressible as Megatron-LM flags (Bridge sets them on the config): fp8_dot_product_attention (TE fp8_dpa),
# keep_mtp_spec_in_bf16 (the MTP module's GEMMs in BF16: simulated in MXFP8).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 2 --global-batch-size 512 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--attention-backend fused
--mtp-num-layers 2 --mtp-use-repeated-layer --mtp-hybrid-override-pattern "*E"
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 16
--moe-grouped-gemm --moe-permute-fusion --moe-router-force-load-balancing
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--use-transformer-engine-op-fuser
--cuda-graph-impl transformer_engine --cuda-graph-modules attn mamba moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
