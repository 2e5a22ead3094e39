"""Megatron-LM's older spellings and Megatron-DeepSpeed's, read as the Megatron that took them did, in today's flags.

Published launch scripts of 2021-22 (Megatron-LM's own ``examples/academic_paper_scripts/sc21``, the SC21 paper's
runs; Megatron-DeepSpeed's BLOOM and MT-NLG scripts) say full recomputation and the data-parallel wrapper in words
that Megatron-LM has since renamed. Ignored, a 2021 job would be simulated without recomputation (a third of its
compute) and with another gradient all-reduce. Each rewrite leaves a note saying what it read.

- ``--checkpoint-activations`` [``--checkpoint-num-layers N``]: before 2021-08 the switch for full recomputation,
  uniform chunks of N layers (default 1); Megatron-LM 6985e589 (2021-08) reads it as "no longer valid ...
  Defaulting to activation-checkpoint-method=uniform" (megatron/arguments.py validate_args); today's Megatron-LM
  exits on it, moesim reads it as the Megatron that ran those scripts did (Megatron-DeepSpeed still takes it).
- ``--activations-checkpoint-method uniform|block`` [``--activations-checkpoint-num-layers N``, default 1]: the
  2021-22 spelling of ``--recompute-granularity full --recompute-method M --recompute-num-layers N`` (6985e589
  megatron/arguments.py _add_training_args; renamed with selective recomputation in 2022).
- ``--DDP-impl local|torch`` (default local): ``local``, Megatron's own DDP, all-reduces the gradients once the
  backward of the last micro-batch is done (6985e589 megatron/training.py train_step: ``allreduce_gradients``);
  ``torch``, PyTorch's DDP, all-reduces gradient buckets while that backward runs (megatron/schedules.py runs the
  other micro-batches under ``model.no_sync``), which is what ``--overlap-grad-reduce`` says today.
- Attention: the Megatron-LM that took these flags had no Transformer Engine layers and, until ``--use-flash-attn``
  (2023; Megatron-DeepSpeed's ``--use-flash-attn-v2`` / ``-triton``), no FlashAttention: its ParallelAttention
  (6985e589 megatron/model/transformer.py) multiplies Q K^T into s x s scores (``torch.baddbmm``), softmaxes them in
  Megatron's fused kernel and multiplies them by V (``torch.bmm``): today's ``--transformer-impl local``; and so does
  Megatron-DeepSpeed's unless it is given one of those flags.
- Megatron-DeepSpeed (bigscience-workshop/ and microsoft/Megatron-DeepSpeed megatron/arguments.py): ``--deepspeed``
  with ``--zero-stage 1`` shards the optimizer states over data parallelism, as ``--use-distributed-optimizer`` does,
  and so does stage 0 under ``--bf16`` (DeepSpeed's BF16_Optimizer partitions them itself: "bf16 must use z0! it
  implements its own zero stage 1 equivalent", bigscience train/tr11-176B-ml/tr11-176B-ml.slurm); stages 2 and 3
  shard the gradients and the weights too, Megatron FSDP's ``optim_grads`` and ``optim_grads_params``, which
  DeepSpeed's pipeline refuses beside PP. ``--pad-vocab-size-to N`` pads the vocabulary to N exactly;
  ``--pp-partition-method type:transformer|embedding`` counts the first and last stages' embeddings as layers of the
  split (BLOOM's README: "pp rank 0: [embed | 5 transformer blocks] ... pp rank 11: [5 transformer blocks | embed]").
- PP sends: that Megatron-LM split each send of a TP layer without sequence parallelism over the TP ranks, which send
  1/t each and all-gather it on the receiving node (SC21 Sec. 4.1; 6985e589 megatron/p2p_communication.py, on unless
  ``--no-scatter-gather-tensors-in-pipeline``), and DeepSpeed's pipeline partitions its sends alike (PipelineEngine
  ``is_pipe_partitioned`` under model parallelism); today's Megatron-Core sends the whole tensor from every rank.
"""

from __future__ import annotations

from typing import Any

from topologies.errors import ConfigError

LEGACY_RECOMPUTE = ("--checkpoint-activations", "--activations-checkpoint-method")
FLASH_FLAGS = ("--use-flash-attn", "--use-flash-attn-v2", "--use-flash-attn-triton")
LEGACY_RECOMPUTE_LAYERS = ("--checkpoint-num-layers", "--activations-checkpoint-num-layers")


def modernized(args: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``args`` with the legacy flags above replaced by today's (a copy; ``args`` itself is not changed)."""
    legacy = any(flag in args for flag in (*LEGACY_RECOMPUTE, "--DDP-impl", "--deepspeed"))  # no TE layers then
    args = dict(args)
    _recompute(args, notes)
    _ddp_impl(args, notes)
    _attention(args, notes, legacy)
    _deepspeed(args, notes)
    _scatter_gather(args, notes, legacy)
    return args


def _scatter_gather(args: dict[str, Any], notes: list[str], legacy: bool) -> None:
    """A legacy job's PP sends split over its TP ranks (above); a job of today's Megatron gets the flag set, since its
    sends are whole tensors either way."""
    split = legacy and not args.get("--no-scatter-gather-tensors-in-pipeline")
    args["--no-scatter-gather-tensors-in-pipeline"] = not split
    tp, pp = args.get("--tensor-model-parallel-size", 1), args.get("--pipeline-model-parallel-size", 1)
    if split and tp > 1 and pp > 1 and not args.get("--sequence-parallel"):
        notes.append(
            f"PP sends split over the {tp} TP ranks and all-gathered on the receiving node's NVLink (2021-22 Megatron-LM"
            " and DeepSpeed's pipeline; SC21 Sec. 4.1; --no-scatter-gather-tensors-in-pipeline turns it off)"
        )


def _attention(args: dict[str, Any], notes: list[str], legacy: bool) -> None:
    flash = [flag for flag in FLASH_FLAGS if args.pop(flag, False)]
    if not legacy or "--transformer-impl" in args or "--attention-backend" in args:
        return
    if flash:
        args["--attention-backend"] = "flash"
    else:
        args["--transformer-impl"] = "local"
        notes.append(
            "a 2021-22 Megatron-LM command line without --use-flash-attn: its own attention, the s x s scores "
            "materialized (baddbmm, fused softmax, bmm), as --transformer-impl local"
        )


def _recompute(args: dict[str, Any], notes: list[str]) -> None:
    switch = args.pop("--checkpoint-activations", False)
    method = args.pop("--activations-checkpoint-method", None)
    layers = [(flag, args.pop(flag)) for flag in LEGACY_RECOMPUTE_LAYERS if flag in args]
    if not (switch or method):
        if layers:
            notes.append(f"{' / '.join(LEGACY_RECOMPUTE_LAYERS)} without {' or '.join(LEGACY_RECOMPUTE)}: no effect")
        return
    if "--recompute-granularity" in args or args.get("--recompute-activations"):
        raise ConfigError(
            LEGACY_RECOMPUTE[1] if method else LEGACY_RECOMPUTE[0],
            "Megatron-LM's 2021-22 spelling of full recomputation beside --recompute-granularity / "
            "--recompute-activations: keep one",
        )
    spelled = f"--activations-checkpoint-method {method}" if method else "--checkpoint-activations"
    method = method or "uniform"
    flag, count = layers[-1] if layers else (LEGACY_RECOMPUTE_LAYERS[1], 1)
    if count < 1:
        raise ConfigError(flag, f"must be >= 1, got {count}")
    args.update({"--recompute-granularity": "full", "--recompute-method": method, "--recompute-num-layers": count})
    notes.append(
        f"{spelled}: Megatron-LM's 2021-22 spelling of --recompute-granularity full --recompute-method {method} "
        f"--recompute-num-layers {count}"
    )


def _ddp_impl(args: dict[str, Any], notes: list[str]) -> None:
    impl = args.pop("--DDP-impl", None)
    if impl is None:
        return
    if impl == "torch":
        if args.get("--use-distributed-optimizer"):  # Megatron-LM 2022 validate_args: the optimizer needs local DDP
            raise ConfigError("--DDP-impl", "the distributed optimizer needs --DDP-impl local (Megatron-LM)")
        args["--overlap-grad-reduce"] = True
        notes.append(
            "--DDP-impl torch: PyTorch DDP all-reduces gradient buckets during the last micro-batch's backward, "
            "read as --overlap-grad-reduce"
        )
    elif not args.get("--overlap-grad-reduce"):  # 2023's local DDP took --overlap-grad-reduce too
        notes.append("--DDP-impl local: Megatron's DDP all-reduces the gradients after the backward, not overlapped")


def _deepspeed(args: dict[str, Any], notes: list[str]) -> None:
    if "--pad-vocab-size-to" in args:
        args.setdefault("--padded-vocab-size", args.pop("--pad-vocab-size-to"))
    if args.pop("--pp-partition-method", "") == "type:transformer|embedding":
        args.update({"--account-for-embedding-in-pipeline-split": True, "--account-for-loss-in-pipeline-split": True})
        notes.append(
            "--pp-partition-method type:transformer|embedding: the embedding and the output layer each count as a "
            "layer of the split, as --account-for-embedding/loss-in-pipeline-split"
        )
    given = "--zero-stage" in args
    stage = args.pop("--zero-stage", 1)  # Megatron-DeepSpeed's default
    if not args.pop("--deepspeed", False):
        if given:
            notes.append("--zero-stage without --deepspeed: no effect (DeepSpeed's ZeRO runs under --deepspeed only)")
        return
    if stage not in range(4):
        raise ConfigError("--zero-stage", f"DeepSpeed's ZeRO stages are 0 to 3, got {stage}")
    if stage >= 2 and args.get("--pipeline-model-parallel-size", 1) > 1:
        raise ConfigError("--zero-stage", "DeepSpeed's pipeline runs with ZeRO stage 0 or 1 only: --zero-stage 1")
    if stage >= 2:
        args["--use-megatron-fsdp"] = True
        args["--data-parallel-sharding-strategy"] = "optim_grads" if stage == 2 else "optim_grads_params"
        read = "the gradients (and at stage 3 the weights) sharded too, as Megatron FSDP"
    elif stage == 1 or args.get("--bf16"):
        args["--use-distributed-optimizer"] = True
        read = "the optimizer states sharded over data parallelism, as --use-distributed-optimizer"
    else:
        read = "the optimizer states on every data-parallel rank"
    notes.append(f"--deepspeed --zero-stage {stage}: {read}")
