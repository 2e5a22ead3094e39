# Megatron-LM arguments of the Qwen3-235B, 256 GB300, MXFP8 row of NVIDIA's Megatron-Core MoE report (arXiv 2603.07685v1, 2026-03-08),
# Table 11 (6,583 tokens/s/GPU, 974 TFLOPS/GPU) with its recipe from Table 20 (TP1 PP4 CP1 EP64 VPP6 MBS2 GBS3072) and Appendix B.2 / Sec. 8.1
# (HybridEP, 1F1B overlap off, CUDA graphs attn moe_router moe_preprocess; B.2 names recompute only for GB200 and
# H100). Megatron-Core v0.16 (dev branch), force-balanced routing.
#   python -m experiments.validation.blackwell.check
# 94 layers in 24 virtual stages: the embedding and the loss counted as layers (4 per stage).
# Not expressible as flags here (the report names them, no Megatron-LM flag at d98e8a64 or none moesim models):
# activation and optimizer-state offloading (Sec. 8.1), HybridEP's SM count (not stated: HybridEP's own default
# simulated, 24 SMs in one NVLink domain, 8 across; simulator/costs/calibration.py).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 6
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--context-parallel-size 1 --expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 2 --global-batch-size 3072 --seq-length 4096
--swiglu --untie-embeddings-and-output-weights
--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
