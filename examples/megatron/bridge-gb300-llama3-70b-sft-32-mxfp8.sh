# Megatron-LM arguments of Megatron-Bridge's Llama 3 70B supervised fine-tuning (all weights trained) on 32 GB300,
# MXFP8 (NVIDIA-NeMo/Megatron-Bridge v0.5.0 (fcbb6031)
# scripts/performance/configs/llama/llama3_workload_base_configs.py LLAMA3_70B_SFT_CONFIG_GB300_FP8_MX_V1: TP 1, PP 2,
# VP 20, MBS 1, GBS 32, CUDA graphs transformer_engine scope mlp; llama3_llm_finetune.py llama3_70b_sft_config_gb300
# and set_llama3_common_peft_configs: sequence 4,096 (packed SQuAD), gradients reduced in BF16, the distributed
# optimizer; utils/precision.py get_precision_config: bf16_with_mxfp8_mixed). Published:
# docs/performance-summary-archive.md (4ab94dfa), "26.06 NeMo Container", SFT, DGX-GB300, LLAMA3_70B, MXFP8: 4,312
# tokens/s/GPU. Out of the corpus: python -m experiments.validation.blackwell.check. Model:
# examples/models/llama-3.1-70b.json.
--tensor-model-parallel-size 1
--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 20
--context-parallel-size 1 --micro-batch-size 1 --global-batch-size 32 --seq-length 4096
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--swiglu --untie-embeddings-and-output-weights --disable-bias-linear
--cuda-graph-impl transformer_engine --cuda-graph-modules mlp
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
