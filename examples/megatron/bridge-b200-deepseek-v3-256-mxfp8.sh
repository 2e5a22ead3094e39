# Megatron-LM arguments of Megatron-Bridge's MXFP8 DeepSeek-V3 pre-training job on 256 DGX-B200 (NVIDIA-NeMo/
# Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/deepseek/deepseek_workload_base_configs.py
# DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2: TP 1, PP 8, VP 2 with layout Et*4|(t*4|)*14tmL, EP 32 (4 nodes),
# MBS 1, GBS 4096, the flex dispatcher's DeepEP backend with EP overlap (utils/overrides.py
# _set_moe_a2a_overlap_overrides: delayed wgrad, no shared-expert overlap), recompute mla_up_proj and mlp, TE CUDA
# graphs over attn, moe_router and moe_preprocess; deepseek_llm_pretrain.py deepseek_v3_pretrain_config_b200 and
# set_deepseek_v3_common_configs; the model and optimizer flags as bridge-b300-deepseek-v3-256-mxfp8.sh).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-B200, DeepSeekV3, MXFP8:
# 3,328 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 2
--pipeline-model-parallel-layout "Et*4|(t*4|)*14tmL"
--context-parallel-size 1 --expert-model-parallel-size 32 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 4096 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights --multi-latent-attention --mtp-num-layers 1
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep
--moe-router-num-groups 8 --moe-router-group-topk 4
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--overlap-moe-expert-parallel-comm --delay-wgrad-compute
--recompute-granularity selective --recompute-modules mla_up_proj mlp
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess
--use-distributed-optimizer --use-precision-aware-optimizer --overlap-grad-reduce --overlap-param-gather
--main-grads-dtype bf16 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
