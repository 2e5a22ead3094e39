# Megatron-LM arguments of Megatron-Bridge's MXFP8 Qwen3-30B-A3B pre-training job on 8 DGX-B300, the 26.06 NeMo
# container's recipe (NVIDIA-NeMo/Megatron-Bridge v0.5.0 (fcbb6031) scripts/performance/configs/qwen/
# qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1: the FP8-CS V1 config (EP 8, MBS 8, GBS
# 512, HybridEP) with moe_a2a_overlap, a full-iteration CUDA graph, the CuTe DSL fused grouped MLP and FP8 attention;
# qwen3_llm_pretrain.py qwen3_30b_a3b_pretrain_config_b300 with set_full_iter_cg_configs (paged stash, expert-rank
# capacity factor 1.5); utils/overrides.py set_workload_base_configs (use_transformer_engine_op_fuser, moe_mlp_glu_
# interleave_size 32, high_priority_a2a_comm_stream), _set_moe_a2a_overlap_overrides (EP overlap, delayed wgrads) and
# _set_common_perf_overrides (HybridEP 32 SMs, no NaN checks, TE cross-entropy); utils/precision.py fp8_mx). The same
# flags as 26.08's GB300 recipe (gb300-qwen3-30b-a3b-8.sh). 26.04.01's recipe on the same GPU ran TE's partial graphs
# without EP overlap or the fused MLP (bridge-b300-qwen3-30b-a3b-8-mxfp8.sh, 30,720 tokens/s/GPU).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.06 NeMo Container", DGX-B300, Qwen3_30B_a3B, MXFP8,
# MBS 8: 40,769 tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
# Not expressible as Megatron-LM flags (Bridge sets them on the config): fp8_dot_product_attention (the row's
# fp8_attention), NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, moe_mlp_glu_interleave_size 32, high_priority_a2a_comm_stream.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 8 --expert-tensor-parallel-size 1
--micro-batch-size 8 --global-batch-size 512 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-expert-rank-capacity-factor 1.5 --moe-paged-stash --use-transformer-engine-op-fuser
--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
--overlap-moe-expert-parallel-comm --delay-wgrad-compute
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
