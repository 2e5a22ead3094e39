# Megatron-LM arguments of Megatron-Bridge's BF16 Qwen3-30B-A3B job on 2 DGX H100 nodes (EP 16, HybridEP, no EP
# overlap; the validation case bridge-ab-qwen3-30b-a3b-bf16-hybridep without its CUDA graphs), for
#   moesim run --model examples/models/qwen3-30b-a3b.json --cluster h100 --gpus 16 \
#       --megatron-args examples/megatron/qwen3-30b-a3b-h100-16.sh
#   moesim search --model examples/models/qwen3-30b-a3b.json --cluster h100 --gpus 16 --jobs 2 \
#       --megatron-args examples/megatron/qwen3-30b-a3b-h100-16.sh    # the layouts Megatron-Core can run around it
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --expert-model-parallel-size 16
--micro-batch-size 1 --global-batch-size 1024 --seq-length 4096
--bf16 --swiglu --untie-embeddings-and-output-weights
--moe-grouped-gemm --moe-router-fusion --moe-router-force-load-balancing
--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te
# moe_hybridep_num_sms = 32: Megatron-Bridge@067f987d perf_recipes/_common.py _benchmark_common
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-permute-fusion
--moe-hybridep-num-sms 32
