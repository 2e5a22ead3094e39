# Megatron-LM arguments of Megatron-Bridge's Llama 3.1 405B pre-training job on 256 GB200, NVFP4
# (NVIDIA-NeMo/Megatron-Bridge v0.5.0 (fcbb6031) scripts/performance/configs/llama/llama31_workload_base_configs.py
# LLAMA31_405B_PRETRAIN_CONFIG_GB200_NVFP4_V2: TP 4, PP 16, CP 1, VP 8, MBS 1, GBS 1536; llama31_llm_pretrain.py
# llama31_405b_pretrain_config_gb200 and set_llama31_common_configs, TP overlap off
# (llama31_405b_pretrain_config_gb200: tp_comm_overlap False for nvfp4); utils/precision.py get_precision_config:
# bf16_with_nvfp4_mixed; no CUDA graphs; the pipeline split accounts for the embedding and the loss as in the H100
# case, experiments/validation/cases/bridge-llama-3.1-405b-h100-1024.yaml).
# Published: docs/performance-summary.md at v0.5.0, "26.06 NeMo Container", DGX-GB200, LLAMA3.1_405B, NVFP4: 1166
# tokens/s/GPU, 2944 model TFLOP/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check.
# Model: examples/models/llama-3.1-405b.json.
--tensor-model-parallel-size 4 --sequence-parallel
--pipeline-model-parallel-size 16 --num-virtual-stages-per-pipeline-rank 8
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--context-parallel-size 1 --micro-batch-size 1 --global-batch-size 1536 --seq-length 8192
--bf16 --fp4-format e2m1 --fp4-recipe nvfp4 --fp4-param-gather
--swiglu --untie-embeddings-and-output-weights
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
