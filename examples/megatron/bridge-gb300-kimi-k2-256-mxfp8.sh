# Megatron-LM arguments of Megatron-Bridge's MXFP8 Kimi K2 pre-training job on 256 DGX-GB300, trained with Muon
# (NVIDIA-NeMo/Megatron-Bridge v0.5.0 scripts/performance/configs/kimi/kimi_workload_base_configs.py
# KIMI_K2_PRETRAIN_CONFIG_GB300: TP 1, PP 4, VP 4, EP 64, MBS 2, GBS 4096, the flex dispatcher's HybridEP backend
# (utils/overrides.py: 32 SMs), no CUDA graphs, no EP overlap, recompute mla_up_proj; kimi_llm_pretrain.py
# set_kimi_k2_common_configs: router fusion, force-balanced routing, selective recompute, gradients reduced in BF16,
# and for Muon with MXFP8 no FP8 parameter gather; the (4, 4) layout of _get_kimi_k2_pipeline_layout and the optimizer
# of src/megatron/bridge/recipes/kimi/kimi_k2.py: dist_muon (recipes/utils/optimizer_utils.py
# distributed_muon_with_cosine_annealing: 5 Newton-Schulz steps, tp_mode blockwise, Nesterov), no distributed Adam,
# gradient reduce overlapped, parameter gather not; shared-expert overlap; TE cross-entropy).
# Published: docs/performance-summary.md at v0.5.0, "26.06 NeMo Container", DGX-GB300, Kimi_K2, MXFP8: 5,367
# tokens/s/GPU ("Muon optimizer was used for pre-training Kimi-K2"). Out of the corpus:
#   python -m experiments.validation.blackwell.check
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4
--pipeline-model-parallel-layout "Et*4|(t*4|)*14tL"
--context-parallel-size 1 --expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 2 --global-batch-size 4096 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8
--swiglu --untie-embeddings-and-output-weights --multi-latent-attention
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-shared-expert-overlap
--recompute-granularity selective --recompute-modules mla_up_proj
--optimizer dist_muon --muon-num-ns-steps 5 --muon-tp-mode blockwise --muon-nesterov
--overlap-grad-reduce --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
