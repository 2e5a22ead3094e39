# Megatron-LM arguments of Megatron-Bridge's BF16 Nemotron 3.5 Lightning 30B-A3B pre-training job on 8 GB200
# (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/perf_recipes/nemotronh/gb200/nemotronh.py
# nemotron_3_5_lightning_pretrain_8gpu_gb200_bf16_config: Nemotron 3 Nano's architecture with two MTP depths sharing
# one "*E" module, EP 8 over two trays of one NVL72 domain, MBS 2, GBS 512, HybridEP on 16 SMs, no recompute, TE graphs
# over attn, mamba, moe_router and moe_preprocess; perf_recipes/nemotronh/common.py _apply_nemotron_3_nano_perf_defaults
# (FP32 optimizer states), perf_recipes/_common.py _benchmark_common (TE cross-entropy, BF16 gradient reduce)). The
# MXFP8 recipe of the same row is bridge-gb200-nemotron-3.5-lightning-8-mxfp8.sh. Model:
# examples/models/nemotron-3-nano-30b-a3b.json. Measured: examples/model_verification_cards/nemotron-3.5-lightning/
# card.yaml pretrain_performance.GB200 (verified 2026-07-28): steps 41-50 at 18,236.060 ms, 809.220 model TFLOP/s/GPU,
# 28,750.070 tokens/s/GPU. Out of the validation corpus: python -m experiments.validation.blackwell.check. Not
# expressible as Megatron-LM flags: the HybridEP environment (MNNVL, combine chunks of 128 tokens),
# NVTE_FWD/BWD_LAYERNORM_SM_MARGIN=20.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 2 --global-batch-size 512 --seq-length 8192
--bf16
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--attention-backend fused
--mtp-num-layers 2 --mtp-use-repeated-layer --mtp-hybrid-override-pattern "*E"
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 16
--moe-grouped-gemm --moe-permute-fusion --moe-router-force-load-balancing
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--cuda-graph-impl transformer_engine --cuda-graph-modules attn mamba moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
