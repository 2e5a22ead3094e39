"""Out-of-corpus check on Blackwell: the published GB300 / GB200 MoE training rows against the simulator.

No Blackwell run is in the validation corpus (``moesim validate``): these rows are not cases, they are not in any
MAPE and nothing is fitted on them. They are the only published end-to-end Blackwell training throughputs of the
MoE models moesim ships, so this prints, per row, what the Blackwell kernel tables (simulator/costs/generations.py)
predict beside what was measured, where one micro-batch of the busiest stage goes (experiments/common/stage_costs.py),
and the same at compute_residual 1 (issue 40 item 4: the residual was fitted on H800 MegaScale-MoE; whether it
belongs on Blackwell is read off the two columns, not fitted).

The rows, their sources and recipes: experiments/validation/blackwell/rows.py.

Rows whose memory the simulator refuses (peak over HBM) are simulated with allow_oom and marked: the memory model of
these recipes (paged stash, capacity-factor buffers) is outside this check.

``python -m experiments.validation.blackwell.check`` prints the table, one block per source.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from experiments.common.stage_costs import StageCosts, busiest_stage, per_micro_batch
from experiments.validation.blackwell.kernels import (
    CUBLASLT_FP4_TFLOPS,
    EAGER_SWIGLU_MLP_B200_S,
    TE_B300_MXFP8_QUANT_S,
    TORCHAO_GROUPED_S,
    cublaslt_fp4_simulated_tflops,
    eager_swiglu_mlp_simulated_s,
    te_b300_mxfp8_quantization_s,
    torchao_grouped_simulated_s,
)
from experiments.validation.blackwell.rows import ROWS, BlackwellRow
from experiments.validation.blackwell.sources import SOURCES
from simulator.costs.calibration import (
    BENCHMARK_CALIBRATION,
    DEFAULT_CALIBRATION,
    UNFITTED_CALIBRATION,
    Calibration,
)
from simulator.engine.timing import task_timer
from simulator.report.simulate import prepare, simulate
from simulator.streams.op_costs import host_launch_per_kernel_s, launch_times_s


@dataclass(frozen=True)
class RowResult:
    """A row simulated at a calibration: throughput, whether memory was over HBM, and (``costs``) the busiest stage's
    costs."""

    row: BlackwellRow
    tokens_per_s_per_gpu: float
    over_hbm: bool
    calibration: Calibration = DEFAULT_CALIBRATION

    @property
    def costs(self) -> StageCosts:
        """The busiest stage's costs, timed when first asked (most readers want the throughput alone)."""
        return row_costs(self.row, self.calibration)

    @property
    def error(self) -> float:
        """Simulated / measured - 1 (< 0: the simulator is slow)."""
        return self.tokens_per_s_per_gpu / self.row.measured_tokens_per_s_per_gpu - 1


def row_recipe(row: BlackwellRow):
    """The row's model and layout as simulated: its flag file's, with cuDNN's FP8 attention where the recipe sets it."""
    run = row.job()
    return run.model, run.layout.with_(attention_backend="cudnn-fp8") if row.fp8_attention else run.layout


@cache
def simulate_row(row: BlackwellRow, calibration: Calibration = DEFAULT_CALIBRATION) -> RowResult:
    """The row's recipe simulated on its cluster (allow_oom: the memory verdict is reported, not enforced); once per
    row and calibration in a process (the table, the ratios and the tests ask again)."""
    model, layout = row_recipe(row)
    report = row_report(row, calibration, model, layout)
    return RowResult(row, report.tokens_per_s_per_gpu, report.oom, calibration)


@cache
def row_costs(row: BlackwellRow, calibration: Calibration = DEFAULT_CALIBRATION) -> StageCosts:
    """Where one micro-batch of the row's busiest stage goes (experiments/common/stage_costs.py)."""
    model, layout = row_recipe(row)
    sizes = (row.global_batch, row.seq_len)
    workload, cluster, _ = prepare(model, layout, row.gpus, row.cluster, *sizes, None, True, calibration)
    return busiest_stage(workload, cluster, calibration)


def row_report(row: BlackwellRow, calibration: Calibration = DEFAULT_CALIBRATION, model=None, layout=None):
    """The row's simulated report (its own recipe unless ``model`` and ``layout`` are given; allow_oom: ``oom`` says
    whether the peak exceeds HBM, the step is simulated either way)."""
    if model is None:
        model, layout = row_recipe(row)
    return simulate(
        model,
        layout,
        row.gpus,
        cluster=row.cluster,
        global_batch=row.global_batch,
        seq_len=row.seq_len,
        calibration=calibration,
        allow_oom=True,
    )


# Sec. 4.3.6 of the report: partial CUDA graphs (attn, moe_router, moe_preprocess) "achieve 10% end-to-end speedup with
# about 7 GB extra memory on DeepSeek-V3 GB200 training"; Table 17 / Appendix B.2 give that run's recipe (the
# mcore-gb200-deepseek-v3-256 row). The gain is read as eager step / graphed step.
REPORT_PARTIAL_GRAPH_GAIN = 1.10
PARTIAL_GRAPH_ROW = "mcore-gb200-deepseek-v3-256"


@dataclass(frozen=True)
class GraphGain:
    """A row simulated with its CUDA graphs and eagerly: the gain, and the eager host of its busiest stage."""

    graphed: float  # tokens/s/GPU
    eager: float
    eager_launches: float  # host launches per micro-batch of the eager busiest stage
    eager_host_s: float  # their host time per micro-batch
    measured_micro_batch_s: float  # the measured step over the micro-batches each stage runs

    @property
    def simulated(self) -> float:
        return self.graphed / self.eager

    @property
    def bound_per_kernel_s(self) -> float:
        """The host time per eager launch at which the eager stage's launches alone take the measured micro-batch
        time times the measured gain: the least per-kernel cost at which the host could make that gain."""
        return REPORT_PARTIAL_GRAPH_GAIN * self.measured_micro_batch_s / self.eager_launches


def partial_graph_gain(calibration: Calibration = DEFAULT_CALIBRATION) -> GraphGain:
    """The report's DeepSeek-V3 GB200 row simulated with its partial CUDA graphs and without any (eager), with the
    eager host launches of the stage that issues the most (the first the host would bind)."""
    row = next(row for row in ROWS if row.name == PARTIAL_GRAPH_ROW)
    run = row.job()
    eager = run.layout.with_(cuda_graph_scope=())
    rates = [row_report(row, calibration, run.model, layout).tokens_per_s_per_gpu for layout in (run.layout, eager)]
    sizes = (row.global_batch, row.seq_len)
    workload, cluster, _ = prepare(run.model, eager, row.gpus, row.cluster, *sizes, None, True, calibration)
    timer = task_timer(workload, cluster, calibration)
    host_s = max(
        sum(
            share * sum(launch_times_s(tuple(t.op for t in timer(stage, kind).ops), calibration, cluster.gpu))
            for kind, share in per_micro_batch(workload, stage).items()
        )
        for stage in range(workload.pp)
    )
    launches = host_s / host_launch_per_kernel_s(calibration, cluster.gpu)
    step_s = row.global_batch * row.seq_len / (row.measured_tokens_per_s_per_gpu * row.gpus)
    return GraphGain(rates[0], rates[1], launches, host_s, step_s / workload.schedule.micro_batches)


def _row_lines(row: BlackwellRow) -> str:
    """One row: measured, simulated and the error at the fitted residual and at 1, then its busiest stage's costs."""
    fitted, unfitted = simulate_row(row), simulate_row(row, UNFITTED_CALIBRATION)
    oom = "  (over HBM: allow_oom)" if fitted.over_hbm else ""
    return (
        f"{row.name:40} {row.measured_tokens_per_s_per_gpu:9,.0f} {fitted.tokens_per_s_per_gpu:9,.0f} "
        f"{fitted.error:+7.1%} {unfitted.tokens_per_s_per_gpu:9,.0f} {unfitted.error:+7.1%}{oom}\n"
        f"  stage {fitted.costs.stage}, one micro-batch: {fitted.costs.phrase()}"
    )


def table() -> str:
    """Measured against simulated per row, at the fitted residual and at 1, with the busiest stage's costs."""
    lines = ["tokens/s/GPU, out of the corpus: no Blackwell run is in `moesim validate`"]
    for source in SOURCES:
        lines.append(source)
        lines.append(f"{'row':40} {'measured':>9} {'simulated':>9} {'error':>7} {'resid. 1':>9} {'error':>7}")
        lines.extend(_row_lines(row) for row in ROWS if row.source == source)
    gain = partial_graph_gain()
    lines.append(
        f"partial CUDA graphs on {PARTIAL_GRAPH_ROW} (report Sec. 4.3.6): measured {REPORT_PARTIAL_GRAPH_GAIN:.2f}x, "
        f"simulated {gain.simulated:.3f}x; eager, the stage issuing the most launches {gain.eager_launches:,.0f} kernels "
        f"in {gain.eager_host_s * 1e3:.1f} ms per micro-batch (measured micro-batch {gain.measured_micro_batch_s * 1e3:.0f}"
        f" ms): the host makes the gain only at >= {gain.bound_per_kernel_s * 1e6:.0f} us per kernel"
    )
    quant_s = te_b300_mxfp8_quantization_s()
    lines.append(
        f"TE's MXFP8 quantization on B300 (gemm_profiling, one layer): measured {TE_B300_MXFP8_QUANT_S * 1e3:.3f} ms, "
        f"simulated {quant_s * 1e3:.3f} ms ({quant_s / TE_B300_MXFP8_QUANT_S - 1:+.1%})"
    )
    grouped_s = torchao_grouped_simulated_s()
    lines.append(
        f"torchao's MXFP8 grouped GEMM on B200 (torch._scaled_grouped_mm, 8 x 16,384 rows, not TE's kernel): measured "
        f"{TORCHAO_GROUPED_S * 1e6:.1f} us, moesim's TE MXFP8 curve {grouped_s * 1e6:.1f} us "
        f"({grouped_s / TORCHAO_GROUPED_S - 1:+.1%})"
    )
    fp4 = cublaslt_fp4_simulated_tflops()
    lines.append(
        "cuBLASLt's FP4 GEMM on B200 (DeepGEMM #348, MXFP4 scales), TFLOP/s measured / moesim's NVFP4 curve: "
        + ", ".join(
            f"{m}x{n}x{k} {tflops:,.0f} / {fp4[(m, n, k)]:,.0f}" for (m, n, k), tflops in CUBLASLT_FP4_TFLOPS.items()
        )
    )
    mlp = {name: eager_swiglu_mlp_simulated_s(cal) for name, cal in MLP_CALIBRATIONS.items()}
    lines.append(
        f"eager SwiGLU MLP forward + backward on B200 (cudnn-frontend e2e, 8,192 x 5,120 x 17,408, BF16): measured "
        f"{EAGER_SWIGLU_MLP_B200_S * 1e3:.3f} ms; "
        + ", ".join(f"{name} {t * 1e3:.3f} ({t / EAGER_SWIGLU_MLP_B200_S - 1:+.1%})" for name, t in mlp.items())
    )
    return "\n".join(lines)


# The eager MLP's three calibrations: the published kernel speeds at their benchmarks' clocks, at the sustained clock,
# and with the fitted residual too.
MLP_CALIBRATIONS = {
    "at benchmark clocks": BENCHMARK_CALIBRATION,
    "at the sustained clock": UNFITTED_CALIBRATION,
    "fitted": DEFAULT_CALIBRATION,
}


if __name__ == "__main__":
    print(table())
