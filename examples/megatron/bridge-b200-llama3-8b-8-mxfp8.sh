# Megatron-LM arguments of Megatron-Bridge's Llama 3 8B pre-training job on 8 B200, FP8-MX (NVIDIA-NeMo/Megatron-Bridge
# v0.2.1 (1c43b392) scripts/performance/configs/llama3/workload_base_configs.py LLAMA3_8B_B200_FP8_MX_BASE_CONFIG:
# TP 1, PP 1, CP 1, GBS 128, CUDA graph "local" with scope full_iteration; llama3_llm_pretrain.py
# set_llama3_common_configs: seq 8192, grad_reduce_in_fp32 off; utils/helpers.py get_precision_config: bf16_with_mxfp8_mixed).
# Published: docs/performance-summary.md at v0.2.1, "25.11 NeMo Container", DGX-B200, LLAMA3_8B, 29521 tokens/s/GPU.
# The same recipe on GB300, GB200 and B200 but for the micro-batch: experiments/validation/blackwell/ratios.py.
# Model: examples/models/llama-3.1-8b.json (Llama 3 8B's shapes; 3.1 differs in RoPE scaling and context length only).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--micro-batch-size 2 --global-batch-size 128 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
