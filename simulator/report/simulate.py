"""The report of one simulated step, and ``simulate``: the Python entry point."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.engine.faults import Faults
from simulator.engine.gc_budget import fewer_collections
from simulator.engine.probes import Probe
from simulator.engine.result import EngineResult
from simulator.engine.unfolded import check_unfolded_size
from simulator.fast.steady import ShortRuns, run_step
from simulator.memory.per_gpu import GIB, fit_recompute, offloaded_activation_bytes, peak_memory, peak_of, stage_memory
from simulator.memory.verdict import ACTIVATION_UNCERTAINTY, Verdict, memory_verdict
from simulator.report.bounds import step_lower_bound_s
from simulator.report.bubbles import imbalance_idle, phase_means, schedule_bubble
from simulator.report.checks import check_finite, check_simulate_args
from simulator.report.clusters import load_cluster
from simulator.report.megatron_flops import FROZEN_PASSES, megatron_args, megatron_flops
from simulator.report.useful import useful_fraction
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from topologies.hardware import GpuGeneration
from workloads.graph.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN, StepWorkload
from workloads.inputs.yaml_files import load_layout, load_model
from workloads.specs.hints import memory_hint
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.module_precision import parse_rule
from workloads.specs.peft import frozen_base

COMM_KINDS = ("tp", "sp", "ep", "pp", "dp")


@dataclass(frozen=True)
class Report:
    """Step time, throughput, utilisation and where the time goes, for one configuration."""

    model: str
    layout: str
    gpus: int
    global_batch: int
    seq_len: int
    dp: int
    pp: int
    micro_batches: int
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float  # paper counting: GEMMs (capacity-padded expert GEMMs) + FlashAttention, fwd + bwd
    useful_mfu: float  # the same, routed token copies only: no capacity padding, no dropped copies
    mfu_6n: float  # 6 x active parameters + attention (12 s h per token per layer, non-causal)
    model_tflops_per_gpu: (
        float  # Megatron-LM's own FLOP count per step / step time / GPUs (simulator.report.megatron_flops)
    )
    bubble_fraction: float  # = schedule_bubble + imbalance_idle
    # per kind (tp, sp, ep, pp, dp): the most any stage exposes per step; "fsdp" (ZeRO-2 / 3): the per-layer
    # all-gathers and reduce-scatters' time beside no compute, summed over them (they run side by side on two
    # streams, so it can exceed what they add to the step)
    exposed_comm_s: dict[str, float]
    compute_busy_s: float
    peak_memory_gib: float
    simulated_ops: int
    sim_wall_s: float
    memory_gib: list[dict[str, float]] = field(default_factory=list)  # per stage: the terms of MemoryBreakdown
    oom: bool = False  # peak memory exceeds the GPU's HBM (simulated anyway with allow_oom)
    memory_verdict: str = ""  # fits, may not fit (a warning) or does not fit (allow_oom): simulator/memory/verdict.py
    faults: list[str] = field(default_factory=list)  # injected faults, as on the command line
    schedule_bubble: float = 0.0  # the schedule's idle fraction with balanced stages (simulator/report/bubbles.py)
    imbalance_idle: float = 0.0  # bubble_fraction - schedule_bubble: stage imbalance (and PP transfer waits)
    recompute_fit: str = ""  # what recompute_to_fit chose, when it chose (e.g. "recompute_kept_layers=3 of 4")
    # The split balance_blocks chose, as Megatron-LM's --pipeline-model-parallel-layout ("Et*4|(t*4|)*14tmL")
    balanced_split: str = ""
    steady_runs: list[int] = field(
        default_factory=list
    )  # micro-batch counts extrapolated from (simulator/fast/steady.py)
    steady_bound: float = 0.0  # its error bound against the full run, relative (0: exact; simulator/fast/bounded.py)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_row(self) -> dict:
        """A flat dict: exposed communication as exposed_<kind>_s columns (a table row)."""
        row = self.to_dict()
        del row["memory_gib"]  # per stage: in to_dict (JSON) only; the table keeps peak_memory_gib
        del row["steady_runs"]  # how the step was simulated, not what it is: in to_dict (JSON) only
        del row["steady_bound"]
        for kind, seconds in row.pop("exposed_comm_s").items():
            row[f"exposed_{kind}_s"] = seconds
        return row

    def to_frame(self):
        """One-row pandas DataFrame (exposed communication flattened to exposed_<kind>_s columns)."""
        import pandas as pd

        return pd.DataFrame([self.to_row()])

    def summary(self) -> str:
        comm = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.exposed_comm_s.items())
        return "\n".join(
            [
                (
                    f"{self.model} / {self.layout} on {self.gpus} GPUs (PP {self.pp}, DP {self.dp}, "
                    f"{self.micro_batches} micro-batches per pipeline, batch {self.global_batch} x {self.seq_len})"
                ),
                f"  step time        {self.step_time_s:.3f} s",
                f"  throughput       {self.tokens_per_s / 1e3:.1f}k tokens/s, {self.tokens_per_s_per_gpu:.1f} per GPU",
                (
                    f"  MFU              {self.mfu * 100:.2f}% (GEMM + FlashAttention), {self.mfu_6n * 100:.2f}% "
                    f"(6N + attn), {self.useful_mfu * 100:.2f}% useful (routed tokens only)"
                ),
                f"  model TFLOP/s    {self.model_tflops_per_gpu:.1f} per GPU (Megatron-LM's count)",
                (
                    f"  bubble           {self.bubble_fraction * 100:.1f}% (schedule {self.schedule_bubble * 100:.1f}%,"
                    f" stage imbalance {self.imbalance_idle * 100:.1f}%)"
                ),
                f"  exposed comm     {comm}",
                f"  peak memory      {self.peak_memory_gib:.1f} GiB per GPU"
                + (" (exceeds HBM)" if self.oom else "")
                # the margin, as a warning, where the step may not fit (simulator/memory/verdict.py)
                + (
                    f"; {self.memory_verdict}"
                    if self.memory_verdict and not self.memory_verdict.startswith("fits")
                    else ""
                ),
                f"  simulated        {self.simulated_ops} ops in {self.sim_wall_s:.2f} s"
                + (
                    f" (steady state from {' and '.join(map(str, self.steady_runs))} micro-batches"
                    + (f", extrapolated, within {self.steady_bound:.2%})" if self.steady_bound else ")")
                    if self.steady_runs
                    else ""
                ),
            ]
            + ([f"  faults           {', '.join(self.faults)}"] if self.faults else [])
            + ([f"  recompute fit    {self.recompute_fit} (recompute_to_fit)"] if self.recompute_fit else [])
            + (
                [f"  pipeline split   {self.balanced_split} (balance_blocks, as --pipeline-model-parallel-layout)"]
                if self.balanced_split
                else []
            )
        )


def resolve(
    model: ModelSpec | str, layout: LayoutSpec | str, cluster: ClusterSpec | str | None, gpus: int | None
) -> tuple[ModelSpec, LayoutSpec, ClusterSpec]:
    """Turn preset names and .yaml/.yml paths (models, layouts, clusters) into specs."""
    return load_model(model), load_layout(layout), load_cluster(cluster, gpus)


def six_n_flops_per_token(model: ModelSpec, seq_len: int, frozen: bool = False) -> float:
    """6 x active parameters (no embeddings lookup) + 12 s h per layer with attention (a hybrid model's attention
    layers only); ``frozen`` (LoRA): 4 x active parameters, no weight gradients (megatron_flops' FROZEN_PASSES)."""
    # The input lookup does no FLOPs; with tied embeddings the one matrix is the (computing) output head.
    lookup = 0 if model.tied_embeddings else model.vocab_size * model.hidden_size
    dense = model.active_params - lookup
    attention_layers = model.blocks("attention") if model.hybrid_pattern else model.num_layers
    weights = 6.0 * (FROZEN_PASSES if frozen else 1.0)
    return weights * dense + 12.0 * seq_len * model.hidden_size * attention_layers


def simulate(
    model: ModelSpec | str,
    layout: LayoutSpec | str,
    gpus: int | None = None,
    *,
    cluster: ClusterSpec | str | None = None,
    global_batch: int = DEFAULT_GLOBAL_BATCH,
    seq_len: int = DEFAULT_SEQ_LEN,
    micro_batch: int | None = None,
    calibration: Calibration = DEFAULT_CALIBRATION,
    memoize: bool = True,
    allow_oom: bool = False,
    faults: Faults | None = None,
    probes: Iterable[Probe] = (),
    engine: str = "folded",
    short_runs: ShortRuns | None = None,
) -> Report:
    """Simulate one training step and report it. Presets may be given by name; over-HBM layouts need allow_oom;
    ``probes`` observe the engine (simulator/engine/probes.py); ``engine="unfolded"`` simulates every GPU (small
    clusters only; simulator/engine/unfolded.py); ``short_runs``: the steady shortcut's short runs shared with
    other steps (simulator/fast/steady.ShortRuns; the report is the same with or without)."""
    wall_start = time.perf_counter()
    checked = check_simulate_args(
        model,
        layout,
        gpus,
        cluster,
        global_batch,
        seq_len,
        micro_batch,
        calibration,
        memoize,
        allow_oom,
        faults,
        probes,
        engine,
    )
    gpus, global_batch, seq_len, micro_batch = (checked[k] for k in ("gpus", "global_batch", "seq_len", "micro_batch"))
    memoize, allow_oom, probes = checked["memoize"], checked["allow_oom"], checked["probes"]
    with (
        fewer_collections()
    ):  # the step's workload, runs and report allocate much short-lived (simulator/engine/gc_budget.py)
        sizes = (global_batch, seq_len, micro_batch)
        workload, cluster, oom = prepare(model, layout, gpus, cluster, *sizes, allow_oom, calibration)
        if engine == "unfolded":
            check_unfolded_size(workload)
        step = run_step(
            workload,
            cluster,
            calibration,
            placement=engine,
            memoize=memoize,
            faults=faults,
            probes=probes,
            short_runs=short_runs,
        )
        report = build_report(workload, cluster, step.result, time.perf_counter() - wall_start, step.runs)
        report = replace(report, steady_bound=step.bound_rel)
    verdict = memory_verdict(peak_memory(workload), cluster.gpu.hbm_bytes).phrase()
    return replace(report, oom=oom, memory_verdict=verdict, faults=faults.describe() if faults else [])


# The simulate() keywords lower_bound_s takes beside the model, layout, GPUs, cluster and calibration.
BOUND_KEYWORDS = ("global_batch", "seq_len", "micro_batch", "allow_oom")


def lower_bound_s(
    model: ModelSpec | str,
    layout: LayoutSpec | str,
    gpus: int | None = None,
    *,
    cluster: ClusterSpec | str | None = None,
    calibration: Calibration = DEFAULT_CALIBRATION,
    **step: Any,
) -> float:
    """A proven lower bound on the step time ``simulate`` (same arguments: ``step`` takes BOUND_KEYWORDS; no
    faults) would report, from the step's tasks timed alone (simulator/report/bounds.py); a ConfigError where
    simulate raises one for the layout."""
    unknown = set(step) - set(BOUND_KEYWORDS)
    if unknown:
        raise TypeError(f"lower_bound_s() got unexpected keywords {sorted(unknown)}")
    sizes = (step.get("global_batch", DEFAULT_GLOBAL_BATCH), step.get("seq_len", DEFAULT_SEQ_LEN))
    allow_oom = step.get("allow_oom", False)
    workload, cluster, _ = prepare(
        model, layout, gpus, cluster, *sizes, step.get("micro_batch"), allow_oom, calibration
    )
    return step_lower_bound_s(workload, cluster, calibration)


def prepare(
    model: ModelSpec | str,
    layout: LayoutSpec | str,
    gpus: int | None,
    cluster: ClusterSpec | str | None,
    global_batch: int,
    seq_len: int,
    micro_batch: int | None,
    allow_oom: bool,
    calibration: Calibration = DEFAULT_CALIBRATION,
) -> tuple[StepWorkload, ClusterSpec, bool]:
    """The validated step workload (its pipeline split balanced where asked, recomputation fitted to memory),
    its cluster, and whether it overflows HBM."""
    model, layout, cluster = resolve(model, layout, cluster, gpus)
    if micro_batch is not None:
        layout = layout.with_(micro_batch=micro_batch)
    nvfp4 = layout.fp8_recipe == "nvfp4" or any(parse_rule(rule)[1] == "nvfp4" for rule in layout.module_precisions)
    if nvfp4 and layout.gemm_dtype == "fp8" and not cluster.gpu.peak_fp4_flops:
        raise ConfigError(
            "layout.fp8_recipe", f"NVFP4 (--fp4-format) needs FP4 tensor cores (Blackwell); {cluster.gpu.name} has none"
        )
    if layout.gemm_dtype == "fp8" and cluster.gpu.generation is GpuGeneration.AMPERE:
        raise ConfigError(  # TE quantization.py check_fp8_support at d0067d0d: "Device compute capability 8.9 or higher"
            "layout.gemm_dtype",
            f"FP8 GEMMs need FP8 tensor cores (compute capability 8.9 and up); {cluster.gpu.name} has none: "
            "train in BF16 (drop --fp8-format, or gemm_dtype bf16)",
        )
    if layout.dispatcher_sms >= cluster.gpu.sm_count:  # DeepEP / HybridEP kernels leave SMs to the experts' GEMMs
        raise ConfigError(
            "layout.dispatcher_sms",
            f"{layout.dispatcher_sms} SMs for the dispatch and combine kernels, but {cluster.gpu.name} has "
            f"{cluster.gpu.sm_count}: give them fewer (DeepEP's default is 20, HybridEP's 8 to 24)",
        )
    workload = StepWorkload(model, layout, cluster.num_gpus, cluster.gpus_per_node, global_batch, seq_len)
    if layout.balance_blocks:
        from simulator.report.balance import balance_pipeline  # NOTE: loaded only when balance_blocks asks for it

        workload = balance_pipeline(workload, cluster, calibration)
    workload = fit_recompute(workload, cluster.gpu.hbm_bytes)
    return workload, cluster, check_memory(workload, cluster, allow_oom)


def check_memory(workload: StepWorkload, cluster: ClusterSpec, allow_oom: bool = False) -> bool:
    """True if peak memory per GPU exceeds HBM; a ConfigError("memory", ...) unless allow_oom when the step does not
    fit even with the memory model's margin (simulator/memory/verdict.py): one that may not fit is simulated."""
    peak, hbm = peak_memory(workload), cluster.gpu.hbm_bytes
    verdict = memory_verdict(peak, hbm)
    if verdict.verdict is Verdict.DOES_NOT_FIT and not allow_oom:
        raise ConfigError(
            "memory",
            f"{peak.total_gib:.1f} GiB per GPU (stage {peak.stage}) exceeds the "
            f"{hbm / GIB:.1f} GiB ({hbm / 1e9:.0f} GB) HBM of {cluster.gpu.name}, and "
            f"{verdict.low_bytes / GIB:.1f} GiB with the activations {ACTIVATION_UNCERTAINTY:.0%} lower (the memory "
            "model's margin)"
            + memory_hint(peak.terms_gib(), workload.layout, bool(workload.model.num_experts))
            + " (allow_oom=True)",
        )
    return peak.total_bytes > hbm


def recompute_choice(workload: StepWorkload) -> str:
    """What recompute_to_fit chose (layers kept un-recomputed per chunk), or '' when it did not apply."""
    layout = workload.layout
    if not (layout.recompute_to_fit and layout.recompute == "full" and layout.recompute_kept_layers):
        return ""
    return f"recompute_kept_layers={layout.recompute_kept_layers} of {workload.layers_per_chunk} layers per chunk"


def split_if_balanced(
    model: ModelSpec | str,
    layout: LayoutSpec,
    gpus: int | None,
    cluster: ClusterSpec | str | None,
    global_batch: int,
    seq_len: int,
    micro_batch: int | None = None,
) -> str:
    """The split balance_blocks would choose for this step (Megatron-LM's layout string, not simulated), or ''
    where it keeps the layout's own."""
    sizes = (global_batch, seq_len, micro_batch)
    workload, *_ = prepare(model, layout, gpus, cluster, *sizes, True)
    balanced, *_ = prepare(model, layout.with_(balance_blocks=True), gpus, cluster, *sizes, True)
    return "" if balanced.block_ranges == workload.block_ranges else balanced_split(balanced)


def balanced_split(workload: StepWorkload) -> str:
    """The split balance_blocks chose, as Megatron-LM's layout string, or '' when it was not asked for."""
    if not workload.layout.balance_blocks:
        return ""
    from workloads.inputs.megatron_pipeline import layout_text  # NOTE: Megatron's flags load only for a balanced split

    return layout_text(workload.layout.block_layers, workload.model.mtp_layers)


def build_report(
    workload: StepWorkload, cluster: ClusterSpec, result: EngineResult, wall_s: float, runs: tuple[int, ...] = ()
) -> Report:
    """The report of ``result``, a step of ``workload`` on ``cluster``; ``runs``: the micro-batch counts simulated
    where the step was extrapolated (simulator/fast/steady.py)."""
    stages = result.stages
    step = result.step_time_s
    pipeline_end = max(log.pipeline_end_s for log in stages)
    # Idle fractions are >= 0: a stage busy for all of the step gives 1 - busy / end = -2e-16 in floating point.
    bubble = max(0.0, sum(1 - log.busy_s / pipeline_end for log in stages) / len(stages))
    balanced = schedule_bubble(workload.schedule, phase_means(result.phase_spans))
    dp = workload.dp
    model_flops = sum(log.model_flops for log in stages) * (workload.num_gpus // workload.pp)  # GPUs per stage
    peak = cluster.gpu.peak_bf16_flops * cluster.num_gpus * step
    frozen = frozen_base(workload.layout)  # LoRA: the frozen weights take no gradient (workloads/specs/peft.py)
    six_n = six_n_flops_per_token(workload.model, workload.seq_len, frozen) * workload.tokens_per_step
    megatron_job = megatron_args(workload.model, workload.layout, workload.seq_len)
    megatron = megatron_flops(megatron_job, workload.global_batch, workload.seq_len, frozen)
    critical = max(stages, key=lambda log: log.end_s)
    # Per kind, the stage that exposes the most of it (stages differ: e.g. dense-only or LM-head stages).
    # CP's ring and ETP's all-gather / reduce-scatter: "cp" and "etp" entries when used
    kinds = COMM_KINDS + (("cp",) if workload.layout.cp > 1 else ()) + (("etp",) if workload.layout.etp > 1 else ())
    exposed = {kind: max(log.exposed_comm_s.get(kind, 0.0) for log in stages) for kind in kinds}
    exposed["pp"] = max(log.pp_wait_s for log in stages)
    exposed["dp"] = max(log.dp_exposed_s for log in stages)
    if workload.unit_comm is not None:  # ZeRO-2 / 3, FSDP: the per-layer gathers and scatters in the tasks
        exposed["fsdp"] = max(log.exposed_comm_s.get("dp", 0.0) + log.exposed_comm_s.get("edp", 0.0) for log in stages)
    memory = [stage_memory(workload, s) for s in range(workload.pp)]
    report = Report(
        model=workload.model.name,
        layout=workload.layout.name,
        gpus=cluster.num_gpus,
        global_batch=workload.global_batch,
        seq_len=workload.seq_len,
        dp=dp,
        pp=workload.pp,
        micro_batches=workload.micro_batches,
        step_time_s=step,
        tokens_per_s=workload.tokens_per_step / step,
        tokens_per_s_per_gpu=workload.tokens_per_step / step / cluster.num_gpus,
        mfu=model_flops / peak,
        useful_mfu=model_flops * useful_fraction(workload) / peak,
        mfu_6n=six_n / peak,
        model_tflops_per_gpu=megatron / step / cluster.num_gpus / 1e12,
        bubble_fraction=bubble,
        exposed_comm_s=exposed,
        compute_busy_s=critical.compute_busy_s,
        peak_memory_gib=peak_of(memory).total_gib,  # each stage's breakdown computed once
        memory_gib=[stage.report_gib(offloaded_activation_bytes(workload, stage.stage)) for stage in memory],
        simulated_ops=result.simulated_ops,
        sim_wall_s=wall_s,
        schedule_bubble=balanced,
        imbalance_idle=imbalance_idle(bubble, balanced),
        recompute_fit=recompute_choice(workload),
        balanced_split=balanced_split(workload),
        steady_runs=list(runs),
    )
    return check_finite(report)  # never NaN or infinity in a report (its JSON stays valid)
