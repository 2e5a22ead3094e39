# Megatron-LM's own Qwen3 MoE recipe, GB200 MXFP8 full CG, 128 GPUs, its ARGS as flags: NVIDIA/Megatron-LM@71464846 (dev)
# examples/moe_recipes/qwen3_235b/gb200/mxfp8_128GPU_TP1PP1EP64_paged_stash_fullcg_overlap.yaml.
# Published: NVIDIA/Megatron-LM PR #5728 (2026-07-09), 1208.3 model TFLOP/s/GPU (median of iterations 30-45),
# measured with the matching Megatron-Bridge recipe (NVIDIA-NeMo/Megatron-Bridge #4469) at this file's settings.
#   python -m experiments.validation.blackwell.check
# Every ARGS entry is here except the run's paths, tokenizer, logging, optimizer hyper-parameters and schedule
# (lr*, adam*, weight_decay, clip_grad, train_samples / train_iters, eval_*, save / load, log_*, wandb_*, mock_data):
# each is a flag of NVIDIA/Megatron-LM@d98e8a64 (workloads/inputs/megatron_flags_d98e8a64dd.tsv) that does not
# change step time or memory. Every flag below is a flag at d98e8a64 too (none is unknown to the parser).
# Not modelled (moesim simulates without them):
#   --moe-paged-stash-page-size --moe-paged-stash-buffer-size-factor-cpu --moe-mlp-glu-interleave-size
#   --reuse-grad-buf-for-mxfp8-param-ag --enable-experimental.
# Environment the recipe sets that no flag expresses (not simulated):
#   NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=64, USE_MNNVL=1.
--num-layers 94
--hidden-size 4096
--ffn-hidden-size 12288
--num-attention-heads 64
--kv-channels 128
--max-position-embeddings 4096
--group-query-attention
--num-query-groups 4
--qk-layernorm
--normalization RMSNorm
--norm-epsilon 1e-6
--swiglu
--disable-bias-linear
--untie-embeddings-and-output-weights
--position-embedding-type rope
--rotary-percent 1.0
--rotary-base 1000000
--make-vocab-size-divisible-by 1187
--num-experts 128
--moe-ffn-hidden-size 1536
--moe-router-load-balancing-type aux_loss
--moe-router-topk 8
--moe-aux-loss-coeff 1e-3
--attention-dropout 0.0
--hidden-dropout 0.0
--seq-length 4096
--moe-router-force-load-balancing
--tensor-model-parallel-size 1
--pipeline-model-parallel-size 1
--expert-model-parallel-size 64
--context-parallel-size 1
--expert-tensor-parallel-size 1
--use-distributed-optimizer
--sequence-parallel
--account-for-embedding-in-pipeline-split
--account-for-loss-in-pipeline-split
--moe-token-dispatcher-type flex
--moe-flex-dispatcher-backend hybridep
--moe-grouped-gemm
--moe-permute-fusion
--moe-router-fusion
--moe-router-dtype fp32
--moe-router-padding-for-quantization
--moe-hybridep-num-sms 32
--moe-paged-stash
--moe-expert-rank-capacity-factor 1.2
--moe-paged-stash-page-size 64
--moe-paged-stash-buffer-size-factor-cuda 1.0
--moe-paged-stash-buffer-size-factor-cpu 0.8
--use-transformer-engine-op-fuser
--moe-pad-experts-for-cuda-graph-inference
--moe-mlp-glu-interleave-size 32
--cuda-graph-impl local
--cuda-graph-scope full_iteration
--cuda-graph-warmup-steps 2
--no-check-for-nan-in-loss-and-grad
--delay-wgrad-compute
--overlap-moe-expert-parallel-comm
--te-rng-tracker
--cross-entropy-fusion-impl te
--use-mcore-models
--use-flash-attn
--transformer-impl transformer_engine
--micro-batch-size 1
--global-batch-size 8192
--no-create-attention-mask-in-dataloader
--cross-entropy-loss-fusion
--manual-gc
--manual-gc-interval 5
--bf16
--fp8-format e4m3
--fp8-recipe mxfp8
--fp8-param-gather
--reuse-grad-buf-for-mxfp8-param-ag
--overlap-grad-reduce
--overlap-param-gather
--use-precision-aware-optimizer
--main-grads-dtype fp32
--main-params-dtype fp32
--exp-avg-dtype bf16
--exp-avg-sq-dtype bf16
--enable-experimental
