# Megatron-LM arguments of Megatron-Bridge's MXFP8 Qwen3-30B-A3B pre-training job on 8 DGX-B200 (NVIDIA-NeMo/
# Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/qwen/qwen3_workload_base_configs.py
# QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1: EP 8, MBS 4, GBS 512, the flex dispatcher's HybridEP backend, TE CUDA
# graphs over attn, moe_router, moe_preprocess; qwen3_llm_pretrain.py qwen3_30b_a3b_pretrain_config_b200; utils/precision.py
# get_precision_config: bf16_with_mxfp8_mixed; utils/overrides.py moe_hybridep_num_sms 32; the rest as the H100
# corpus case experiments/validation/cases/bridge-qwen3-30b-a3b-h100-0016.yaml).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-B200, Qwen3_30B_a3B, MXFP8:
# 27136 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 4 --global-batch-size 512 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
