"""Beyond the paper: expert parallelism inside the node (the paper's) or across nodes (DeepEP style, with
node-limited routing), on the same GPUs, for M1 and M6 as the NIC gets faster.

Choice (documented in REPRODUCTION.md): both placements keep SP 8 attention inside the node; in-node EP
is EP 8 (the paper's), cross-node EP shards the experts over ``cross_ep`` GPUs of several nodes. Each
placement gets the fewest pipeline stages (a divisor of the layers) that its peak memory fits the 80 GB
HBM with, since sharding experts wider is what lets the pipeline get shorter; M1 also shows the paper's
own PP 15 in-node layout for reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt
import pandas as pd

from experiments.common.paths import save_figure, write_csv
from experiments.common.plotting import COLOURS, from_zero
from experiments.search.compare import axis, sweep
from experiments.search.space import Job
from topologies.cluster import cluster_preset
from workloads.graph.step import DEFAULT_SEQ_LEN
from workloads.specs.layouts import MEGASCALE_MOE, LayoutSpec
from workloads.specs.models import model_preset

NIC_GBPS = (50, 100, 200, 400)
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Setup:
    """One model's comparison: GPUs, batch, and the cross-node EP degree and node limit M."""

    model: str
    label: str
    gpus: int
    global_batch: int
    cross_ep: int
    max_nodes: int


# M1: 480 GPUs (Table 3's second column) at the paper's batch 720; EP 32 = 4 nodes, so M = 4 does not bind.
# M6: 128 GPUs, batch 256; EP 64 = 8 nodes, one expert per GPU, M = 4 binds (also shown unlimited).
SETUPS = (Setup("paper-352b", "M1", 480, 720, 32, 4), Setup("deepseekmoe", "M6", 128, 256, 64, 4))


def fewest_stages(model_name: str, layout: LayoutSpec, gpus: int, global_batch: int) -> int | None:
    """Fewest pipeline stages (a divisor of the layers) that the layout runs with inside the HBM."""
    model, hbm = model_preset(model_name), cluster_preset("h800", gpus).gpu.hbm_bytes
    depths = Job(gpus, GPUS_PER_NODE, global_batch, DEFAULT_SEQ_LEN, hbm).stages_that_fit(model, layout)
    return depths[0] if depths else None


def placements(setup: Setup) -> list[LayoutSpec]:
    """In-node EP 8, cross-node EP with node limit M (and unlimited where M binds), each at its fewest PP."""
    nodes = setup.cross_ep // GPUS_PER_NODE
    candidates = [
        MEGASCALE_MOE.with_(name="in-node EP 8"),
        MEGASCALE_MOE.with_(
            name=f"cross-node EP {setup.cross_ep}, M={setup.max_nodes}", ep=setup.cross_ep, ep_max_nodes=setup.max_nodes
        ),
    ]
    if setup.max_nodes < nodes:
        candidates.append(MEGASCALE_MOE.with_(name=f"cross-node EP {setup.cross_ep}, M unlimited", ep=setup.cross_ep))
    layouts = []
    for layout in candidates:
        pp = fewest_stages(setup.model, layout, setup.gpus, setup.global_batch)
        if pp is not None:
            layouts.append(layout.with_(name=f"{layout.name}, PP {pp}", pp=pp))
    if setup.model == "paper-352b" and all(layout.pp != MEGASCALE_MOE.pp for layout in layouts):
        layouts.append(MEGASCALE_MOE.with_(name=f"in-node EP 8, PP {MEGASCALE_MOE.pp} (paper)"))
    return layouts


def simulate_layouts_ep(setups: tuple[Setup, ...] = SETUPS, nic_gbps: tuple[int, ...] = NIC_GBPS) -> pd.DataFrame:
    """One row per (model, placement, NIC bandwidth), simulated with ``moesim compare``'s sweep."""
    frames = []
    for setup in setups:
        layouts = placements(setup)
        nic = axis("nic_bandwidth_Bps", [g * 1e9 for g in nic_gbps], label="nic_gbps")
        frame = sweep(setup.model, layouts, [setup.gpus], [nic], global_batch=setup.global_batch)
        by_name = {layout.name: layout for layout in layouts}
        frame["nic_gbps"] = frame.nic_gbps / 1e9
        frame["model_label"] = setup.label
        frame["placement"] = ["cross-node" if by_name[n].ep else "in-node" for n in frame.layout]
        frame["ep"] = [by_name[n].ep or by_name[n].intra_size for n in frame.layout]
        frame["ep_max_nodes"] = [by_name[n].ep_max_nodes for n in frame.layout]
        frame["pp"] = [by_name[n].pp for n in frame.layout]
        frame["dp"] = setup.gpus // (GPUS_PER_NODE * frame.pp)
        frame["tokens_per_s_per_gpu"] = frame.tokens_per_s / frame.gpus
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def plot(frame: pd.DataFrame, path: Path) -> None:
    """Tokens/s per GPU against NIC bandwidth, one panel per model, one line per EP placement."""
    models = list(dict.fromkeys(frame.model_label))
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4.2), squeeze=False)
    for ax, label in zip(axes[0], models):
        part = frame[frame.model_label == label]
        for i, (name, group) in enumerate(part.groupby("layout", sort=False)):
            style = "--" if group.placement.iloc[0] == "cross-node" else "-"
            ax.plot(
                group.nic_gbps,
                group.tokens_per_s_per_gpu,
                style,
                marker="o",
                label=name,
                color=COLOURS[(2 * i + 1) % len(COLOURS)],
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(part.nic_gbps.unique()), [f"{g:g}" for g in part.nic_gbps.unique()])
        ax.set_xlabel("NIC bandwidth per GPU (GB/s)")
        ax.set_ylabel("tokens/s per GPU")
        from_zero(ax)
        ax.set_title(f"{label} ({part.model.iloc[0]}), {part.gpus.iloc[0]} H800s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def markdown(frame: pd.DataFrame) -> str:
    """The REPRODUCTION.md section: set-up, table, finding and caveats."""
    bandwidths = sorted(frame.nic_gbps.unique())
    lines = [
        "## Beyond the paper: in-node vs cross-node expert parallelism (M1, M6; NIC 50-400 GB/s)",
        "",
        (
            "The paper keeps EP inside the 8-GPU node (Sec. 3: the all-to-all stays on NVLink); DeepSeek-V3 runs EP "
            "across nodes with DeepEP and node-limited routing (a token reaches at most M nodes). Both placements "
            "below use the same GPUs with SP 8 attention in the node; cross-node EP sends each token once per remote "
            "node over the NIC and fans out over NVLink (workloads/ep/plan.py), and shares the NIC with PP and DP. "
            "Each placement runs at the fewest PP stages whose peak memory fits 80 GB (wider EP shards the experts "
            "further, so the pipeline can be shorter). "
            + "; ".join(
                f"{s.label} ({s.model}): {s.gpus} GPUs, batch {s.global_batch} x {DEFAULT_SEQ_LEN}"
                for s in SETUPS
                if s.label in set(frame.model_label)
            )
            + " (sized to run in ~10 s on 2 CPU cores: simulation time grows with micro-batches per pipeline)."
        ),
        "",
        "| model | placement | EP | M | PP | DP | peak GiB | bubble | "
        + " | ".join(f"tok/s/GPU @{g:g}" for g in bandwidths)
        + f" | exposed EP ms @{bandwidths[0]:g} | exposed EP ms @{bandwidths[-1]:g} |",
        "|---|---|---|---|---|---|---|---|" + "---|" * (len(bandwidths) + 2),
    ]
    for (label, name), group in frame.groupby(["model_label", "layout"], sort=False):
        group = group.sort_values("nic_gbps")
        first, last = group.iloc[0], group.iloc[-1]
        m = "-" if first.placement == "in-node" else (str(first.ep_max_nodes) if first.ep_max_nodes else "all")
        lines.append(
            f"| {label} | {name} | {first.ep} | {m} | {first.pp} | {first.dp} | {first.peak_memory_gib:.1f} | "
            f"{first.bubble_fraction:.1%} | "
            + " | ".join(f"{v:,.0f}" for v in group.tokens_per_s_per_gpu)
            + f" | {first.exposed_ep_s * 1e3:.0f} | {last.exposed_ep_s * 1e3:.0f} |"
        )
    lines += ["", _finding(frame), "", CAVEATS]
    return "\n".join(lines)


def _finding(frame: pd.DataFrame) -> str:
    """Per model: best cross-node over best in-node placement at each NIC rate, why, and what M buys."""
    parts = []
    for label, part in frame.groupby("model_label", sort=False):
        best = part.groupby(["nic_gbps", "placement"]).tokens_per_s_per_gpu.max().unstack()
        ratios = ", ".join(f"{r:.3f}x" for r in best["cross-node"] / best["in-node"])
        text = (
            f"{label}: best cross-node / best in-node EP = {ratios} at {', '.join(f'{g:g}' for g in best.index)} GB/s"
        )
        slow = part[part.nic_gbps == part.nic_gbps.min()]
        top = {p: slow.loc[slow[slow.placement == p].tokens_per_s_per_gpu.idxmax()] for p in ("in-node", "cross-node")}
        text += (
            f"; at {slow.nic_gbps.iloc[0]:g} GB/s in-node PP {top['in-node'].pp} -> cross-node PP "
            f"{top['cross-node'].pp}, exposed EP {top['in-node'].exposed_ep_s * 1e3:.0f} -> "
            f"{top['cross-node'].exposed_ep_s * 1e3:.0f} ms, exposed DP {top['in-node'].exposed_dp_s * 1e3:.0f} "
            f"-> {top['cross-node'].exposed_dp_s * 1e3:.0f} ms per step"
        )
        cross = slow[slow.placement == "cross-node"].set_index("ep_max_nodes")
        if 0 in cross.index and len(cross) > 1:
            limited = cross.drop(index=0).iloc[0]
            gain = limited.tokens_per_s_per_gpu / cross.loc[0].tokens_per_s_per_gpu - 1
            text += (
                f"; node-limited routing (M = {limited.name}) is worth {gain:+.1%} over unlimited there "
                f"({cross.loc[0].exposed_ep_s * 1e3:.0f} -> {limited.exposed_ep_s * 1e3:.0f} ms exposed EP)"
            )
        parts.append(text)
    return (
        "Finding (throughput per GPU): " + "; ".join(parts) + ". Cross-node EP does not make EP cheaper; "
        "where it wins, it wins through what wider expert sharding frees: a shorter pipeline (smaller bubble) "
        "and fewer expert gradients per GPU for the DP sync on the same NIC. On a slow NIC its own all-to-all "
        "is exposed instead, most for thin experts (R < 1, see r-ratio)."
    )


CAVEATS = (
    "Caveats: routing is uniform (skewed load is the `skew` section); the node-limited byte count is "
    "the expectation over uniformly chosen nodes, not DeepEP's measured traffic; the NIC is a fluid max-min "
    "fair link (no congestion control, incast or adaptive routing); the fewest-stages rule can land close to the "
    "HBM limit (see peak GiB), where a real run would need headroom for fragmentation; 1F1B, not DualPipe."
)


def run(out: Path, setups: tuple[Setup, ...] = SETUPS, nic_gbps: tuple[int, ...] = NIC_GBPS) -> str:
    """Write results/layouts-ep.csv and .png; return the markdown section."""
    frame = simulate_layouts_ep(setups, nic_gbps)
    columns = [
        "model_label",
        "model",
        "layout",
        "placement",
        "ep",
        "ep_max_nodes",
        "pp",
        "dp",
        "gpus",
        "nic_gbps",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "mfu",
        "bubble_fraction",
        "peak_memory_gib",
        "step_time_s",
        *(c for c in frame.columns if c.startswith("exposed_")),
        "error",
    ]
    write_csv(frame[columns], out / "layouts-ep.csv", float_format="%.6g")
    plot(frame.dropna(subset=["tokens_per_s"]), out / "layouts-ep.png")
    return markdown(frame)
