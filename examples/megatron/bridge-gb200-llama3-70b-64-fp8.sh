# Megatron-LM arguments of Megatron-Bridge's Llama 3 70B pre-training job on 64 GB200, FP8 current scaling
# (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/llama/llama3_workload_base_configs.py
# LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_V2: TP 1, PP 1, CP 1, MBS 2, GBS 256, Megatron FSDP, CPU offloading of the
# activations of 40 layers; llama3_llm_pretrain.py llama3_70b_pretrain_config_gb200: FSDP's double buffer, gradient
# accumulation fusion off, set_llama3_common_configs: seq 8192, grad_reduce_in_fp32 off; utils/precision.py
# get_precision_config: bf16_with_fp8_current_scaling_mixed, first_last_layers_bf16 False; no CUDA graphs).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-GB200, LLAMA3_70B, FP8
# (FSDP 64): 4224 tokens/s/GPU, 1892 model TFLOP/s/GPU. Out of the corpus: python -m
# experiments.validation.blackwell.check. The offloaded activations' host copies are not timed (memory only).
# Model: examples/models/llama-3.1-70b.json.
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1
--context-parallel-size 1 --micro-batch-size 2 --global-batch-size 256 --seq-length 8192
--bf16 --fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather
--swiglu --untie-embeddings-and-output-weights
--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --use-distributed-optimizer
--no-gradient-accumulation-fusion --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cpu-offloading-num-layers 40
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --manual-gc --manual-gc-interval 100
