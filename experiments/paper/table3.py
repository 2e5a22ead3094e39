"""MegaScale-MoE Table 3: strong scaling of the 352B model on 240-1,440 H800 GPUs, global batch 720."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.common.paths import write_csv
from experiments.common.plotting import bar_comparison
from experiments.common.shared_sims import simulate
from simulator.costs.calibration import DEFAULT_CALIBRATION
from workloads.graph.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN

TOKENS_PER_STEP = DEFAULT_GLOBAL_BATCH * DEFAULT_SEQ_LEN
GPUS = (240, 480, 720, 960, 1440)
# Table 3 as printed: (Megatron-LM tokens/s, MegaScale-MoE tokens/s)
PAPER_TOKENS_PER_S = {
    240: (151.1e3, 272.9e3),
    480: (301.1e3, 498.6e3),
    720: (430.5e3, 740.1e3),
    960: (550.2e3, 963.8e3),
    1440: (746.6e3, 1407.7e3),
}
# Self-consistent Megatron values (MegaScale-MoE Table 3 as printed): 240 GPUs prints 39.94 s but 151.1k tokens/s (= 39.03 s);
# 960 GPUs prints 550.2k tokens/s but 10.82 s (= 545.1k). We compare against the tokens/s that the
# iteration time and the printed speedup agree on: 151.1k at 240 and 545.1k at 960.
PAPER_MEGATRON_DISAGREEING = (240, 960)  # cells whose printed iteration time and tokens/s disagree
PAPER_MEGATRON_SELF_CONSISTENT = {**{g: v[0] for g, v in PAPER_TOKENS_PER_S.items()}, 960: TOKENS_PER_STEP / 10.82}
PAPER_MFU = {240: 0.3248, 1440: 0.2789}  # MegaScale-MoE, Sec. 6


def simulate_table3() -> pd.DataFrame:
    """One row per GPU count: paper and simulated tokens/s for both systems, errors and speedups."""
    rows = []
    for gpus in GPUS:
        megatron = simulate("paper-352b", "megatron-lm", gpus)
        megascale = simulate("paper-352b", "megascale-moe", gpus)
        paper_megatron = PAPER_MEGATRON_SELF_CONSISTENT[gpus]
        paper_megascale = PAPER_TOKENS_PER_S[gpus][1]
        rows.append(
            {
                "gpus": gpus,
                "paper_megatron_tokens_per_s": paper_megatron,
                "sim_megatron_tokens_per_s": megatron.tokens_per_s,
                "megatron_error": megatron.tokens_per_s / paper_megatron - 1,
                "paper_megascale_tokens_per_s": paper_megascale,
                "sim_megascale_tokens_per_s": megascale.tokens_per_s,
                "megascale_error": megascale.tokens_per_s / paper_megascale - 1,
                "paper_speedup": paper_megascale / paper_megatron,
                "sim_speedup": megascale.tokens_per_s / megatron.tokens_per_s,
                "sim_megatron_step_s": megatron.step_time_s,
                "sim_megascale_step_s": megascale.step_time_s,
                "paper_megascale_mfu": PAPER_MFU.get(gpus, float("nan")),
                "sim_megascale_mfu": megascale.mfu,
                "sim_megascale_mfu_6n": megascale.mfu_6n,
                "sim_megatron_mfu": megatron.mfu,
                "sim_megascale_bubble": megascale.bubble_fraction,
                "sim_megatron_bubble": megatron.bubble_fraction,
                "sim_megascale_pp": megascale.pp,
                "sim_megascale_micro_batches": megascale.micro_batches,
            }
        )
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """The REPRODUCTION.md section for Table 3."""
    lines = [
        f"## Table 3: strong scaling, 352B model, H800, global batch {DEFAULT_GLOBAL_BATCH} x {DEFAULT_SEQ_LEN}",
        "",
        (
            "Megatron-LM paper values are the self-consistent ones ("
            + ", ".join(
                f"{PAPER_MEGATRON_SELF_CONSISTENT[g] / 1e3:.1f}k at {g:,} GPUs" for g in PAPER_MEGATRON_DISAGREEING
            )
            + "; the printed iteration time and tokens/s of those cells disagree, MegaScale-MoE Table 3)."
        ),
        "",
        (
            "| GPUs | Megatron paper | Megatron sim | err | MegaScale paper | MegaScale sim | err "
            "| speedup paper | speedup sim | MFU paper | MFU sim | MFU 6N sim |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.itertuples():
        mfu_paper = "" if row.paper_megascale_mfu != row.paper_megascale_mfu else f"{row.paper_megascale_mfu:.2%}"
        lines.append(
            f"| {row.gpus} | {row.paper_megatron_tokens_per_s / 1e3:.1f}k | {row.sim_megatron_tokens_per_s / 1e3:.1f}k "
            f"| {row.megatron_error:+.1%} | {row.paper_megascale_tokens_per_s / 1e3:.1f}k "
            f"| {row.sim_megascale_tokens_per_s / 1e3:.1f}k | {row.megascale_error:+.1%} "
            f"| {row.paper_speedup:.2f}x | {row.sim_speedup:.2f}x | {mfu_paper} | {row.sim_megascale_mfu:.2%} "
            f"| {row.sim_megascale_mfu_6n:.2%} |"
        )
    first, last = frame.iloc[0], frame.iloc[-1]
    last_error = last.megascale_error
    lines += [
        "",
        (
            f"Mean absolute error: MegaScale-MoE {_errors(frame, 'megascale_error')}, "
            f"Megatron-LM {_errors(frame, 'megatron_error')}."
        ),
        "",
        (
            f"Fitted: only `compute_residual` ({DEFAULT_CALIBRATION.compute_residual:.4f}: the published kernel "
            "speeds of simulator/costs/gemm_points.py run this step in 17.1 s, 1.26x too fast; at the sustained clock "
            f"({DEFAULT_CALIBRATION.sustained_clock_fraction:.3f}) in 19.3 s, 1.12x, so that much is still unmodelled), "
            f"on the MegaScale-MoE {int(first.gpus)}-GPU cell (so its "
            f"{first.megascale_error:.1%} error is by construction). Every other cell, including Megatron-LM at "
            f"{int(first.gpus)} GPUs, is a prediction. The "
            "Megatron-LM gap comes from modelled mechanisms only: TP all-gather/reduce-scatter on the compute "
            "stream (but for the QKV layer's backward re-gather and reduce-scatter, which Megatron-Core runs beside "
            "its dgrad and wgrad GEMMs), full recomputation of every layer (without it, its all-gather dispatcher's token copies and "
            "expanded int64 index overflow 80 GB: simulator/memory/per_gpu.py), one GEMM kernel per "
            "expert, unfused permutation over all b s k token copies on every GPU, a host sync per MoE layer, "
            "FP32 gradients."
        ),
        "",
        (
            f"Misses: the simulated speedup is {frame.sim_speedup.min():.2f}-{frame.sim_speedup.max():.2f}x "
            f"while the paper's varies non-monotonically ({frame.paper_speedup.min():.2f}-"
            f"{frame.paper_speedup.max():.2f}x; at {int(last.gpus):,} GPUs {last.sim_speedup:.2f}x against "
            f"{last.paper_speedup:.2f}x). The paper gives no Megatron recompute flags: every layer is recomputed at "
            "every scale, as one run script keeps it (recomputing only the layers that do not fit made Megatron-LM "
            "speed up with DP as ZeRO frees memory, 11.5-16% over this table). MegaScale-MoE is "
            f"{abs(last_error):.1%} {'slow' if last_error < 0 else 'fast'} at {int(last.gpus):,} GPUs, where the 1F1B "
            f"bubble dominates ({int(last.sim_megascale_micro_batches)} micro-batches for {int(last.sim_megascale_pp)} "
            "stages). MFU falls with scale because micro-batches per pipeline fall "
            f"({int(first.sim_megascale_micro_batches)} -> {int(last.sim_megascale_micro_batches)}): the simulated bubble "
            f"grows from {first.sim_megascale_bubble:.0%} to {last.sim_megascale_bubble:.0%} (the last "
            "stage's LM head makes stages unequal, which adds to the (p-1)/(m+p-1) ideal)."
        ),
    ]
    return "\n".join(lines)


def _errors(frame: pd.DataFrame, column: str) -> str:
    """'2.3% (largest 4.9%, at 480 GPUs)': the mean and the largest absolute error of a column."""
    errors = frame[column].abs()
    worst = frame.gpus[errors.idxmax()]
    return f"{errors.mean():.1%} (largest {errors.max():.1%}, at {worst:,} GPUs)"


def run(out: Path) -> str:
    """Write results/table3.csv and results/table3.png; return the markdown section."""
    frame = simulate_table3()
    write_csv(frame, out / "table3.csv", float_format="%.6g")
    bar_comparison(
        out / "table3.png",
        title="Table 3: 352B MoE strong scaling on H800 (tokens/s)",
        categories=[str(g) for g in frame.gpus],
        xlabel="GPUs",
        ylabel="thousand tokens/s",
        series={
            "Megatron-LM paper": frame.paper_megatron_tokens_per_s / 1e3,
            "Megatron-LM sim": frame.sim_megatron_tokens_per_s / 1e3,
            "MegaScale-MoE paper": frame.paper_megascale_tokens_per_s / 1e3,
            "MegaScale-MoE sim": frame.sim_megascale_tokens_per_s / 1e3,
        },
    )
    return markdown(frame)
