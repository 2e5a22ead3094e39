# Nemotron-4 340B pre-training on 128 DGX-H100 GPUs in FP8, the Nemotron-340B row of NVIDIA's NeMo 24.07 performance
# table (NVIDIA/NeMo@070a0bb1 docs/source/performance/performance_summary.md: 128 GPUs, GBS 32, MBS 1, sequence
# 4,096, TP 8, PP 8, CP 1, VP 12; 322 tokens/s/GPU, 678 model TFLOP/s/GPU), for
#   moesim run --model examples/models/nemotron-4-340b.json --cluster h100 --gpus 128 \
#       --megatron-args examples/megatron/nemo-nemotron-4-340b-h100-128.sh
# Out of the corpus: beyond the printed columns the recipe is assumed (NeMo-Framework-Launcher's
# conf/training/nemotron/nemotron_340b.yaml at tag 24.07 runs PP 12, VP 8 in BF16: sequence parallelism, the
# distributed optimizer overlapping its BF16 reduce-scatter and all-gather, no biases, no dropout), with FP8 hybrid
# and TE's TP overlap as the table's GPT-3 rows.
--tensor-model-parallel-size 8 --sequence-parallel --tp-comm-overlap --pipeline-model-parallel-size 8
--num-virtual-stages-per-pipeline-rank 12
--micro-batch-size 1 --global-batch-size 32 --seq-length 4096
--bf16 --fp8-format hybrid
--squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
