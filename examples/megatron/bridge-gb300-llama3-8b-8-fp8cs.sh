# Megatron-LM arguments of Megatron-Bridge's Llama 3 8B pre-training job on 8 GB300, FP8-CS (NVIDIA-NeMo/Megatron-Bridge
# v0.2.1 (1c43b392) scripts/performance/configs/llama3/workload_base_configs.py LLAMA3_8B_GB300_FP8_CS_BASE_CONFIG:
# TP 1, PP 1, CP 1, GBS 128, CUDA graph "local" with scope full_iteration; llama3_llm_pretrain.py
# set_llama3_common_configs: seq 8192, grad_reduce_in_fp32 off; utils/helpers.py get_precision_config: bf16_with_fp8_current_scaling_mixed, first_last_layers_bf16 off).
# Published: docs/performance-summary.md at v0.2.1, "25.11 NeMo Container", DGX-GB300, LLAMA3_8B, 37556 tokens/s/GPU.
# The same recipe on GB300, GB200 and B200 but for the micro-batch: experiments/validation/blackwell/ratios.py.
# The published row prints MBS 2; the recipe at that commit sets 4 (LLAMA3_8B_GB300_FP8_CS_BASE_CONFIG, which FP8_MX
# reuses), taken here. The simulator's throughput moves 0.5% between the two.
# Model: examples/models/llama-3.1-8b.json (Llama 3 8B's shapes; 3.1 differs in RoPE scaling and context length only).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--micro-batch-size 4 --global-batch-size 128 --seq-length 8192
--bf16 --fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather
--swiglu --untie-embeddings-and-output-weights
--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
