"""``moesim run --automodel FILE.yaml``: a NeMo AutoModel recipe run as its Megatron-Core equivalent
(workloads/inputs/automodel.py), filling --megatron-args, --model, --gpus and --routing where they were not given."""

from __future__ import annotations

import argparse

from simulator.report.clusters import load_cluster
from topologies.errors import ConfigError
from workloads.inputs.automodel import read_automodel
from workloads.inputs.yaml_files import load_model


def automodel_args(args: argparse.Namespace) -> tuple[argparse.Namespace, tuple[str, ...]]:
    """``args`` with the recipe's Megatron flags, model, GPU count (ci.nodes, else benchmark.num_nodes, hosts of the
    cluster: 8 GPUs on a DGX, 4 on a GB200 tray; else one host) and routing, each only where the command line left it
    out; and the notes on what runs otherwise."""
    if args.megatron_args:
        raise ConfigError("automodel", "give --automodel or --megatron-args, not both")
    recipe = read_automodel(args.automodel)
    model = load_model(args.model or recipe.model)  # a hub id: the local cache's config, else the shipped one
    gpus = args.gpus or (recipe.nodes or 1) * load_cluster(args.cluster, 8).host_gpus  # a GB200 node: 4 GPUs
    flags, notes = recipe.megatron_args(
        model.num_layers, model.gated_ffn, model.tied_embeddings, gpus, model.num_experts > 0, args.seq_len
    )
    sets = [*recipe.precision_sets, *(args.set or [])]  # the command line's own settings last: they win
    sets += [f"schedule={recipe.schedule}"] if recipe.schedule == "dualpipev" else []
    if recipe.precision_sets:
        notes = (
            *notes,
            "AutoModel's BF16 weights stepped in place, no FP32 master copy: --set " + " ".join(recipe.precision_sets),
        )
    routing = args.routing or ("consecutive" if recipe.fake_balanced_gate else None)
    changes = {"megatron_args": flags, "model": model, "gpus": gpus, "routing": routing, "set": sets}
    return argparse.Namespace(**{**vars(args), **changes}), notes
