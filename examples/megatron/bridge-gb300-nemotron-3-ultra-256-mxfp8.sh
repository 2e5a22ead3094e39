# Megatron-LM arguments of Megatron-Bridge's MXFP8 Nemotron 3 Ultra 550B-A55B pre-training job on 256 GB300
# (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/perf_recipes/nemotronh/gb300/nemotronh.py
# nemotron_3_ultra_pretrain_256gpu_gb300_fp8mx_config; perf_recipes/nemotronh/common.py
# _apply_nemotron_3_ultra_perf_defaults (HybridEP, grouped GEMM, permute and router fusion, the TE op fuser, fused
# attention, native cross-entropy fusion, forced balance, no CUDA graphs) and _apply_nemotron_3_ultra_fsdp_hsdp: Megatron
# FSDP sharding weights, gradients and optimizer state inside each 64-GPU NVLink domain, the optimizer state sharded
# across the 4 domains too (Hybrid-FSDP: --num-distributed-optimizer-instances 4 --outer-dp-sharding-strategy optim,
# workloads/specs/hybrid_dp.py), BF16 gradient communication and main gradients, FP32 main weights; the model recipe
# recipes/nemotronh/h100/nemotron_3_ultra.py: two MTP depths sharing one module). Model:
# examples/models/nemotron-3-ultra-550b-a55b.yaml. Published: docs/performance-summary.md, 26.08 container,
# DGX-GB300, Nemotron_3_Ultra, MXFP8: 3552 tokens/s/GPU. Out of the validation corpus (python -m
# experiments.validation.blackwell.check). The expert MLP's activation input offloaded to host memory is modelled for
# memory, its copies are not timed; not modelled: TE's CuteDSL fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1),
# keep_mtp_spec_in_bf16 (the MTP modules simulated in MXFP8).
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1
--expert-model-parallel-size 64 --expert-tensor-parallel-size 1
--micro-batch-size 1 --global-batch-size 256 --seq-length 8192
--bf16 --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag
--squared-relu --use-fused-weighted-squared-relu --disable-bias-linear --untie-embeddings-and-output-weights
--position-embedding-type none --attention-backend fused
--mtp-num-layers 2 --mtp-use-repeated-layer --mtp-hybrid-override-pattern "*E"
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32
--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing
--moe-router-padding-for-quantization
--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-dtype fp32
--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4
--use-transformer-engine-op-fuser
--recompute-granularity selective --recompute-modules moe_act
--fine-grained-activation-offloading --offload-modules fused_group_mlp --min-offloaded-tensor-size 500000000
--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --use-distributed-optimizer
--num-distributed-optimizer-instances 4 --outer-dp-sharding-strategy optim
--megatron-fsdp-grad-comm-dtype bf16 --megatron-fsdp-main-params-dtype fp32 --megatron-fsdp-main-grads-dtype bf16
--no-gradient-accumulation-fusion --overlap-grad-reduce --overlap-param-gather
--cross-entropy-loss-fusion --cross-entropy-fusion-impl native
