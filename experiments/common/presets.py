"""``moesim presets``: the model, layout and cluster presets, one line each (also the epilog of run --help)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from topologies.cluster import CLUSTER_PRESETS, cluster_preset
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import LAYOUT_PRESETS, LayoutSpec
from workloads.specs.models import MODEL_PRESETS, ModelSpec

if TYPE_CHECKING:
    from workloads.inputs.megatron import MegatronJob

DEFAULT_MODEL = "paper-352b"  # what `moesim run` simulates without --model (the paper's M1)


def megatron_base(job: MegatronJob, model: str | None) -> tuple[MegatronJob, ModelSpec]:
    """The model a Megatron job's flags are laid over: --model's; without it, the one the flags alone define
    (workloads/inputs/megatron_model.py flags_model); where they do not, DEFAULT_MODEL's, and the job says so."""
    from workloads.inputs import megatron_model  # only for a Megatron job (start-up, issue 38)

    if model is not None:
        return job, load_model(model)
    if megatron_model.defines_model(job.args):
        return job, megatron_model.flags_model(job.args)
    note = (
        "no --model, and the flags do not give one (--num-layers, --hidden-size, --num-attention-heads): "
        f"simulated {DEFAULT_MODEL}, moesim's default model, with the model flags given laid over it"
    )
    return dataclasses.replace(job, notes=(*job.notes, note)), load_model(DEFAULT_MODEL)


def _layout_line(layout: LayoutSpec) -> str:
    n = layout.intra_size
    attention = f"{layout.attention.upper()} {n} attention" if n > 1 else "no TP/SP"
    ep = f"EP {layout.ep_degree}" + (" across nodes" if layout.ep_degree > 8 else "")
    ffn = ep if layout.ffn == "ep" else f"TP {n} experts"
    schedule = f"{layout.schedule}" + (f" x{layout.virtual_stages}" if layout.virtual_stages > 1 else "")
    overlap = "inter+intra-op overlap" if layout.intra_op_overlap else "inter-op overlap"
    overlap = overlap if layout.inter_op_overlap else "no overlap"
    fp8 = ", FP8" if layout.gemm_dtype == "fp8" else ""
    return f"{attention}, {ffn}, PP {layout.pp} {schedule}, {overlap}, recompute {layout.recompute}{fp8}"


def preset_lines() -> list[str]:
    """One line per preset, grouped: models, layouts, clusters."""
    lines = ["models (--model; also a .yaml file or a Hugging Face config.json):"]
    for name, m in MODEL_PRESETS.items():
        moe = f"{m.num_experts} experts top-{m.top_k}" if m.num_experts else "dense"
        params = f"{m.total_params / 1e9:.0f}B total, {m.active_params / 1e9:.0f}B active"
        lines.append(f"  {name:<18} {m.num_layers} layers, hidden {m.hidden_size}, {moe}, {params}")
    lines.append("layouts (--layout; also a .yaml file; change a field with --set FIELD=VALUE):")
    lines += [f"  {name:<18} {_layout_line(layout)}" for name, layout in LAYOUT_PRESETS.items()]
    lines.append("clusters (--cluster; also a .yaml file):")
    for name in CLUSTER_PRESETS:
        c = cluster_preset(name, 8)
        lines.append(
            f"  {name:<18} {c.gpu.name} ({c.gpu.hbm_bytes / 1e9:.0f} GB), NVLink domain {c.domain_gpus} GPUs, "
            f"NIC {c.nic_bandwidth_Bps / 1e9:.0f} GB/s per GPU"
        )
    return lines


def epilog() -> str:
    """The presets as a --help epilog."""
    return "presets:\n" + "\n".join(preset_lines())
