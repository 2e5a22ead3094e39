# Megatron-LM arguments of Megatron-Bridge's MXFP8 DeepSeek-V3 pre-training job on 256 DGX-B300 (NVIDIA-NeMo/
# Megatron-Bridge v0.5.0 (fcbb6031) scripts/performance/configs/deepseek/deepseek_workload_base_configs.py
# DEEPSEEK_V3_PRETRAIN_CONFIG_B300_FP8_MX_V2: TP 1, PP 8, EP 8, MBS 2, GBS 4096, recompute mla_up_proj, the flex
# dispatcher's HybridEP backend (utils/overrides.py: 32 SMs), TE CUDA graphs over attn, moe_router and
# moe_preprocess, no EP overlap; deepseek_llm_pretrain.py deepseek_v3_pretrain_config_b300 and
# set_deepseek_v3_common_configs (router fusion, force-balanced routing, selective recompute);
# src/megatron/bridge/recipes/deepseek/deepseek_v3.py pretrain_config (MTP 1, precision-aware optimizer with BF16
# main gradients and moments, shared-expert overlap) and set_deepseek_v3_pipeline_model_parallel_layout's (8, 1)
# layout; the model flags as the H100 corpus case's, experiments/validation/cases/bridge-deepseek-v3-h100-1024.yaml).
# Published: docs/performance-summary.md at v0.5.0, "26.06 NeMo Container", DGX-B300, DeepSeekV3, MXFP8: 3,541
# tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8
--pipeline-model-parallel-layout "Et*8|(t*8|)*6t*5mL"
--context-parallel-size 1 --expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 2 --global-batch-size 4096 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights --multi-latent-attention --mtp-num-layers 1
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-router-num-groups 8 --moe-router-group-topk 4
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-shared-expert-overlap
--recompute-granularity selective --recompute-modules mla_up_proj
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --use-precision-aware-optimizer --overlap-grad-reduce --overlap-param-gather
--main-grads-dtype bf16 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
