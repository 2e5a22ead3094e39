# Megatron-LM arguments of a Mixtral-8x22B job on 16 DGX H100 nodes, read by
#   moesim run --model examples/models/mixtral-8x22b.json --cluster h100 --gpus 128 \
#       --megatron-args examples/megatron/mixtral-8x22b-h100-128.sh
# Flags may span lines (with or without \), # starts a comment; flags that do not change performance
# (data, logging, checkpoints) are listed as ignored_args in the JSON report.
torchrun --nproc-per-node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 8 --sequence-parallel \
    --pipeline-model-parallel-size 4 \
    --expert-model-parallel-size 8 \
    --expert-tensor-parallel-size 1 --moe-grouped-gemm --moe-token-dispatcher-type alltoall \
    --use-distributed-optimizer \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
    --micro-batch-size 1 --global-batch-size 512 --seq-length 4096 \
    --bf16 --swiglu --untie-embeddings-and-output-weights \
    --lr 1e-4 --train-iters 1000 --data-path /data/my-corpus
