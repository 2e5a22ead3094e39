# Megatron-LM arguments of the Qwen3-235B, 256 GB200, BF16 row of NVIDIA's Megatron-Core MoE report (arXiv 2603.07685v1, 2026-03-08),
# Table 11 (5,100 tokens/s/GPU, 750 TFLOPS/GPU) with its recipe from Table 20 (TP1 PP4 CP1 EP32 VPP12 MBS1 GBS8192) and Appendix B.2 / Sec. 8.1
# (HybridEP, recompute moe_act and layernorm, 1F1B overlap on, CUDA graphs attn moe_router moe_preprocess). Megatron-Core v0.16 (dev branch), force-balanced routing.
#   python -m experiments.validation.blackwell.check
# 94 layers in 48 virtual stages: the embedding and the loss counted as layers (2 per stage).
# Not expressible as flags here (the report names them, no Megatron-LM flag at d98e8a64 or none moesim models):
# activation and optimizer-state offloading (Sec. 8.1), HybridEP's SM count (not stated: HybridEP's own default
# simulated, 24 SMs in one NVLink domain, 8 across; simulator/costs/calibration.py).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 12
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--context-parallel-size 1 --expert-model-parallel-size 32 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 8192 --seq-length 4096
--swiglu --untie-embeddings-and-output-weights
--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3
--bf16
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
--overlap-moe-expert-parallel-comm --delay-wgrad-compute
--recompute-granularity selective --recompute-modules moe_act layernorm
