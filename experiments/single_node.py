"""MegaScale-MoE Figs. 14, 16 and 17: single-node strategies, fused kernels and SAR, for M1-M6."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.plotting import bar_comparison
from simulator.engine import PipelineEngine
from simulator.memory import peak_memory
from simulator.report import simulate
from topologies.cluster import cluster_preset
from workloads.layouts import layout_preset
from workloads.models import MODEL_PRESETS, model_preset
from workloads.step import StepWorkload

MODELS = ("paper-352b", "mixtral-8x7b", "mixtral-8x22b", "hunyuan-large", "phi-3.5-moe", "deepseekmoe")
SEQ_LEN = 8192  # not given for Figs. 14 and 16; the paper's training length
BATCH = 32  # Fig. 14: global batch 32 on 8 x H800
FIG14_MFU_GAIN = (0.149, 0.329)
FIG14_MEMORY_COST = (0.012, 0.054)
FIG14_BAND_WIDENING = 0.05
FIG16_PAIR_SPEEDUP = (1.2, 4.7)
FIG16_ITERATION_SAVING = (0.071, 0.129)
FIG17_ACTIVATION_SAVING = {"mixtral-8x7b": 0.455, "mixtral-8x22b": 0.572}
FIG17_TOLERANCE = 0.05
PAIRS = (
    ("qkv_proj", "sp_a2a_qkv"),
    ("sp_a2a_out", "o_proj"),
    ("ep_a2a_dispatch", "expert_fc13"),
    ("expert_fc2", "ep_a2a_combine"),
)


def single_node_model(name: str):
    """The model with its layer count cut so that TP+TP and SP+EP both fit one node's memory."""
    model = model_preset(name)
    hbm = cluster_preset("h800", 8).gpu.hbm_bytes
    for layers in range(model.num_layers, 0, -1):
        candidate = model.with_(num_layers=layers)
        if all(peak_memory(_workload(candidate, layout)).total_bytes <= hbm for layout in ("tp-tp", "sp-ep")):
            return candidate
    return model.with_(num_layers=1)


def _workload(model, layout: str) -> StepWorkload:
    return StepWorkload(model, layout_preset(layout).with_(pp=1), 8, 8, BATCH, SEQ_LEN)


def _simulate(model, layout: str):
    return simulate(model, layout_preset(layout).with_(pp=1), 8, global_batch=BATCH, seq_len=SEQ_LEN)


def simulate_fig14() -> pd.DataFrame:
    rows = []
    for name in MODELS:
        model = single_node_model(name)
        tp, sp = _simulate(model, "tp-tp"), _simulate(model, "sp-ep")
        rows.append(
            {
                "model": name,
                "layers": model.num_layers,
                "mfu_tp_tp": tp.mfu,
                "mfu_sp_ep": sp.mfu,
                "mfu_gain": sp.mfu / tp.mfu - 1,
                "memory_tp_tp_gib": tp.peak_memory_gib,
                "memory_sp_ep_gib": sp.peak_memory_gib,
                "memory_cost": sp.peak_memory_gib / tp.peak_memory_gib - 1,
            }
        )
    return pd.DataFrame(rows)


def _pair_times(model, layout: str) -> dict[str, float]:
    """Forward time of each op (or fused op) of the first layer, by name."""
    workload = _workload(model, layout)
    engine = PipelineEngine(workload, cluster_preset("h800", 8))
    key = ("F", False, False)
    ops = workload.task_ops(key)
    times: dict[str, float] = {}
    for index, begin, end in engine.task_timing(key).intervals:
        if ops[index].layer == 0:
            times[ops[index].name] = end - begin
    return times


def simulate_fig16() -> pd.DataFrame:
    rows = []
    for name in MODELS:
        model = single_node_model(name)
        unfused, fused = _pair_times(model, "sp-ep-inter"), _pair_times(model, "sp-ep-inter-intra")
        row = {"model": name}
        for first, second in PAIRS:
            before = unfused.get(first, 0.0) + unfused.get(second, 0.0)
            after = fused.get(f"{first}+{second}", fused.get(f"{second}+{first}", before))
            row[f"{first}+{second}_speedup"] = before / after
        inter, intra = _simulate(model, "sp-ep-inter"), _simulate(model, "sp-ep-inter-intra")
        row["iteration_saving"] = 1 - intra.step_time_s / inter.step_time_s
        rows.append(row)
    return pd.DataFrame(rows)


def simulate_fig17() -> pd.DataFrame:
    rows = []
    for name, pp in (("mixtral-8x7b", 4), ("mixtral-8x22b", 4)):
        model = MODEL_PRESETS[name]
        result = {}
        for recompute in ("none", "sar"):
            layout = layout_preset("megascale-moe").with_(pp=pp, recompute=recompute)
            breakdown = peak_memory(StepWorkload(model, layout, 128, 8, 128, SEQ_LEN))
            report = simulate(model, layout, 128, global_batch=128, seq_len=SEQ_LEN, allow_oom=True)
            result[recompute] = (breakdown, report)
        (no_sar, r0), (sar, r1) = result["none"], result["sar"]
        rows.append(
            {
                "model": name,
                "activation_saving": 1 - sar.activations_bytes / no_sar.activations_bytes,
                "paper_activation_saving": FIG17_ACTIVATION_SAVING[name],
                "total_saving": 1 - sar.total_bytes / no_sar.total_bytes,
                "mfu_no_sar": r0.mfu,
                "mfu_sar": r1.mfu,
                "memory_no_sar_gib": no_sar.total_gib,
                "memory_sar_gib": sar.total_gib,
            }
        )
    return pd.DataFrame(rows)


def run_fig14(out: Path) -> str:
    frame = simulate_fig14()
    frame.to_csv(out / "fig14.csv", index=False, float_format="%.6g")
    bar_comparison(
        out / "fig14.png",
        title="Fig. 14: one node, MFU of TP+TP vs SP+EP (sim)",
        categories=list(frame.model),
        xlabel="model",
        ylabel="MFU (%)",
        series={"TP+TP sim": frame.mfu_tp_tp * 100, "SP+EP sim": frame.mfu_sp_ep * 100},
    )
    lines = [
        "## Fig. 14: single node (8 x H800, batch 32), SP+EP vs TP+TP, no overlap",
        "",
        "| model | layers | MFU TP+TP | MFU SP+EP | gain sim | memory cost of SP sim |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.model} | {r.layers} | {r.mfu_tp_tp:.1%} | {r.mfu_sp_ep:.1%} | {r.mfu_gain:+.1%} | {r.memory_cost:+.1%} |"
        for r in frame.itertuples()
    ]
    lines += [
        "",
        (
            "Paper: SP+EP MFU +14.9% to +32.9% across M1-M6; SP costs 1.2-5.4% more memory. "
            "Sequence length 8,192 and layer counts cut to fit 80 GB are our choices (not given)."
        ),
        "",
        (
            "Misses: the gain is above the band for the narrow-expert models (Phi-3.5-MoE, DeepSeekMoE), "
            "where TP's 8-way sharded expert GEMMs (width h_ffn/8 = 800 and 176) and the memory-bound "
            "permutation of all b s k copies on every GPU dominate; SP's memory cost is above the paper's "
            "because our SP keeps replicated attention weights with FP32 gradients and Adam states per GPU "
            "(ZeRO-1 over DP = 1 shards nothing) and the activation formulas of Sec. 4.1."
        ),
    ]
    return "\n".join(lines)


def run_fig16(out: Path) -> str:
    frame = simulate_fig16()
    frame.to_csv(out / "fig16.csv", index=False, float_format="%.6g")
    cols = [c for c in frame.columns if c.endswith("_speedup")]
    bar_comparison(
        out / "fig16.png",
        title="Fig. 16: fused / unfused forward pairs (sim speedup)",
        categories=list(frame.model),
        xlabel="model",
        ylabel="speedup (x)",
        series={c.replace("_speedup", ""): frame[c] for c in cols},
    )
    lines = [
        "## Fig. 16: intra-operator overlap (fused GEMM + collective), one node",
        "",
        "| model | " + " | ".join(c.replace("_speedup", "") for c in cols) + " | iteration saving |",
        "|---|" + "---|" * (len(cols) + 1),
    ]
    lines += [
        "| " + r["model"] + " | " + " | ".join(f"{r[c]:.2f}x" for c in cols) + f" | {r['iteration_saving']:.1%} |"
        for _, r in frame.iterrows()
    ]
    lines += [
        "",
        "Paper: each fused pair 1.2-4.7x faster than unfused; iteration time -7.1% to -12.9%.",
        "",
        (
            "Miss: our unfused baseline is an ideal NCCL collective followed by the GEMM, so fusion can save "
            "at most the shorter of the two; the paper's larger gains (up to 4.7x) imply a slower unfused "
            "path (separate scatter/gather kernels, synchronization) than modelled."
        ),
    ]
    return "\n".join(lines)


def run_fig17(out: Path) -> str:
    frame = simulate_fig17()
    frame.to_csv(out / "fig17.csv", index=False, float_format="%.6g")
    bar_comparison(
        out / "fig17.png",
        title="Fig. 17: activation memory saved by SAR",
        categories=list(frame.model),
        xlabel="model",
        ylabel="saving (%)",
        series={"paper": frame.paper_activation_saving * 100, "sim": frame.activation_saving * 100},
    )
    lines = [
        "## Fig. 17: selective activation rematerialization (128 H800, PP 4)",
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
    lines += [
        "",
        "Paper: total memory -21.3% and -35%, MFU within 0.5%.",
        "",
        (
            "Miss: the Sec. 4.1 per-layer formulas alone give 66% / 69% savings; the paper's measured "
            "45.5% / 57.2% count all activations (embeddings, logits, allocator slack) that SAR does not "
            "touch. Recomputation is hidden by overlap, so MFU moves < 0.5 points as in the paper."
        ),
    ]
    return "\n".join(lines)
