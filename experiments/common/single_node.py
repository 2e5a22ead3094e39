"""Shared set-up of the single-node figures (Figs. 14 and 16): one 8 x H800 node, batch 32, M1-M6."""

from __future__ import annotations

from experiments.common.shared_sims import simulate
from simulator.memory.per_gpu import peak_memory
from topologies.cluster import cluster_preset
from workloads.graph.step import DEFAULT_SEQ_LEN, StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

MODELS = (  # Table 2's M1-M6
    "paper-352b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "hunyuan-large",
    "phi-3.5-moe",
    "deepseekmoe",
)
SEQ_LEN = DEFAULT_SEQ_LEN  # not given for Figs. 14, 16 and 17; the paper's training length
BATCH = 32  # Fig. 14: global batch 32 on 8 x H800
GPUS = 8  # one node


def single_node_model(name: str):
    """The model with its layer count cut so that TP+TP and SP+EP both fit one node's memory."""
    model = model_preset(name)
    hbm = cluster_preset("h800", GPUS).gpu.hbm_bytes
    for layers in range(model.num_layers, 0, -1):
        candidate = model.with_(num_layers=layers)
        if all(peak_memory(workload(candidate, layout)).total_bytes <= hbm for layout in ("tp-tp", "sp-ep")):
            return candidate
    return model.with_(num_layers=1)


def workload(model, layout: str) -> StepWorkload:
    return StepWorkload(model, layout_preset(layout).with_(pp=1), GPUS, GPUS, BATCH, SEQ_LEN)


def simulate_one(model, layout: str):
    return simulate(model, layout_preset(layout).with_(pp=1), GPUS, global_batch=BATCH, seq_len=SEQ_LEN)
