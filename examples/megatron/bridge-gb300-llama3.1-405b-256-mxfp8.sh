# Megatron-LM arguments of Megatron-Bridge's Llama 3.1 405B pre-training job on 256 GB300, MXFP8
# (NVIDIA-NeMo/Megatron-Bridge v0.5.0 (fcbb6031) scripts/performance/configs/llama/llama31_workload_base_configs.py
# LLAMA31_405B_PRETRAIN_CONFIG_GB300_FP8_MX_V2: TP 2, PP 8, CP 2, VP 4, MBS 1, GBS 1536; llama31_llm_pretrain.py
# llama31_405b_pretrain_config_gb300 and set_llama31_common_configs, TP overlap on
# (userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192); utils/precision.py get_precision_config:
# bf16_with_mxfp8_mixed; no CUDA graphs; the pipeline split accounts for the embedding and the loss as in the H100
# case, experiments/validation/cases/bridge-llama-3.1-405b-h100-1024.yaml).
# Published: docs/performance-summary.md at v0.5.0, "26.06 NeMo Container", DGX-GB300, LLAMA3.1_405B, MXFP8: 952
# tokens/s/GPU, 2403 model TFLOP/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
# Model: examples/models/llama-3.1-405b.json.
--tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap
--pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 4
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--context-parallel-size 2 --micro-batch-size 1 --global-batch-size 1536 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
