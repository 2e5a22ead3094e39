# Megatron-LM arguments of Megatron-Bridge's Llama 3.1 405B pre-training job on 256 GB200, MXFP8
# (NVIDIA-NeMo/Megatron-Bridge v0.5.0 (fcbb6031) scripts/performance/configs/llama/llama31_workload_base_configs.py
# LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_MX_V2: TP 4, PP 16, CP 1, VP 8, MBS 1, GBS 1536; llama31_llm_pretrain.py
# llama31_405b_pretrain_config_gb200 and set_llama31_common_configs, TP overlap on
# (userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192); utils/precision.py get_precision_config:
# bf16_with_mxfp8_mixed; no CUDA graphs; the pipeline split accounts for the embedding and the loss as in the H100
# case, experiments/validation/cases/bridge-llama-3.1-405b-h100-1024.yaml).
# Published: docs/performance-summary.md at v0.5.0, "26.06 NeMo Container", DGX-GB200, LLAMA3.1_405B, MXFP8: 783
# tokens/s/GPU, 1976 model TFLOP/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
# Model: examples/models/llama-3.1-405b.json.
--tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap
--pipeline-model-parallel-size 16 --num-virtual-stages-per-pipeline-rank 8
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--context-parallel-size 1 --micro-batch-size 1 --global-batch-size 1536 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
