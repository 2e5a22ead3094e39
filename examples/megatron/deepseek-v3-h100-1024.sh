#!/bin/bash
# Megatron-Bridge's DeepSeek-V3 job on 128 DGX H100 nodes (the validation case bridge-deepseek-v3-h100-1024) written
# as Megatron-LM's own examples write a launch script (examples/mixtral/train_mixtral_8x7b_distributed.sh: bash
# arrays expanded into one torchrun line), for
#   moesim run --model examples/models/deepseek-v3.json --cluster h100 --gpus 1024 \
#       --megatron-args examples/megatron/deepseek-v3-h100-1024.sh
# moesim reads it as bash would: variables, ${VAR:-default}, $(( )), arrays; what the script leaves unset
# ($DATA_PATH here) is named in one note.

GPUS_PER_NODE=8
NNODES=${SLURM_NNODES:-128}
WORLD_SIZE=$(( GPUS_PER_NODE * NNODES ))
PP=8

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
)

MODEL_ARGS=(
    --swiglu
    --untie-embeddings-and-output-weights
    --multi-latent-attention
    --mtp-num-layers 1
)

MOE_ARGS=(
    --moe-token-dispatcher-type flex
    --moe-enable-deepep
    --moe-router-num-groups 8
    --moe-router-group-topk 4
    --moe-grouped-gemm
    --moe-permute-fusion
    --moe-router-fusion
    --moe-router-force-load-balancing
    --overlap-moe-expert-parallel-comm
    --delay-wgrad-compute
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
    --sequence-parallel
    --pipeline-model-parallel-size $PP
    --pipeline-model-parallel-layout "Et|(tt|)*30mL"  # 32 blocks: 4 virtual stages per rank
    --context-parallel-size 1
    --expert-model-parallel-size $(( WORLD_SIZE / 16 ))
    --expert-tensor-parallel-size 1
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 8192
    --seq-length 4096
    --bf16
    --fp8-format hybrid
    --fp8-recipe tensorwise
    --fp8-param-gather
    --recompute-granularity selective
    --recompute-modules mla_up_proj mlp
    --use-distributed-optimizer
    --use-precision-aware-optimizer
    --main-grads-dtype bf16
    --exp-avg-dtype bf16
    --exp-avg-sq-dtype bf16
)

DATA_ARGS=(
    --data-path $DATA_PATH
    --split 99,1,0
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${MOE_ARGS[@]} \
    "${MODEL_PARALLEL_ARGS[@]}" \
    ${TRAINING_ARGS[@]} \
    ${DATA_ARGS[@]} 2>&1 | tee train.log
