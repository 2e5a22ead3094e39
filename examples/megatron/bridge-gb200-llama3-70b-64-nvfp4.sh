# Megatron-LM arguments of Megatron-Bridge's Llama 3 70B pre-training job on 64 GB200, NVFP4
# (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/llama/llama3_workload_base_configs.py
# LLAMA3_70B_PRETRAIN_CONFIG_GB200_NVFP4_V2: TP 2, PP 4, VP 5, CP 1, MBS 1, GBS 256; llama3_llm_pretrain.py
# llama3_70b_pretrain_config_gb200 and set_llama3_common_configs: seq 8192, grad_reduce_in_fp32 off, TP overlap off
# (llama3_70b_pretrain_config_gb200: tp_comm_overlap False for nvfp4); utils/precision.py get_precision_config:
# bf16_with_nvfp4_mixed; no CUDA graphs (the preset's cuda_graph_impl none)).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-GB200, LLAMA3_70B,
# NVFP4: 4864 tokens/s/GPU, 2202 model TFLOP/s/GPU. Out of the corpus: python -m
# experiments.validation.blackwell.check.
# Model: examples/models/llama-3.1-70b.json (Llama 3 70B's shapes; 3.1 differs in RoPE scaling and context length
# only).
--tensor-model-parallel-size 2 --sequence-parallel
--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 5
--context-parallel-size 1 --micro-batch-size 1 --global-batch-size 256 --seq-length 8192
--bf16 --fp4-format e2m1 --fp4-recipe nvfp4 --fp4-param-gather
--swiglu --untie-embeddings-and-output-weights
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --manual-gc --manual-gc-interval 100
