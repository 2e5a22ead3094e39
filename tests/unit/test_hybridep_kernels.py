"""HybridEP's own kernels and routing-map all-gather around its dispatch (workloads/dispatchers/flex_hybridep.py), by hand."""

from __future__ import annotations

import pytest

from simulator.engine.engine import Engine
from tests.engine_diff import assert_steps_match
from tests.toys import megatron_field
from topologies.cluster import cluster_preset
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.graph.step import StepWorkload
from workloads.ops import ALL_GATHER, Group, Transport
from workloads.recipes.moe import ffn_recipe
from workloads.specs.layouts import LayoutSpec, layout_preset
from workloads.specs.models import ModelSpec, model_preset

# 16 experts, top-2, hidden 1,024; 1,024 tokens per GPU: 16,384 router scores, 2,048 routed copies.
MODEL = ModelSpec("m", 1, 1024, 8, 8, 512, 16, 2, 64)
SEQ = 1024
GPUS_PER_NODE = 8


def _layout(ep: int, backend: str = "flex-hybridep") -> LayoutSpec:
    return LayoutSpec(
        "t",
        attention="tp",
        intra_size=1,
        ffn="ep",
        ep=ep,
        intra_op_overlap=False,
        inter_op_overlap=False,
        recompute="none",
        host_sync_per_moe_layer=True,
        token_dispatcher=backend,
    )


def _recipe(layout: LayoutSpec):
    return ffn_recipe(MODEL, layout, SEQ, GPUS_PER_NODE, False)


def _ops(layout: LayoutSpec):
    steps = [(0, _recipe(layout))]
    return forward_ops(steps, layout), backward_ops(steps, layout)


def test_order_around_the_token_count_sync() -> None:
    """Probs cast, routing-map all-gather and preprocess before the sync; across nodes the staging copy after it."""
    names = [s.name for s in _recipe(_layout(16))]
    start = names.index("hybridep_probs_fp32")
    assert names[start : names.index("ep_a2a_dispatch") + 1] == [
        "hybridep_probs_fp32",
        "hybridep_routing_map_ag",
        "hybridep_preprocess",
        "tokens_per_expert_sync",
        "hybridep_stage",
        "permute",
        "ep_a2a_dispatch",
    ]


def test_two_nodes_by_hand() -> None:
    """EP 16 over 2 nodes. Probs cast 2 + 4 B x 16,384 = 98,304 B both ways. All-gather: 15 maps of 16,384 B =
    245,760 B sent per GPU, 2 of 16 ring hops cross nodes: 30,720 B over the NIC, 215,040 B over NVLink.
    Preprocess: reads the 16 maps (262,144 B), then the local experts' map
    of the 16 x 1,024 tokens that may arrive (1 B each of 16,384) into an int32 row-id map: 344,064 B, 3 kernels. Staging: tokens 1,024 x 1,024 x 2 B = 2,097,152 B and
    FP32 probs 65,536 B, each read and written: 4,325,376 B in 2 copies. The combine's backward copies the
    gradient tokens (4,194,304 B, 1 kernel) besides the unpermute's backward (2 x 3,072 x 1,024 x 2 B =
    12,582,912 B): 2 kernels, 16,777,216 B. Nothing else has a backward."""
    fwd, bwd = _ops(_layout(16))
    by = {op.name: op for op in fwd}
    cast, gather, pre, stage = (
        by[n] for n in ("hybridep_probs_fp32", "hybridep_routing_map_ag", "hybridep_preprocess", "hybridep_stage")
    )
    assert (cast.kernels, cast.mem_bytes) == (1, 98_304)
    assert (gather.collective, gather.group, gather.group_size) == (ALL_GATHER, Group.EP, 16)
    assert (gather.comm_bytes, gather.nic_bytes) == (215_040, 30_720)
    assert (pre.kernels, pre.mem_bytes, stage.kernels, stage.mem_bytes) == (3, 344_064, 2, 4_325_376)
    back = {op.name: (op.kernels, op.mem_bytes) for op in bwd if op.name.startswith(("hybridep", "unpermute"))}
    assert back == {"hybridep_probs_fp32.bwd": (1, 98_304), "unpermute.bwd": (2, 16_777_216)}


def test_one_node_gathers_over_nvlink_and_stages_nothing() -> None:
    """EP 8 in one node: HybridEP's own all-gather, 7 maps (114,688 B) over NVLink; no RDMA staging either way."""
    fwd, bwd = _ops(_layout(8))
    gather = next(op for op in fwd if op.name == "hybridep_routing_map_ag")
    assert (gather.comm_bytes, gather.nic_bytes, gather.group_size) == (114_688, 0.0, 8)
    assert not any(op.name == "hybridep_stage" for op in fwd)
    unpermute = next(op for op in bwd if op.name == "unpermute.bwd")
    assert (unpermute.kernels, unpermute.mem_bytes) == (1, 12_582_912)


def _work(step):
    return (step.name, step.kind, step.gemm, step.mem_bytes, step.kernels, step.comm_bytes, step.nic_bytes)


def test_hybridep_adds_its_steps_to_the_deepep_style_dispatch() -> None:
    """Differential: HybridEP's steps are MegaScale-MoE's dispatcher across nodes (DeepEP-style bytes, the same
    permutations and sync) plus its own steps and the unpermute's backward staging."""
    megascale, hybrid = _recipe(_layout(16, "megascale")), _recipe(_layout(16))
    added = {"hybridep_probs_fp32", "hybridep_routing_map_ag", "hybridep_preprocess", "hybridep_stage"}
    kept = [s for s in hybrid if s.name not in added]
    assert [_work(s) for s in kept] == [_work(s) for s in megascale]
    assert {s.transport for s in kept if s.group == Group.EP} == {Transport.HYBRIDEP}


@pytest.mark.parametrize(
    "dispatcher, name",
    [
        ("flex --moe-flex-dispatcher-backend hybridep", "flex-hybridep"),
        ("flex", "flex-deepep"),
        ("flex --moe-flex-dispatcher-backend ncclep", "flex-deepep"),
        ("alltoall", "alltoall"),
        ("allgather", "allgather"),
    ],
)
def test_megatron_flags(dispatcher: str, name: str) -> None:
    """The flex dispatcher's backend picks the dispatcher object (TransformerConfig default deepep)."""
    flags = f"--expert-model-parallel-size 16 --moe-token-dispatcher-type {dispatcher}"
    assert megatron_field(flags, "token_dispatcher") == name


def _cross_node(**changes) -> StepWorkload:
    """deepseekmoe (28 MoE layers of 64 experts, h 2,048), EP 16 over 2 nodes, 512 tokens per GPU."""
    layout = layout_preset("megascale-moe").with_(pp=1, ep=16, host_sync_per_moe_layer=True, **changes)
    return StepWorkload(model_preset("deepseekmoe"), layout, 16, 8, global_batch=2, seq_len=4096)


def test_engine_replay_matches_op_level_and_gathers_over_the_nic() -> None:
    """Memoized (NIC-replayed) against op level with the router's and HybridEP's steps, exact; and against the
    DeepEP backend the NIC carries just the routing-map all-gathers: 28 layers x 2 of 16 ring hops of 15 maps
    of 512 x 64 B = 28 x 61,440 B, forward only."""
    hybrid = _cross_node(token_dispatcher="flex-hybridep", router_fusion=True, router_random_logits=True)
    replayed = Engine(hybrid, cluster_preset("h800", 16), memoize=True).run()
    assert_steps_match(replayed, Engine(hybrid, cluster_preset("h800", 16), memoize=False).run())
    deepep = Engine(_cross_node(token_dispatcher="flex-deepep"), cluster_preset("h800", 16)).run()
    added = replayed.network_bytes[("nic_out", 0)] - deepep.network_bytes[("nic_out", 0)]
    assert added == pytest.approx(28 * 15 * 512 * 64 * 2 / 16, rel=1e-9)
