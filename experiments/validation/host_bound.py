"""``moesim validate --host``: how far each case leans on the host, and the per-kernel host cost at which it would
be exact. A diagnostic, never a fit (as ``experiments/paper/calibrate.py --implied`` is for the residual).

moesim charges the host ``Calibration.host_launch_s`` per eager kernel (36.5 us on x86: a TE module's per kernel,
torch.nn.Linear's 13.48 us on a DGX-H100 host times TE's overhead ratio measured on Grace, TransformerEngine#2053)
and one launch per CUDA-graphed run of kernels (simulator/streams/op_costs.py ``launch_times_s``); after a token-count
sync the GPU idles until the host has launched the next kernels. No published measurement gives that cost on an
x86 H100 host directly (docs/host_cost_sources.md); this says, per case:

- the host's launch time per micro-batch of the busiest stage (its share of the stage's simulated time: near 1,
  the host is the bottleneck) and the GPU's idle time waiting for it (experiments/common/stage_costs.py);
- ``per expert``: the share of those launches that TE issues per expert from one C++ call (a grouped GEMM's
  ``nvte_multi_tensor_gemm`` and its input's ``split_quantize``): the same per-kernel cost is charged to them as to
  a Python-level op, which TE's own code says they are not (docs/host_cost_sources.md);
- ``fill``: the per-kernel cost at which the busiest stage's launches alone would take the whole measured step
  (measured step time over the launches the stage issues per step): a bound on any per-kernel host explanation;
- ``implied``: the per-kernel cost at which the simulated step meets the measurement (bisection over whole
  simulations; None where the case is predicted slow even with a free host, the upper end where even that cost
  does not slow it enough).

A per-kernel cost is the model the evidence allows; the real host cost is per module call and per Python
statement, so an implied cost far above the calibration's says how much host time the case would need, not that
such a launch cost exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from experiments.common.roots import bisect_root
from experiments.common.stage_costs import per_micro_batch, stage_costs
from experiments.validation.corpus import Case
from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.costs.kernels import executed_work
from simulator.engine.timing import task_timer
from simulator.report.simulate import prepare
from simulator.report.simulate import simulate as simulate_at
from simulator.streams.op_costs import host_launch_per_kernel_s, launch_times_s
from topologies.errors import ConfigError
from topologies.hardware import GpuSpec
from workloads.ops import GraphPart, Op
from workloads.recipes.layers import te_layers
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

HOST_RANGE_S = (0.0, 200e-6)  # where the bisection looks for the implied per-kernel cost
TOLERANCE_S = 0.25e-6


class CaseJob(Protocol):
    """What a case simulates (experiments.validation.validate.Job)."""

    model: ModelSpec
    layout: LayoutSpec


@dataclass(frozen=True)
class HostBound:
    """One case's host diagnostic at ``host_launch_s`` (the calibration's)."""

    case: str
    host_launch_s: float
    launches: float  # host launches per micro-batch of the busiest stage (a CUDA-graphed run counts once)
    per_expert_launches: float  # of them, those TE issues per expert from one C++ call (per_expert_launches)
    host_s: float  # the host's launch time per micro-batch of the busiest stage
    stage_s: float  # the busiest stage's micro-batch, each task timed alone
    gpu_idle_s: float  # of it, the GPU idle waiting for the host's launches
    fill_s: float | None  # the per-kernel cost at which the stage's launches alone take the measured step
    implied_s: float | None  # the per-kernel cost at which the prediction meets the measurement

    @property
    def host_share(self) -> float:
        return self.host_s / self.stage_s if self.stage_s else 0.0

    @property
    def per_expert_share(self) -> float:
        return self.per_expert_launches / self.launches if self.launches else 0.0

    @property
    def idle_share(self) -> float:
        return self.gpu_idle_s / self.stage_s if self.stage_s else 0.0


def per_expert_launches(ops: tuple[Op, ...], gpu: GpuSpec) -> int:
    """The eager kernels of ``ops`` that Transformer Engine issues per expert from one C++ call: a grouped GEMM's
    one cuBLAS GEMM per group (transformer_engine/common/gemm/cublaslt_gemm.cu nvte_multi_tensor_gemm) and its
    input's quantization, split and quantized tensor by tensor (transformer_engine/pytorch/csrc/extensions/cast.cpp
    split_quantize, multi_tensor_quantize_impl; the ``<gemm>.quant`` op it depends on)."""
    kernels = 0
    for op in ops:
        gemm = op.gemm
        if op.graph != GraphPart.NONE or gemm is None or gemm.groups < 2 or gemm.sequential:
            continue
        kernels += executed_work(op, gpu)[1]
        kernels += sum(
            executed_work(ops[d], gpu)[1]
            for d in op.deps
            if ops[d].name.endswith(".quant") and ops[d].graph == GraphPart.NONE
        )
    return kernels


def busiest_stage_host(
    case: Case, job: CaseJob, calibration: Calibration = DEFAULT_CALIBRATION
) -> tuple[float, float, float, float, int, float]:
    """The busiest stage (most time per micro-batch, its tasks timed alone) of the case's ``job``: host launches
    and host launch seconds per micro-batch, the stage's seconds and its GPU idle for the host per micro-batch, the
    micro-batches of a step, and the stage's per-expert launches per micro-batch (per_expert_launches)."""
    workload, cluster, _ = prepare(
        job.model, job.layout, case.gpus, case.cluster, case.global_batch, case.seq_len, None, True, calibration
    )
    timer = task_timer(workload, cluster, calibration)
    te = te_layers(workload.layout)  # a TE module's host time per kernel, or a bare torch op's
    best = None
    for stage in range(workload.pp):
        shares = per_micro_batch(workload, stage)
        costs = stage_costs(timer, stage, shares)
        host_s = sum(
            share * sum(launch_times_s(tuple(t.op for t in timer(stage, kind).ops), calibration, cluster.gpu, te))
            for kind, share in shares.items()
        )
        if best is None or costs.duration_s > best[2]:
            per_kernel_s = host_launch_per_kernel_s(calibration, cluster.gpu, te)
            launches = host_s / per_kernel_s if per_kernel_s else 0.0
            experts = sum(
                share * per_expert_launches(tuple(t.op for t in timer(stage, kind).ops), cluster.gpu)
                for kind, share in shares.items()
            )
            best = (launches, host_s, costs.duration_s, costs.host_wait_s, experts)
    *stage, experts = best
    return (*stage, workload.schedule.micro_batches, experts)


def implied_host_launch_s(
    case: Case, job: CaseJob, settings: dict[str, Any], base: Calibration = DEFAULT_CALIBRATION
) -> float | None:
    """The per-kernel host cost at which the case's ``job`` (simulated with ``settings``: the cluster, batch,
    sequence) predicts its measured tokens/s per GPU (None: predicted slow even with a free host; HOST_RANGE_S's
    upper end: still fast there). It varies the cost the case's layers pay: a TE module's (``host_launch_s``) or,
    for MegaScale-MoE's own stack, a bare torch op's (``torch_host_launch_s``)."""
    field = "host_launch_s" if te_layers(job.layout) else "torch_host_launch_s"

    def error(host_launch_s: float) -> float:
        report = simulate_at(
            job.model,
            job.layout,
            case.gpus,
            calibration=base.with_(**{field: host_launch_s}),
            **settings,
        )
        return report.tokens_per_s_per_gpu / case.measured_tokens_per_s_per_gpu - 1

    low, high = HOST_RANGE_S
    if error(low) <= 0:
        return None
    if error(high) >= 0:
        return high
    return bisect_root(lambda host_launch_s: -error(host_launch_s), low, high, TOLERANCE_S)


def host_bound(case: Case, job: CaseJob, settings: dict[str, Any]) -> HostBound | None:
    """The case's host diagnostic at the fitted calibration (None: the case does not run)."""
    calibration = DEFAULT_CALIBRATION
    try:
        launches, host_s, stage_s, idle_s, micro_batches, experts = busiest_stage_host(case, job, calibration)
        implied = implied_host_launch_s(case, job, settings, calibration)
    except ConfigError:
        return None
    step_s = case.global_batch * case.seq_len / (case.measured_tokens_per_s_per_gpu * case.gpus)
    fill = step_s / (launches * micro_batches) if launches else None
    return HostBound(case.name, calibration.host_launch_s, launches, experts, host_s, stage_s, idle_s, fill, implied)


def _us(seconds: float | None, at_end: bool = False) -> str:
    if seconds is None:
        return "none (slow with a free host)"
    return f">= {seconds * 1e6:.0f}" if at_end else f"{seconds * 1e6:.1f}"


def host_table(rows: list[HostBound | None], errors: dict[str, float]) -> str:
    """The printed table: one row per case that ran."""
    title = (
        "host per micro-batch of the busiest stage, at host_launch_s "
        f"{DEFAULT_CALIBRATION.host_launch_s * 1e6:.2f} us per eager kernel (experiments/validation/host_bound.py)"
    )
    header = (
        f"{'case':<60} {'error':>7} {'launches':>9} {'per expert':>10} {'host ms':>8} {'share':>6} {'GPU idle ms':>11} "
        f"{'fill us':>8}  implied us per kernel"
    )
    lines = [title, header]
    for row in rows:
        if row is None:
            continue
        implied = _us(row.implied_s, row.implied_s is not None and row.implied_s >= HOST_RANGE_S[1])
        fill = f"{row.fill_s * 1e6:.1f}" if row.fill_s is not None else "-"
        lines.append(
            f"{row.case:<60} {errors.get(row.case, 0.0):>+7.1%} {row.launches:>9.0f} {row.per_expert_share:>10.0%} "
            f"{row.host_s * 1e3:>8.1f} "
            f"{row.host_share:>6.0%} {row.gpu_idle_s * 1e3:>11.1f} {fill:>8}  {implied}"
        )
    return "\n".join(lines)


def host_json(row: HostBound) -> dict[str, float | None]:
    """A case's ``"host"`` entry of ``validate --json --host``."""
    return {
        "host_launch_s": row.host_launch_s,
        "launches_per_micro_batch": row.launches,
        "per_expert_launches_per_micro_batch": row.per_expert_launches,
        "host_s_per_micro_batch": row.host_s,
        "host_share": row.host_share,
        "gpu_idle_for_host_s_per_micro_batch": row.gpu_idle_s,
        "gpu_idle_share": row.idle_share,
        "fill_host_launch_s": row.fill_s,
        "implied_host_launch_s": row.implied_s,
    }
