# Megatron-LM arguments of Megatron-Bridge's MXFP8 Qwen3-235B-A22B pre-training job on 256 DGX-B300 (NVIDIA-NeMo/
# Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/qwen/qwen3_workload_base_configs.py
# QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2: TP 1, PP 8, EP 8 inside a node, MBS 2, GBS 8192, no EP overlap, no
# CUDA graphs, the flex dispatcher's HybridEP backend (utils/overrides.py: 32 SMs); qwen3_llm_pretrain.py
# qwen3_235b_a22b_pretrain_config_b300; the rest as the H100 corpus case
# experiments/validation/cases/bridge-qwen3-235b-a22b-h100-0256.yaml, the same release's recipe).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-B300, Qwen3_235B_a22B,
# MXFP8: 5936 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--context-parallel-size 1 --expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 2 --global-batch-size 8192 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
