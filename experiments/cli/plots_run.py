"""``moesim run --plot``: a Gantt chart per pipeline stage and a stacked bar of where the time goes."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt

from experiments.common.paths import save_figure
from simulator.outputs.trace import COMPUTE_T, stage_intervals
from simulator.outputs.trace_files import TracedRun

Span = tuple[float, float]
COLOURS = {
    "compute": "#31a354",
    "exposed comm": "#e6550d",
    "bubble / idle": "#d9d9d9",
    "DP sync + optimizer": "#756bb1",
}
BREAKDOWN_COLOURS = {
    "compute": "#31a354",
    "tp": "#fdae6b",
    "sp": "#e6550d",
    "ep": "#a63603",
    "cp": "#fd8d3c",
    "etp": "#7f2704",
    "pp": "#6baed6",
    "dp": "#756bb1",
    "bubble": "#d9d9d9",
}


def merge(spans: list[Span]) -> list[Span]:
    """Union of intervals, sorted and coalesced."""
    out: list[Span] = []
    for begin, end in sorted(spans):
        if out and begin <= out[-1][1] + 1e-12:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out


def subtract(spans: list[Span], holes: list[Span]) -> list[Span]:
    """Parts of merged ``spans`` not covered by merged ``holes``."""
    out: list[Span] = []
    j = 0
    for begin, end in spans:
        cursor = begin
        while j < len(holes) and holes[j][1] <= cursor:
            j += 1
        k = j
        while k < len(holes) and holes[k][0] < end:
            if holes[k][0] > cursor:
                out.append((cursor, holes[k][0]))
            cursor = max(cursor, holes[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def stage_gantt(run: TracedRun, stage: int) -> dict[str, list[Span]]:
    """Compute, exposed communication (task time without compute), idle and DP-sync spans of a stage."""
    log = run.result.stages[stage]
    compute = merge([(a, b) for a, b, _, _ in stage_intervals(run.timeline, stage)[COMPUTE_T]])
    tasks = merge([(begin, end) for _, begin, end in log.tasks])
    return {
        "compute": compute,
        "exposed comm": subtract(tasks, compute),
        "bubble / idle": subtract([(0.0, log.pipeline_end_s)], tasks),
        "DP sync + optimizer": [(log.pipeline_end_s, log.end_s)] if log.end_s > log.pipeline_end_s else [],
    }


def breakdown(run: TracedRun, stage: int) -> dict[str, float]:
    """Seconds of the step on ``stage``: compute, exposed tp/sp/ep/cp/etp/pp/dp, and the rest (bubble)."""
    log = run.result.stages[stage]
    parts = {"compute": log.compute_busy_s}
    for kind in ("tp", "sp", "ep", "cp", "etp"):  # cp and etp: 0 unless the layout uses them
        parts[kind] = log.exposed_comm_s.get(kind, 0.0)
    parts["pp"] = log.pp_wait_s
    parts["dp"] = log.dp_exposed_s
    parts["bubble"] = max(0.0, run.result.step_time_s - sum(parts.values()))
    return parts


def plot_run(path: str | Path, run: TracedRun) -> None:
    """Write the Gantt chart (left) and the per-stage time breakdown (right) to ``path``."""
    stages = run.workload.pp
    fig, (gantt, bars) = plt.subplots(
        1, 2, figsize=(14, 1.2 + 0.4 * stages), gridspec_kw={"width_ratios": [3, 1]}, sharey=True
    )
    for stage in range(stages):
        for label, spans in stage_gantt(run, stage).items():
            if spans:
                gantt.broken_barh(
                    [(a, b - a) for a, b in spans],
                    (stage - 0.4, 0.8),
                    facecolors=COLOURS[label],
                    label=label if stage == 0 else None,
                )
    gantt.set_xlim(0, run.result.step_time_s)
    gantt.set_xlabel("time in step (s)")
    gantt.set_ylabel("pipeline stage")
    gantt.set_yticks(range(stages))
    gantt.invert_yaxis()
    gantt.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08 - 1.0 / stages), ncol=4, fontsize=8)
    report = run.report
    gantt.set_title(
        f"{report.model} / {report.layout} on {report.gpus} GPUs: step {report.step_time_s:.3f} s, "
        f"MFU {report.mfu * 100:.1f}%",
        fontsize=10,
    )
    left = [0.0] * stages
    parts = [breakdown(run, stage) for stage in range(stages)]
    for label, colour in BREAKDOWN_COLOURS.items():
        widths = [p[label] for p in parts]
        if label in ("cp", "etp") and not any(widths):
            continue  # not in this layout: no legend entry
        bars.barh(range(stages), widths, left=left, color=colour, label=label, height=0.8)
        left = [a + b for a, b in zip(left, widths)]
    bars.set_xlabel("seconds of the step")
    bars.set_title("where the time goes", fontsize=10)
    bars.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08 - 1.0 / stages), ncol=4, fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110, bbox_inches="tight")
    plt.close(fig)
