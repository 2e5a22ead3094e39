# Megatron-LM arguments of Megatron-Bridge's BF16 Nemotron 3 Super 120B-A12B pre-training job on 64 GB200
# (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/perf_recipes/nemotronh/gb200/nemotronh.py
# nemotron_3_super_pretrain_64gpu_gb200_bf16_config on the 16-GPU model recipe recipes/nemotronh/h100/nemotron_3_super.py;
# perf_recipes/nemotronh/common.py _apply_nemotron_3_super_perf_defaults (overlapped gradient reduce and parameter
# gather, FP32 optimizer states, force-balanced routing), perf_recipes/_common.py _benchmark_common (TE cross-entropy,
# BF16 gradient reduce, HybridEP's 32 SMs): TP 2 with SP, EP 64 in one NVL72 domain, MBS 1, GBS 512, sequence 8,192, no
# recompute, TE graphs over attn, mamba, moe_router and moe_preprocess). Model:
# examples/models/nemotron-3-super-120b-a12b.yaml. Measured: examples/model_verification_cards/nemotron-3-super-120b-a12b/
# card.yaml pretrain_performance.GB200 (verified 2026-07-24): steps 41-50 at 9,926.350 ms and 559.390 model
# TFLOP/s/GPU, which is 512 x 8,192 / 64 / 9.92635 s = 6,602 tokens/s/GPU (84.7 GFLOP per token, the H100 row's 83.7 at
# 4,096 tokens); the card's own tokens/s, 3,301.113, is half that. Out of the validation corpus: python -m
# experiments.validation.blackwell.check. Not expressible as Megatron-LM flags: the HybridEP environment (64 ranks per
# NVLink domain, MNNVL, combine chunks of 128 tokens), NVTE_FWD/BWD_LAYERNORM_SM_MARGIN=20.
--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 512 --seq-length 8192
--bf16
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--position-embedding-type none --attention-backend fused
--mtp-num-layers 2 --mtp-use-repeated-layer --mtp-hybrid-override-pattern "*E"
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-force-load-balancing
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--cuda-graph-impl transformer_engine --cuda-graph-modules attn mamba moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
