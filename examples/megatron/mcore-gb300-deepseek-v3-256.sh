# Megatron-LM arguments of the DeepSeek-V3, 256 GB300, MXFP8 row of NVIDIA's Megatron-Core MoE report (arXiv 2603.07685v1, 2026-03-08),
# Table 11 (4,730 tokens/s/GPU, 1233 TFLOPS/GPU) with its recipe from Table 20 (TP1 PP4 CP1 EP64 VPP4 MBS1 GBS8192) and Appendix B.2 / Sec. 8.1
# (HybridEP, no recompute, 1F1B overlap on, CUDA graphs attn moe_router moe_preprocess). Megatron-Core v0.16 (dev branch), force-balanced routing.
#   python -m experiments.validation.blackwell.check
# The layout is the one Sec. 9.2.2 gives for the GB200 row (PP 4 x VPP 4 = 16 virtual stages); taken for GB300.
# Not expressible as flags here (the report names them, no Megatron-LM flag at d98e8a64 or none moesim models):
# optimizer-state offloading (Table 18, GB200), fine-grained activation offloading (Sec. 8.1), CPU/NUMA
# binding (Sec. 9.2.2), MLA RoPE fusion, HybridEP's SM count (not stated: HybridEP's own default
# simulated, 24 SMs in one NVLink domain, 8 across; simulator/costs/calibration.py).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4
--pipeline-model-parallel-layout "Et*4|(t*4|)*14tmL"
--context-parallel-size 1 --expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 8192 --seq-length 4096
--swiglu --untie-embeddings-and-output-weights --multi-latent-attention --mtp-num-layers 1
--moe-router-num-groups 8 --moe-router-group-topk 4
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
--overlap-moe-expert-parallel-comm --delay-wgrad-compute
