"""A Megatron-LM job spoken back in Megatron's words (issue 41, item 3): the layout moesim understood from the
flags, the memory terms of its peak stage, and the flags it ignored, in one line each."""

from __future__ import annotations

from workloads.dispatchers.registry import DISPATCHERS
from workloads.inputs.megatron_args import IgnoredArg
from workloads.specs.layouts import LayoutSpec
from workloads.specs.validation import data_parallel

_OPTIMIZER = {  # layout.zero_stage as Megatron's flags set it (workloads/inputs/megatron.py)
    0: "replicated optimizer",
    1: "--use-distributed-optimizer",
    2: "FSDP optim_grads",
    3: "FSDP optim_grads_params",
}


def _dispatcher(layout: LayoutSpec) -> str:
    if layout.ffn != "ep" or layout.ep_degree <= 1:
        return "no EP dispatcher"
    return DISPATCHERS[layout.token_dispatcher].megatron or "MegaScale-MoE's dispatcher (no Megatron-LM flag)"


def _recompute(layout: LayoutSpec) -> str:
    if layout.recompute == "selective":
        return "recompute selective (" + " ".join(layout.recompute_modules) + ")"
    return f"recompute {layout.recompute}"


def _optimizer(layout: LayoutSpec) -> str:
    """The optimizer and its sharding as Megatron's flags set them."""
    if layout.optimizer != "adam":
        sharding = "layer-wise distributed" if layout.zero_stage else "replicated"
        steps = f"{layout.muon_ns_steps} Newton-Schulz steps"
        return f"--optimizer {layout.optimizer} ({sharding}, {steps}, {layout.muon_tp_mode})"
    words = _OPTIMIZER.get(layout.zero_stage, f"ZeRO-{layout.zero_stage}")
    if layout.dp_instances > 1:  # workloads/specs/hybrid_dp.py
        across = "optimizer sharded" if layout.outer_dp_sharding == "optim" else "all-reduced"
        words += f" in {layout.dp_instances} DP instances ({across} across them)"
    return words


def _precision(layout: LayoutSpec, fp16: bool = False) -> str:
    """The GEMM precision, with the layers and modules kept out of the recipe (``fp16``: an --fp16 job, whose
    16-bit GEMMs run at BF16's speed)."""
    if layout.gemm_dtype != "fp8":
        return "FP16" if fp16 else layout.gemm_dtype.upper()
    exceptions = [f"first {layout.bf16_first_layers} layers BF16"] if layout.bf16_first_layers else []
    exceptions += [f"last {layout.bf16_last_layers} layers BF16"] if layout.bf16_last_layers else []
    exceptions += [f"{len(layout.module_precisions)} module rules"] if layout.module_precisions else []
    return f"FP8 ({', '.join([layout.fp8_recipe, *exceptions])})"


def understood(
    layout: LayoutSpec,
    num_gpus: int,
    gpu_name: str,
    experts: bool = True,
    dropout: tuple[float, float] = (0.0, 0.0),
    fp16: bool = False,
) -> str:
    """The parallel layout and options as Megatron names them, as moesim read them (``experts``: the model has any;
    a dense model's EP and ETP mean nothing; ``dropout``: the model's hidden and attention dropout, named where
    either is on, since Megatron-LM defaults both to 0.1 where the flags alone give the model; ``fp16``: an --fp16
    job)."""
    tp = layout.intra_size if layout.attention == "tp" else 1
    degrees = [f"TP {tp}" + (" (SP)" if layout.sequence_parallel and tp > 1 else "")]
    degrees += [f"EP {layout.ep_degree}", f"ETP {layout.etp}"] if experts else ["no experts"]
    degrees += [f"CP {layout.cp}", f"PP {layout.pp}"]
    group = f" (groups of {layout.microbatch_group} micro-batches)" if layout.microbatch_group else ""
    degrees += [f"VP {layout.virtual_stages}{group}", f"DP {data_parallel(layout, num_gpus)}"]
    precision = _precision(layout, fp16)
    return "; ".join(
        [
            ", ".join(degrees),
            _dispatcher(layout),
            _recompute(layout),
            _optimizer(layout),
            precision,
            *([f"--hidden-dropout {dropout[0]:g} --attention-dropout {dropout[1]:g}"] if any(dropout) else []),
            f"{num_gpus} x {gpu_name}",
        ]
    )


def memory_terms(stages: list[dict[str, float]]) -> str:
    """The peak stage's memory terms in GiB (Report.memory_gib)."""
    peak = max(stages, key=lambda stage: stage["total"])
    return ", ".join(f"{name} {gib:.1f}" for name, gib in peak.items() if name != "total") + " GiB"


def ignored_line(ignored: tuple[IgnoredArg, ...]) -> str:
    """The flags that do not change the simulated step, in one line (``--json`` lists each with its reason)."""
    if not ignored:
        return "none"
    flags = [arg.flag for arg in ignored]
    shown = ", ".join(flags[:6]) + (f" and {len(flags) - 6} more" if len(flags) > 6 else "")
    return f"{len(flags)} flag{'s' * (len(flags) != 1)} ({shown}); --json lists each with its reason"
