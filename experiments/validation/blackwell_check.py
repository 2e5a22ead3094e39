"""Out-of-corpus check on Blackwell: Megatron-Bridge's newest published GB300 / GB200 rows against the simulator.

No Blackwell run is in the validation corpus (``moesim validate``): these rows are not cases, they are not in any
MAPE and nothing is fitted on them. They are the only published end-to-end Blackwell training throughputs of the
MoE models moesim ships, so this prints, per row, what the Blackwell kernel tables (simulator/costs/generations.py)
predict beside what was measured, where one micro-batch of the busiest stage goes (experiments/common/stage_costs.py),
and the same at compute_residual 1 (issue 40 item 4: the residual was fitted on H800 MegaScale-MoE; whether it
belongs on Blackwell is read off the two columns, not fitted).

Rows: NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md, "26.08 NeMo Container", pre-training, MXFP8,
DGX-GB300 and DGX-GB200 (tokens / sec / GPU). Recipes: the same commit's src/megatron/bridge/perf_recipes/<family>/
<system>/*.py, written as Megatron-LM flags in examples/megatron/gb300-*.sh and gb200-*.sh (what Megatron-LM has no
flag for is named in each file's header: fp8_dot_product_attention, NVTE_CUTEDSL_FUSED_GROUPED_MLP, fp8_output_proj).

Rows whose memory the simulator refuses (peak over HBM) are simulated with allow_oom and marked: the memory model of
these recipes (paged stash, capacity-factor buffers) is outside this check.

``python -m experiments.validation.blackwell_check`` prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.common.stage_costs import StageCosts, busiest_stage
from simulator.costs.calibration import DEFAULT_CALIBRATION, UNFITTED_CALIBRATION, Calibration
from simulator.report.simulate import prepare, simulate
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "NVIDIA-NeMo/Megatron-Bridge@067f987d docs/performance-summary.md, 26.08 container, MXFP8"


@dataclass(frozen=True)
class BlackwellRow:
    """One published row: the flag file that rebuilds its recipe, the model preset, the cluster and the measurement."""

    name: str  # examples/megatron/<name>.sh
    model: str  # examples/models/<model>.json
    cluster: str
    gpus: int
    global_batch: int
    seq_len: int
    measured_tokens_per_s_per_gpu: float


ROWS: tuple[BlackwellRow, ...] = (
    BlackwellRow("gb300-deepseek-v3-256", "deepseek-v3", "gb300", 256, 4096, 4096, 6288),
    BlackwellRow("gb200-deepseek-v3-256", "deepseek-v3", "gb200", 256, 4096, 4096, 4912),
    BlackwellRow("gb300-gpt-oss-120b-64", "gpt-oss-120b", "gb300", 64, 1280, 4096, 33024),
    BlackwellRow("gb200-gpt-oss-120b-64", "gpt-oss-120b", "gb200", 64, 1280, 4096, 28672),
    BlackwellRow("gb300-qwen3-30b-a3b-8", "qwen3-30b-a3b", "gb300", 8, 512, 4096, 44544),
    BlackwellRow("gb200-qwen3-30b-a3b-8", "qwen3-30b-a3b", "gb200", 8, 512, 4096, 39936),
    BlackwellRow("gb300-qwen3-235b-a22b-256", "qwen3-235b-a22b", "gb300", 256, 8192, 4096, 8816),
    BlackwellRow("gb200-qwen3-235b-a22b-256", "qwen3-235b-a22b", "gb200", 256, 8192, 4096, 7280),
)


@dataclass(frozen=True)
class RowResult:
    """A row simulated at a calibration: throughput, whether memory was over HBM, the busiest stage's costs."""

    row: BlackwellRow
    tokens_per_s_per_gpu: float
    over_hbm: bool
    costs: StageCosts

    @property
    def error(self) -> float:
        """Simulated / measured - 1 (< 0: the simulator is slow)."""
        return self.tokens_per_s_per_gpu / self.row.measured_tokens_per_s_per_gpu - 1


def simulate_row(row: BlackwellRow, calibration: Calibration = DEFAULT_CALIBRATION) -> RowResult:
    """The row's recipe simulated on its cluster (allow_oom: the memory verdict is reported, not enforced)."""
    job = parse_megatron_args(ROOT / "examples" / "megatron" / f"{row.name}.sh")
    run = job.resolve(load_model(ROOT / "examples" / "models" / f"{row.model}.json"))
    sizes = (row.global_batch, row.seq_len)
    workload, cluster, over_hbm = prepare(run.model, run.layout, row.gpus, row.cluster, *sizes, None, True, calibration)
    report = simulate(
        run.model,
        run.layout,
        row.gpus,
        cluster=row.cluster,
        global_batch=row.global_batch,
        seq_len=row.seq_len,
        calibration=calibration,
        allow_oom=True,
    )
    return RowResult(row, report.tokens_per_s_per_gpu, over_hbm, busiest_stage(workload, cluster, calibration))


def table() -> str:
    """Measured against simulated per row, at the fitted residual and at 1, with the busiest stage's costs."""
    lines = [
        f"{SOURCE}: tokens/s/GPU (out of the corpus: no Blackwell run is in `moesim validate`)",
        f"{'row':28} {'measured':>9} {'simulated':>9} {'error':>7} {'resid. 1':>9} {'error':>7}",
    ]
    for row in ROWS:
        fitted, unfitted = simulate_row(row), simulate_row(row, UNFITTED_CALIBRATION)
        oom = "  (over HBM: allow_oom)" if fitted.over_hbm else ""
        lines.append(
            f"{row.name:28} {row.measured_tokens_per_s_per_gpu:9,.0f} {fitted.tokens_per_s_per_gpu:9,.0f} "
            f"{fitted.error:+7.1%} {unfitted.tokens_per_s_per_gpu:9,.0f} {unfitted.error:+7.1%}{oom}"
        )
        lines.append(f"  stage {fitted.costs.stage}, one micro-batch: {fitted.costs.phrase()}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
