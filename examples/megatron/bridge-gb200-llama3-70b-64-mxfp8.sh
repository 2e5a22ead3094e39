# Megatron-LM arguments of Megatron-Bridge's Llama 3 70B pre-training job on 64 GB200, MXFP8
# (NVIDIA-NeMo/Megatron-Bridge v0.4.2 (c8101293) scripts/performance/configs/llama/llama3_workload_base_configs.py
# LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_MX_V2: TP 2, PP 4, VP 5, CP 1, MBS 1, GBS 256; llama3_llm_pretrain.py
# llama3_70b_pretrain_config_gb200 and set_llama3_common_configs: seq 8192, grad_reduce_in_fp32 off, TP overlap on
# (the recipe's CommOverlapConfig, userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192); utils/precision.py
# get_precision_config: bf16_with_mxfp8_mixed; no CUDA graphs (llama3.py llama3_70b_pretrain_config: cuda_graph_impl
# none)).
# Published: docs/performance-summary-archive.md (4ab94dfa), "26.04.01 NeMo Container", DGX-GB200, LLAMA3_70B,
# MXFP8: 3712 tokens/s/GPU, 1664 model TFLOP/s/GPU. Out of the corpus: python -m
# experiments.validation.blackwell.check.
# Model: examples/models/llama-3.1-70b.json (Llama 3 70B's shapes; 3.1 differs in RoPE scaling and context length
# only).
--tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap
--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 5
--context-parallel-size 1 --micro-batch-size 1 --global-batch-size 256 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --manual-gc --manual-gc-interval 100
