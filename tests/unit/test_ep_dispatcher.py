"""Who moves cross-node EP tokens (layout.token_dispatcher): DeepEP, one NIC copy per destination node, or NCCL's
all-to-all (Megatron's alltoall dispatcher), one NIC copy per routed expert on another node. Hand-computed
bytes on the toy shapes of test_ep_cross_node (4,096 tokens of h = 4,096, top-8, EP 32 on 4 nodes of 8)."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import Calibration
from simulator.costs.kernels import collective_wire_bytes, comm_kernel_sms, nic_wire_bytes
from topologies.errors import ConfigError
from topologies.hardware import gpu_preset
from workloads.ep.plan import ep_dispatch_bytes, ep_plan, expected_nodes, nccl_all_to_all_bytes
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import COLLECTIVE, Transport
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

TOKEN_BYTES = 4096 * 4096 * 2
CAL = Calibration(all_to_all_efficiency=0.5, comm_sms_nccl=16, comm_sms_deepep=20)
H800 = gpu_preset("h800")


def test_nccl_sends_every_remote_copy_over_the_nic() -> None:
    """k (N - 1) / N = 8 x 3/4 = 6 copies per token over the NIC; NVLink k (G - 1) / G = 7 (PXN forwarding
    included), as DeepEP's; DeepEP's NIC: D (N - 1) / N = 3.658983 x 3/4 = 2.744237 copies."""
    nccl = nccl_all_to_all_bytes(4096, 4096, 8, 32, 8)
    assert (nccl.nic_bytes, nccl.nvlink_bytes) == (TOKEN_BYTES * 6, TOKEN_BYTES * 7)
    assert (nccl.expected_nodes, nccl.remote_nodes) == (8.0, 6.0)
    deepep = ep_dispatch_bytes(4096, 4096, 8, 64, 32, 8)
    assert deepep.nic_bytes == pytest.approx(TOKEN_BYTES * 2.744237, rel=1e-6)
    assert deepep.nvlink_bytes == nccl.nvlink_bytes


def _plan(degree: int, dispatcher: str, routing: str = "uniform", experts: int = 64):
    return ep_plan(
        num_experts=experts,
        top_k=8,
        hidden_size=4096,
        tokens_local=4096,
        group_tokens=4096 * 8,
        degree=degree,
        ranks_per_node=8,
        etp=1,
        all_gather=False,
        max_nodes=0,
        capacity_factor=1.0,
        dispatcher=dispatcher,
        routing=routing,
    )


def test_the_plan_takes_the_dispatchers_bytes_across_nodes_only() -> None:
    """EP 32: the NCCL plan moves 6 token copies per token over the NIC. EP 8 (one node): both are Eq. 3,
    8 x 7/8 = 7 copies over NVLink, none over the NIC."""
    cross = _plan(32, "alltoall")
    assert (cross.dispatcher, cross.nic_bytes, cross.nvlink_bytes, cross.nodes) == (
        "alltoall",
        TOKEN_BYTES * 6,
        TOKEN_BYTES * 7,
        4,
    )
    assert _plan(32, "flex-deepep").nic_bytes == pytest.approx(TOKEN_BYTES * 2.744237, rel=1e-6)
    for dispatcher in ("alltoall", "megascale"):
        in_node = _plan(8, dispatcher)
        assert (in_node.nic_bytes, in_node.nvlink_bytes) == (0.0, TOKEN_BYTES * 7)


def test_deepep_sends_one_copy_per_destination_rank_in_a_node() -> None:
    """EP 8 in one node, 64 experts (8 per rank), top-8: a token reaches D = 8 (1 - C(56,8) / C(64,8)) =
    8 (1 - 1,420,494,075 / 4,426,165,368) = 5.4326 distinct ranks, 7/8 of them others; NCCL's all-to-all sends
    all 8 copies (7 over NVLink)."""
    from math import comb

    d = 8 * (1 - comb(56, 8) / comb(64, 8))
    for name in ("flex-deepep", "flex-hybridep"):
        assert _plan(8, name).nvlink_bytes == pytest.approx(TOKEN_BYTES * d * 7 / 8, rel=1e-12)
    assert d == pytest.approx(5.4326, abs=1e-4)


def _dispatch(dispatcher: str, name: str = "ep_a2a_dispatch"):
    """deepseekmoe (h 2,048, top-6, 64 experts), SP 8, EP 16 over 2 nodes: 512 tokens of 2,048 x 2 B per GPU;
    no intra-op overlap, so the dispatch is a collective of its own."""
    layout = layout_preset("megascale-moe").with_(pp=1, ep=16, token_dispatcher=dispatcher, intra_op_overlap=False)
    workload = StepWorkload(model_preset("deepseekmoe"), layout, 16, 8, global_batch=2, seq_len=4096)
    ops = workload.task_ops(workload.task_key(0, workload.stage_order(0)[0]))
    return next(op for op in ops if op.name.endswith(name))


def test_layout_dispatch_op_carries_its_dispatcher_and_bytes() -> None:
    """512 x 2,048 x 2 B = 2,097,152 B of tokens. NCCL: 6 x 1/2 = 3 copies over the NIC = 6,291,456 B, and the
    probs (4 B per 4,096 B row) in an all-to-all of their own, a second NCCL call;
    DeepEP: D / 2 with D = 2 (1 - C(32,6) / C(64,6)) = 2 (1 - 906,192 / 74,974,368); NVLink 6 x 7/8 both."""
    tokens = 512 * 2048 * 2
    nccl, deepep = _dispatch("alltoall"), _dispatch("megascale")
    assert (nccl.transport, nccl.nic_bytes, nccl.comm_bytes) == (Transport.NCCL, tokens * 3, tokens * 6 * 7 / 8)
    probs = _dispatch("alltoall", "ep_a2a_probs")
    per_row = 4 / (2048 * 2)  # one FP32 prob per row of 2,048 BF16
    assert (probs.kind, probs.transport, probs.layer) == (COLLECTIVE, Transport.NCCL, nccl.layer)
    assert (probs.nic_bytes, probs.comm_bytes) == (
        pytest.approx(tokens * 3 * per_row, rel=1e-12),
        pytest.approx(tokens * 6 * 7 / 8 * per_row, rel=1e-12),
    )
    d = 2 * (1 - 906_192 / 74_974_368)
    assert deepep.transport == Transport.DEEPEP
    assert deepep.nic_bytes == pytest.approx(tokens * d / 2, rel=1e-12) and deepep.comm_bytes == tokens * 6 * 7 / 8


def test_nccl_dispatch_runs_at_nccls_efficiencies_and_sms() -> None:
    """NCCL's all-to-all: NVLink at Calibration.all_to_all_efficiency (0.5 here), the NIC at one NIC's ring
    rate (efficiency 1), 16 SMs (NCCL channels); DeepEP: its own published rates and 20 SMs."""
    nccl, deepep = _dispatch("alltoall"), _dispatch("flex-deepep")
    assert collective_wire_bytes(nccl, CAL, H800) == nccl.comm_bytes / 0.5
    assert nic_wire_bytes(nccl) == nccl.nic_bytes
    assert (comm_kernel_sms(nccl, CAL), comm_kernel_sms(deepep, CAL)) == (16, 20)
    assert collective_wire_bytes(deepep, CAL, H800) != deepep.comm_bytes / 0.5


def test_megatron_dispatchers_and_presets() -> None:
    mixtral = model_preset("mixtral-8x7b")
    base = "--bf16 --expert-model-parallel-size 8 --moe-token-dispatcher-type "
    for flags, expected in (
        ("alltoall", "alltoall"),
        ("allgather", "allgather"),
        ("flex", "flex-deepep"),
        ("flex --moe-enable-deepep", "flex-deepep"),
        ("flex --moe-flex-dispatcher-backend hybridep", "flex-hybridep"),
    ):
        assert parse_megatron_args(base + flags).resolve(mixtral).layout.token_dispatcher == expected
    assert parse_megatron_args("--bf16").resolve(mixtral).layout.token_dispatcher == "allgather"  # the default
    assert layout_preset("deepseek-v3").token_dispatcher == "megascale"
    assert layout_preset("megascale-moe").token_dispatcher == "megascale"
    with pytest.raises(ConfigError, match="^layout.token_dispatcher: must be one of megascale, alltoall"):
        layout_preset("megascale-moe").with_(token_dispatcher="nccl")


def test_consecutive_routing_sends_one_copy_per_rank_or_node_its_block_spans() -> None:
    """NeMo AutoModel's benchmark gate (layout routing "consecutive"): a token's 8 adjacent experts. Inside a node (EP
    8, 128 experts) DeepEP sends it to the one rank holding them, 7/8 of the time another; across nodes (EP 64, 256
    experts) once to the one node, 7/8 of the time another; NCCL's all-to-all sends each of the k copies anyway."""
    uniform, consecutive = (
        _plan(8, "flex-deepep", routing, 128).nvlink_bytes for routing in ("uniform", "consecutive")
    )
    assert consecutive == TOKEN_BYTES * 7 / 8
    assert uniform == pytest.approx(TOKEN_BYTES * expected_nodes(128, 8, 8, 0) * 7 / 8, rel=1e-12)
    assert _plan(64, "flex-deepep", "consecutive", 256).nic_bytes == TOKEN_BYTES * 7 / 8
    assert _plan(64, "alltoall", "consecutive", 256).nic_bytes == _plan(64, "alltoall", "uniform", 256).nic_bytes
