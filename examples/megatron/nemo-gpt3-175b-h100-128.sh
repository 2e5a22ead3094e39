# GPT-3 175B pre-training on 128 DGX-H100 GPUs in FP8, the first GPT3-175B row of NVIDIA's NeMo 24.07 performance
# table (NVIDIA/NeMo@070a0bb1 docs/source/performance/performance_summary.md: 128 GPUs, GBS 256, MBS 1, sequence
# 2,048, TP 4, PP 8, CP 1, VP 6; 726 tokens/s/GPU, 782 model TFLOP/s/GPU), for
#   moesim run --model examples/models/gpt3-175b.yaml --cluster h100 --gpus 128 \
#       --megatron-args examples/megatron/nemo-gpt3-175b-h100-128.sh
# Out of the corpus: the table prints only the columns above. The rest is NeMo-Framework-Launcher's GPT-3 175B
# configuration at tag 24.07 (launcher_scripts/conf/training/gpt3/175b.yaml with the FP8 keys of 175b_fp8.yaml:
# sequence parallelism, FP8 hybrid with delayed scaling, the distributed optimizer overlapping its BF16 gradient
# reduce-scatter and parameter all-gather, no recomputation) and the userbuffers TP overlap its 175b.yaml names
# for H100 at TP 4 (ub_cfg_h100_h12288_tp4_mbs1_seqlen2048); neither config at that tag is this row's (VP 12,
# GBS 2,048). Its hidden and attention dropout of 0.1 come with the model file (examples/models/gpt3-175b.yaml).
--tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap --pipeline-model-parallel-size 8
--num-virtual-stages-per-pipeline-rank 6
--micro-batch-size 1 --global-batch-size 256 --seq-length 2048
--bf16 --fp8-format hybrid
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
