"""Megatron-LM's flags at the pinned commit, and why moesim reads no value from each flag it does not model.

``megatron_flags_d98e8a64dd.tsv`` lists every ``--flag`` the parser of NVIDIA/Megatron-LM
d98e8a64ddf34856e74b24714e3bedb2f5a39553 accepts, with the ``_add_*_args`` function of
megatron/training/arguments.py that adds it: the literal ``add_argument`` names, and the names
``ArgumentGroupFactory`` (megatron/training/argument_utils.py) generates from the config dataclasses it is given
(``--field-name``; a bool field that defaults to True as ``--no-field-name`` and ``--disable-field-name``; the
``argparse_meta`` ``arg_names`` where a field gives them; the ``exclude`` lists honoured). It was read from the
source by AST, not by running Megatron's parser (which needs torch): flags a plug-in adds at run time
(``extra_args_provider``) are not in it.

Every flag has a class (``flag_class``): "modelled" (workloads/inputs/megatron_args.py FLAGS: moesim reads its
value), "no effect" (a reason why the step's time and memory do not depend on it), "not modelled" (it may change
step time or memory and moesim simulates without it: listed, and named by ``moesim validate``), or "unknown" (not a
flag of the pinned Megatron-LM: Megatron would refuse it).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

PIN = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
PINNED_LIST = Path(__file__).with_name("megatron_flags_d98e8a64dd.tsv")

# Why a flag that moesim reads no value from is accepted: exact names first, then prefixes.
NO_EFFECT = "does not change step time or memory"
OPTIMIZER = "optimizer hyper-parameter: " + NO_EFFECT
SCHEDULE = "learning-rate / training schedule: " + NO_EFFECT
DATA = "data pipeline (moesim simulates full sequences of --seq-length tokens)"
TOKENIZER = "tokenizer: " + NO_EFFECT + " (the vocabulary comes from --vocab-size or the model)"
CHECKPOINT = "checkpointing: outside the simulated step"
LOGGING = "logging / profiling / evaluation: outside the simulated step"
SEED = "seed / initialisation: " + NO_EFFECT
NUMERICS = "numerics / regularisation: " + NO_EFFECT
LAUNCH = "process launch / framework plumbing: " + NO_EFFECT
NOT_SIMULATED = "parsed, not yet simulated"
NOT_MODELLED = "not modelled"
UNKNOWN = "unknown to moesim"

IGNORED: dict[str, str] = {
    # HybridEP's metadata scan kernel (TransformerConfig.moe_hybridep_num_sms_preprocessing, 108 at d98e8a64dd): a
    # compute-stream kernel timed by its bytes (workloads/dispatchers/flex_hybridep.py); the SMs it is launched on
    # enter neither that time nor what a collective beside it leaves to compute (simulator.streams.sm_share)
    "--moe-hybridep-num-sms-preprocessing": NOT_MODELLED + ": HybridEP's preprocess kernel is timed by its bytes",
    "--data-parallel-random-init": SEED,
    # Unfused, Megatron-Core's bias-dropout-add runs the dropout and the add as two kernels (fused_bias_dropout.py
    # _bias_dropout_add_func at d98e8a64): the same bytes plus the dropout's output written and read once more under
    # hidden dropout, timed here as the fused kernel (workloads/recipes/residual.py); without dropout the two agree
    "--no-bias-dropout-fusion": NOT_MODELLED
    + ": under hidden dropout the unfused bias-dropout-add is timed as the fused one",
    # with --fp8-param-gather under MXFP8 the parameter all-gather lands in the gradient buffer and is copied into the
    # weights' own storage (megatron/core/distributed/param_and_grad_buffer.py _post_param_sync at d98e8a64): the memory
    # moesim counts (quantized weights, no separate parameter buffer; simulator/memory/per_gpu.py); the copy, a pass
    # over the gathered weights once a step, is not timed
    "--reuse-grad-buf-for-mxfp8-param-ag": NOT_MODELLED + ": the copy from the gradient buffer into the weights "
    "after each parameter all-gather (its memory is what moesim counts under --fp8-param-gather)",
    # DSA (workloads/recipes/mla.py): the indexer's KL loss against the main attention's scores (dsa.py
    # compute_dsa_indexer_loss at d98e8a64: with no fused backend, an FP32 bmm over every head, query and key; the
    # TileLang / cuDNN backends' hooks fuse it) has no published timing and is not charged; the sparse attention is
    # timed at one rate whichever backend runs it (FlashAttention's table at the mean keys a query attends)
    "--dsa-indexer-loss-coeff": NOT_MODELLED + ": DSA's indexer KL loss is not timed (no published timing of it)",
    "--dsa-indexer-use-sparse-loss": NOT_MODELLED + ": DSA's indexer KL loss is not timed (no published timing of it)",
    "--dsa-kernel-backend": NOT_MODELLED + ": DSA's sparse attention is timed at one rate whichever backend runs it "
    "(workloads/recipes/mla.py absorbed_attention)",
    # attention sinks (GPT-OSS): one more logit per head and query, not timed; TE runs them in cuDNN's fused
    # attention, the kernel moesim times under --attention-backend auto (workloads/inputs/megatron.py)
    "--softmax-type": NUMERICS,
    **dict.fromkeys(
        (
            "--lr",
            "--min-lr",
            "--weight-decay",
            "--clip-grad",
            "--adam-eps",
            "--sgd-momentum",
            "--muon-momentum",
            "--muon-nesterov",
            "--muon-scale-mode",
            "--muon-extra-scale-factor",
            "--muon-coefficient-type",
        ),
        OPTIMIZER,
    ),
    **dict.fromkeys(("--train-iters", "--train-samples", "--exit-interval", "--exit-duration-in-mins"), SCHEDULE),
    **dict.fromkeys(("--split", "--mock-data", "--num-workers", "--dataloader-type", "--eod-mask-loss"), DATA),
    "--vocab-file": TOKENIZER,
    **dict.fromkeys(("--save", "--load", "--finetune", "--use-checkpoint-args", "--async-save"), CHECKPOINT),
    **dict.fromkeys(("--seed", "--init-method-std", "--use-cpu-initialization"), SEED),
    **dict.fromkeys(
        (
            "--normalization",
            "--norm-epsilon",
            "--max-position-embeddings",
            "--attention-softmax-in-fp32",
            "--no-masked-softmax-fusion",
            "--use-rotary-position-embeddings",
            "--no-position-embedding",
            "--apply-layernorm-1p",
        ),
        NUMERICS,
    ),
    **dict.fromkeys(
        (
            "--use-mcore-models",
            "--distributed-backend",
            "--distributed-timeout-minutes",
            "--no-create-attention-mask-in-dataloader",
            "--manual-gc",
            "--manual-gc-interval",
            "--ckpt-format",
        ),
        LAUNCH,
    ),
    **dict.fromkeys(
        (
            "--distribute-saved-activations",
            "--hierarchical-context-parallel-sizes",
            "--rampup-batch-size",
        ),
        NOT_MODELLED,
    ),
}
IGNORED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("--lr-", SCHEDULE),
    ("--adam-", OPTIMIZER),
    ("--weight-decay-", OPTIMIZER),
    ("--start-weight-decay", OPTIMIZER),
    ("--end-weight-decay", OPTIMIZER),
    ("--initial-loss-scale", OPTIMIZER),
    ("--min-loss-scale", OPTIMIZER),
    ("--hysteresis", OPTIMIZER),
    ("--data-", DATA),
    ("--train-data-", DATA),
    ("--valid-data-", DATA),
    ("--test-data-", DATA),
    ("--reset-", DATA),
    ("--tokenizer-", TOKENIZER),
    ("--save-", CHECKPOINT),
    ("--load-", CHECKPOINT),
    ("--no-load-", CHECKPOINT),
    ("--no-save-", CHECKPOINT),
    ("--ckpt-", CHECKPOINT),
    ("--dist-ckpt-", CHECKPOINT),
    ("--auto-detect-ckpt", CHECKPOINT),
    ("--pretrained-checkpoint", CHECKPOINT),
    ("--log-", LOGGING),
    ("--tensorboard", LOGGING),
    ("--wandb-", LOGGING),
    ("--timing-log", LOGGING),
    ("--profile", LOGGING),
    ("--eval-", LOGGING),
    ("--rotary-", NUMERICS),
    ("--moe-router-load-balancing", NUMERICS),
    ("--moe-aux-loss", NUMERICS),
    ("--moe-z-loss", NUMERICS),
    ("--moe-router-score-function", NUMERICS),
    ("--moe-router-enable-expert-bias", NUMERICS),
    ("--moe-router-bias-update-rate", NUMERICS),
    ("--moe-router-topk-scaling-factor", NUMERICS),
    ("--moe-router-pre-softmax", NUMERICS),
    ("--moe-router-dtype", NUMERICS),
    ("--moe-input-jitter", NUMERICS),
    ("--moe-per-layer-logging", LOGGING),
    ("--no-check-for-nan", NUMERICS),
)

OTHER_WORKLOAD = (
    "another workload (inference, RL, vision, retrieval, distillation, fine-tuning): no effect on pre-training"
)
NOT_EXPRESSED = (
    NOT_MODELLED + ": an architecture moesim cannot express (Mamba beside attention, linear attention, vision)"
)
NOT_MODELLED_OPTION = (
    NOT_MODELLED + ": a Megatron-Core option that may change step time or memory; simulated without it"
)

# Megatron's argument groups (the _add_*_args function that adds a flag) whose flags cannot change a training
# step's time or memory; the others (network size, transformer configuration, MoE, MLA, training, distributed,
# mixed precision, regularisation, experimental) default to NOT_MODELLED_OPTION unless named above or below.
GROUP_REASONS: dict[str, str] = {
    "_add_logging_args": LOGGING,
    "_add_validation_args": LOGGING,
    "_add_one_logger_args": LOGGING,
    "_add_straggler_detector_args": LOGGING,
    "_add_workload_inspector_server_args": LOGGING,
    "_add_checkpointing_args": CHECKPOINT,
    "_add_tokenizer_args": TOKENIZER,
    "_add_data_args": DATA,
    "_add_learning_rate_args": SCHEDULE,
    "_add_initialization_args": SEED,
    "_add_autoresume_args": LAUNCH,
    "_add_ft_package_args": LAUNCH,
    "_add_inprocess_restart_args": LAUNCH,
    "_add_fault_injector_args": LAUNCH,
    "_add_msc_args": CHECKPOINT,
    "_add_inference_args": OTHER_WORKLOAD,
    "_add_rl_args": OTHER_WORKLOAD,
    "_add_vision_args": OTHER_WORKLOAD,
    "_add_biencoder_args": OTHER_WORKLOAD,
    "_add_logits_distillation_args": OTHER_WORKLOAD,
    "_add_sft_args": OTHER_WORKLOAD,
    "_add_rerun_machine_args": NUMERICS,
    "_add_experimental_attention_variant_args": NOT_EXPRESSED,
    "_add_heterogeneous_args": NOT_EXPRESSED,
}
# Flags of the performance groups whose class is not their group's default, by prefix.
MORE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("--inference-", OTHER_WORKLOAD),
    ("--flash-decode", OTHER_WORKLOAD),
    ("--mlp-chunks-for-prefill", OTHER_WORKLOAD),
    ("--nccl-all-reduce-for-prefill", OTHER_WORKLOAD),
    ("--moe-pad-experts-for-cuda-graph-inference", OTHER_WORKLOAD),
    ("--cache-mla-latents", OTHER_WORKLOAD),
    ("--mamba-", NOT_EXPRESSED),
    ("--hybrid-", NOT_EXPRESSED),
    ("--is-hybrid-model", NOT_EXPRESSED),
    ("--linear-attention-freq", NOT_EXPRESSED),
    ("--gdp-", NOT_EXPRESSED),
    # DSA's and mHC's options beside the sizes moesim reads (workloads/inputs/megatron_model.py): the indexer loss,
    # kernel backend, rotation and scoring of the one, the init and block recomputation of the other
    ("--dsa-", NOT_MODELLED_OPTION),
    ("--no-dsa-", NOT_MODELLED_OPTION),
    ("--disable-dsa-", NOT_MODELLED_OPTION),
    ("--mhc-init-", SEED),
    ("--mhc-recompute-", NOT_MODELLED_OPTION),
    ("--disable-mamba-", NOT_EXPRESSED),
    ("--mtp-hybrid-override-pattern", NOT_EXPRESSED),
    ("--flight-recorder-", LOGGING),
    ("--no-flight-recorder-", LOGGING),
    ("--disable-flight-recorder-", LOGGING),
    ("--pytorch-profiler-", LOGGING),
    ("--use-pytorch-profiler", LOGGING),
    ("--record-memory-history", LOGGING),
    ("--memory-snapshot-path", LOGGING),
    ("--record-shapes", LOGGING),
    ("--nvtx-ranges", LOGGING),
    ("--config-logger-dir", LOGGING),
    ("--dump-param-to-param-group-map", LOGGING),
    ("--exit-signal", LAUNCH),
    ("--local-rank", LAUNCH),
    ("--lazy-mpu-init", LAUNCH),
    ("--fake-process-group", LAUNCH),
    # a gate: the experimental features it allows change the step through their own flags (arguments.py at d98e8a64dd)
    ("--enable-experimental", LAUNCH),
    ("--yaml-cfg", LAUNCH),
    ("--spec", LAUNCH),
    ("--distributed-timeout-seconds-after-init", LAUNCH),
    ("--nccl-communicator-config-path", LAUNCH),
    ("--init-model-with-meta-device", LAUNCH),
    ("--no-initialization", SEED),
    ("--gpu-sniff-test-interval", LOGGING),
    ("--check-weight-hash-across-dp-replicas-interval", LOGGING),
    ("--cuda-graph-warmup-steps", "CUDA graphs: capture happens in warm-up steps before the steady state simulated"),
    ("--error-injection-", NUMERICS),
    ("--rerun-mode", NUMERICS),
    ("--result-rejected-tracker-filename", NUMERICS),
    ("--check-for-large-grads", NUMERICS),
    ("--check-for-spiky-loss", NUMERICS),
    ("--loss-scale-window", OPTIMIZER),
    ("--lion-", OPTIMIZER),
    ("--mup-", NUMERICS),
    ("--use-mup", NUMERICS),
    ("--qk-clip", NUMERICS),
    ("--mscale", NUMERICS),
    ("--yarn-", NUMERICS),
    ("--no-yarn-", NUMERICS),
    ("--rope-", NUMERICS),
    ("--use-rope-scaling", NUMERICS),
    ("--no-rope-freq", NUMERICS),
    ("--mrope-section", NUMERICS),
    ("--relative-attention-", NUMERICS),
    ("--apply-query-key-layer-scaling", NUMERICS),
    ("--apply-residual-connection-post-layernorm", NUMERICS),
    ("--apply-wd-to-qk-layernorm", OPTIMIZER),
    ("--embedding-init-method-std", SEED),
    ("--glu-linear-offset", NUMERICS),
    ("--mtp-loss-scaling-factor", NUMERICS),
    ("--onnx-safe", NUMERICS),
    ("--deterministic-mode", NOT_MODELLED_OPTION),
)


@cache
def pinned_flags() -> dict[str, str]:
    """Every flag of the pinned Megatron-LM parser -> the _add_*_args function that adds it."""
    rows = (line.split("\t") for line in PINNED_LIST.read_text(encoding="utf-8").splitlines() if line.strip())
    return {name: group for name, group in rows}


def ignored_reason(name: str) -> str:
    """Why moesim reads no value from flag ``name``: its own reason, its prefix's, its Megatron group's, the default
    of a performance group (NOT_MODELLED_OPTION), or UNKNOWN when the pinned Megatron-LM has no such flag."""
    if name in IGNORED:
        return IGNORED[name]
    for prefix, reason in (*IGNORED_PREFIXES, *MORE_PREFIXES):
        if name.startswith(prefix):
            return reason
    group = pinned_flags().get(name)
    if group is None:
        return UNKNOWN
    return GROUP_REASONS.get(group, NOT_MODELLED_OPTION)


def with_nearest(name: str) -> str:
    """``name``, and the pinned Megatron-LM flag it most likely misspells where one is near (Megatron's parser takes
    no abbreviation, allow_abbrev=False, so ``--tensor-model-parallel`` is no flag there either)."""
    import difflib  # NOTE: loaded only for this warning

    near = difflib.get_close_matches(name, pinned_flags(), n=1, cutoff=0.85)
    return f"{name} (did you mean {near[0]}?)" if near else name


def reason_class(reason: str) -> str:
    """The class of a reason: "not modelled", "unknown" or "no effect"."""
    if reason.startswith((NOT_MODELLED, NOT_SIMULATED)):
        return "not modelled"
    return "unknown" if reason == UNKNOWN else "no effect"
