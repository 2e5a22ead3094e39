"""A latent MoE (Nemotron 3 Super and Ultra: Megatron-LM --moe-latent-size): the MoE layer projects its tokens down to
the latent width before the dispatch and up after the combine, so the routed experts and the all-to-alls run at it;
its parameters, its recipe, its saved tensors and Megatron's FLOP count."""

from __future__ import annotations

import pytest

from simulator.memory.activations import layer_saved
from simulator.report.megatron_flops import megatron_args, megatron_flops
from simulator.report.simulate import simulate
from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.recipes.layers import layer_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# hidden 1,024; 8 experts of 512, top-2, one shared expert of 512; the latent MoE at 256
PLAIN = ModelSpec("m", 2, 1024, 8, 8, 512, 8, 2, 1024, num_shared_experts=1)
LATENT = PLAIN.with_(moe_latent_size=256)
EP = LayoutSpec("t", intra_size=2, attention="tp", ffn="ep", ep=2, pp=1, inter_op_overlap=False, intra_op_overlap=False)


def test_the_experts_run_at_the_latent_width_and_the_projections_are_replicated() -> None:
    plain, latent = PLAIN.layer_parts(False), LATENT.layer_parts(False)
    assert latent.experts == plain.experts // 4 == 8 * 3 * 256 * 512
    assert latent.shared == plain.shared  # the shared expert stays at the hidden width
    assert latent.latent == 2 * 1024 * 256 and latent.replicated == latent.router + latent.norms + latent.latent
    assert latent.active() - plain.active() == latent.latent + latent.active_experts - plain.active_experts


def _steps(model: ModelSpec) -> dict:
    return {s.name: s for s in layer_recipe(model, EP, 1024, 8)}


def test_the_dispatch_and_the_experts_move_latent_tokens() -> None:
    plain, latent = _steps(PLAIN), _steps(LATENT)
    assert (latent["expert_fc13"].gemm.k, latent["expert_fc2"].gemm.n) == (256, 256)
    assert (latent["moe_latent_down"].gemm.n, latent["moe_latent_down"].gemm.k) == (256, 1024)
    assert (latent["moe_latent_up"].gemm.n, latent["moe_latent_up"].gemm.k) == (1024, 256)
    assert "moe_latent_down" not in plain
    dispatch = [name for name, step in plain.items() if step.comm_bytes and "a2a" in name]
    assert dispatch and all(latent[name].comm_bytes == plain[name].comm_bytes / 4 for name in dispatch)
    names = list(latent)
    assert names.index("router") < names.index("moe_latent_down") < names.index(dispatch[0])
    assert names.index("moe_latent_up") > names.index(dispatch[-1])


def test_the_routed_copies_are_saved_at_the_latent_width() -> None:
    def saved(model: ModelSpec) -> dict:
        return {s.name: s.bytes_per_token for s in layer_saved(model, EP, False)}

    plain, latent = saved(PLAIN), saved(LATENT)
    assert latent["expert_fc1_input"] == plain["expert_fc1_input"] / 4
    assert latent["latent_up_input"] == 2 * 256 and "latent_up_input" not in plain


def test_megatron_counts_the_latent_experts_and_projections() -> None:
    """megatron/training/training.py transformer_flops: per MoE layer F k 3 L / h + 2 L in units of the FFN term."""
    layout = EP.with_(intra_size=1, ep=1)
    plain = megatron_flops(megatron_args(PLAIN, layout), 1, 1024) / 1024
    latent = megatron_flops(megatron_args(LATENT, layout), 1, 1024) / 1024
    routed = 6 * 1024 * 3 * 512 * 2  # forward and backward, 3 GEMMs of the top-2 experts, per MoE layer
    assert plain - latent == pytest.approx(2 * (routed - routed / 4 - 6 * 2 * 1024 * 256))


def test_flags_and_checks() -> None:
    assert parse_megatron_args("--moe-latent-size 256").model_overrides == {"moe_latent_size": 256}
    assert simulate(LATENT, EP, 8, cluster="h100", global_batch=8, seq_len=1024).tokens_per_s_per_gpu > 0
    with pytest.raises(ConfigError, match="expert parallelism"):
        simulate(LATENT, EP.with_(ffn="tp", ep=0), 8, cluster="h100", global_batch=8, seq_len=1024)


def test_nemotron_3_super_and_ultra_count_their_published_parameters() -> None:
    """The model files written from Megatron-LM's flags (examples/models/README.md): 120B-A12B with 40 Mamba-2, 40 MoE
    and 8 attention layers; 550B-A55B with 48, 48 and 12."""
    from pathlib import Path

    from workloads.inputs.yaml_files import load_model

    models = Path(__file__).resolve().parents[2] / "examples" / "models"
    for name, blocks, total, active in (
        ("nemotron-3-super-120b-a12b", (40, 40, 8), 120.7e9, 12.7e9),
        ("nemotron-3-ultra-550b-a55b", (48, 48, 12), 549.3e9, 55.9e9),
    ):
        model = load_model(models / f"{name}.yaml")
        assert tuple(model.hybrid_pattern.count(symbol) for symbol in "ME*") == blocks
        assert model.total_params == pytest.approx(total, rel=1e-3)
        assert model.active_params == pytest.approx(active, rel=1e-2)
