"""MegaScale-MoE Table 5: ablation at 240 GPUs, batch 720, throughput normalized to TP+TP, no overlap."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments.paths import write_csv
from experiments.plotting import bar_comparison
from experiments.shared_sims import simulate

PAPER_NORMALIZED = {"tp-tp": 1.00, "sp-ep": 1.13, "sp-ep-inter": 1.22, "sp-ep-inter-intra": 1.28}


def simulate_table5() -> pd.DataFrame:
    reports = {layout: simulate("paper-352b", layout, 240) for layout in PAPER_NORMALIZED}
    base = reports["tp-tp"].tokens_per_s
    return pd.DataFrame(
        [
            {
                "layout": layout,
                "paper": paper,
                "sim": reports[layout].tokens_per_s / base,
                "sim_tokens_per_s": reports[layout].tokens_per_s,
                "error": reports[layout].tokens_per_s / base - paper,
            }
            for layout, paper in PAPER_NORMALIZED.items()
        ]
    )


def run(out: Path) -> str:
    frame = simulate_table5()
    write_csv(frame, out / "table5.csv", float_format="%.6g")
    bar_comparison(
        out / "table5.png",
        title="Table 5: ablation at 240 GPUs (normalized throughput)",
        categories=list(frame.layout),
        xlabel="step",
        ylabel="throughput / TP+TP",
        series={"paper": frame.paper, "sim": frame.sim},
    )
    lines = [
        "## Table 5: ablation, 240 GPUs, normalized to TP+TP without overlap",
        "",
        "| step | paper | sim | error |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r.layout} | {r.paper:.2f} | {r.sim:.3f} | {r.error:+.3f} |" for r in frame.itertuples()]
    sp_ep = frame.set_index("layout").loc["sp-ep"]
    overlap = frame[frame.layout.isin(["sp-ep-inter", "sp-ep-inter-intra"])]
    within = math.ceil(overlap.error.abs().max() * 100) / 100  # rounded up to 0.01
    gains = "more" if sp_ep.sim > sp_ep.paper else "less"
    lines += [
        "",
        (
            f"Miss: SP+EP alone gains {gains} than measured ({sp_ep.sim:.2f} vs {sp_ep.paper:.2f}): without "
            "overlap, the TP baseline's four NCCL collectives per layer are charged at the full measured NVLink "
            "rate and fully exposed; the paper's baseline likely hid part of them (e.g. Megatron-style async "
            f"all-gather in backward). The overlap steps are predicted within {within:.2f}."
        ),
    ]
    return "\n".join(lines)
