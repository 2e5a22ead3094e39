"""MegaScale-MoE Fig. 17: selective activation rematerialization (SAR) on Mixtral-8x7B and 8x22B."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.common.paths import write_csv
from experiments.common.plotting import bar_comparison
from experiments.common.shared_sims import simulate
from experiments.common.single_node import SEQ_LEN
from simulator.memory.per_gpu import peak_memory
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import MODEL_PRESETS

FIG17_ACTIVATION_SAVING = {"mixtral-8x7b": 0.455, "mixtral-8x22b": 0.572}
FIG17_TOTAL_SAVING = {"mixtral-8x7b": 0.213, "mixtral-8x22b": 0.35}  # total memory, as measured
FIG17_MFU_CHANGE = 0.005  # the paper's statement, not a tolerance: "MFU within 0.5%" with SAR (Fig. 17)
GPUS = 128
PP = 4
BATCH = 128


def simulate_fig17() -> pd.DataFrame:
    rows = []
    for name, paper_saving in FIG17_ACTIVATION_SAVING.items():
        model = MODEL_PRESETS[name]
        result = {}
        for recompute in ("none", "sar"):
            layout = layout_preset("megascale-moe").with_(pp=PP, recompute=recompute)
            breakdown = peak_memory(StepWorkload(model, layout, GPUS, 8, BATCH, SEQ_LEN))
            report = simulate(model, layout, GPUS, global_batch=BATCH, seq_len=SEQ_LEN, allow_oom=True)
            result[recompute] = (breakdown, report)
        (no_sar, r0), (sar, r1) = result["none"], result["sar"]
        rows.append(
            {
                "model": name,
                "activation_saving": 1 - sar.activations_bytes / no_sar.activations_bytes,
                "paper_activation_saving": paper_saving,
                "total_saving": 1 - sar.total_bytes / no_sar.total_bytes,
                "mfu_no_sar": r0.mfu,
                "mfu_sar": r1.mfu,
                "memory_no_sar_gib": no_sar.total_gib,
                "memory_sar_gib": sar.total_gib,
            }
        )
    return pd.DataFrame(rows)


def run(out: Path) -> str:
    frame = simulate_fig17()
    write_csv(frame, out / "fig17.csv", float_format="%.6g")
    bar_comparison(
        out / "fig17.png",
        title="Fig. 17: activation memory saved by SAR",
        categories=list(frame.model),
        xlabel="model",
        ylabel="saving (%)",
        series={"paper": frame.paper_activation_saving * 100, "sim": frame.activation_saving * 100},
    )
    lines = [
        f"## Fig. 17: selective activation rematerialization ({GPUS} H800, PP {PP})",
        "",
        (
            "| model | activation saving paper | sim | total memory saving sim | memory no SAR / SAR (GiB) "
            "| MFU no SAR | MFU SAR |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.model} | {r.paper_activation_saving:.1%} | {r.activation_saving:.1%} | {r.total_saving:.1%} "
        f"| {r.memory_no_sar_gib:.0f} / {r.memory_sar_gib:.0f} | {r.mfu_no_sar:.2%} | {r.mfu_sar:.2%} |"
        for r in frame.itertuples()
    ]
    largest = (frame.mfu_no_sar - frame.mfu_sar).abs().max()
    mfu_moves = f"by at most {largest * 100:.2f} points (paper: within {FIG17_MFU_CHANGE * 100:.1f})"
    lines += [
        "",
        (
            "Paper: total memory "
            + " and ".join(f"-{v:.3g}%" for v in (100 * x for x in FIG17_TOTAL_SAVING.values()))
            + f", MFU within {FIG17_MFU_CHANGE:.1%}."
        ),
        "",
        (
            "Miss: the Sec. 4.1 per-layer formulas alone give "
            + " / ".join(f"{v:.0%}" for v in frame.activation_saving)
            + " savings; the paper's measured "
            + " / ".join(f"{v:.1%}" for v in frame.paper_activation_saving)
            + " count all activations (embeddings, logits, allocator slack) that SAR does not touch. "
            f"Recomputation is hidden by overlap, so MFU moves {mfu_moves}."
        ),
    ]
    return "\n".join(lines)
