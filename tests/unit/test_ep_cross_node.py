"""Cross-node EP with node-limited routing: hand-computed bytes, validation and the engine's NIC use.

64 experts on 4 nodes x 8 GPUs (EP 32, 16 experts per node), top-8. Distinct nodes a token reaches:
M = 4 (unlimited): D = 4 (1 - C(48,8)/C(64,8)) = 4 (1 - 377,348,994/4,426,165,368) = 3.65898;
M = 2: D = 2 (1 - C(16,8)/C(32,8)) = 2 (1 - 12,870/10,518,300) = 1.99755; M = 1: D = 1.
Remote nodes = D x 3/4; NIC egress = tokens x h x 2 B x remote; NVLink = tokens x h x 2 B x 8 x 7/8.
"""

from __future__ import annotations

import pytest

from simulator.engine.engine import Engine
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.ep.plan import ep_dispatch_bytes, expected_nodes
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

TOKEN_BYTES = 4096 * 4096 * 2  # 4,096 tokens of h = 4,096 in BF16


def test_expected_nodes_hand_computed() -> None:
    assert expected_nodes(64, 8, 4, 0) == pytest.approx(4 * (1 - 377_348_994 / 4_426_165_368))
    assert expected_nodes(64, 8, 4, 4) == pytest.approx(3.658983, abs=1e-6)
    assert expected_nodes(64, 8, 4, 2) == pytest.approx(2 * (1 - 12_870 / 10_518_300))
    assert expected_nodes(64, 8, 4, 1) == 1.0


@pytest.mark.parametrize("max_nodes, nodes", [(4, 3.658983), (2, 1.997553), (1, 1.0)])
def test_ep_dispatch_bytes_hand_computed(max_nodes: int, nodes: float) -> None:
    got = ep_dispatch_bytes(4096, 4096, 8, 64, 32, 8, max_nodes)
    assert got.expected_nodes == pytest.approx(nodes, abs=1e-6)
    assert got.remote_nodes == pytest.approx(nodes * 3 / 4, abs=1e-6)
    assert got.nic_bytes == pytest.approx(TOKEN_BYTES * nodes * 3 / 4, rel=1e-6)
    assert got.nvlink_bytes == TOKEN_BYTES * 7


def test_in_node_ep_is_eq3() -> None:
    got = ep_dispatch_bytes(4096, 4096, 8, 64, 8, 8)
    assert got.nic_bytes == 0 and got.nvlink_bytes == TOKEN_BYTES * 8 * 7 / 8


def _workload(**layout_changes) -> StepWorkload:
    layout = layout_preset("megascale-moe").with_(pp=1, **layout_changes)
    return StepWorkload(model_preset("deepseekmoe"), layout, 16, 8, global_batch=2, seq_len=4096)


def test_in_node_rule_kept_and_cross_node_ep_allowed() -> None:
    with pytest.raises(ConfigError, match="intra_size"):
        _workload(intra_size=16)  # in-node EP larger than the 8-GPU scale-up domain
    with pytest.raises(ConfigError, match="layout.ep"):
        _workload(ep=12)
    assert _workload(ep=16).expert_dp == 1 and _workload(ep=16).dp == 2


def test_engine_runs_cross_node_ep_at_op_level_on_the_nic() -> None:
    """deepseekmoe, EP 16 over 2 nodes, top-6: per GPU 512 tokens x 2,048 x 2 B; D = 2 (1 - C(32,6)/C(64,6)).

    Each of the 28 MoE layers moves 5 EP collectives over the NIC (dispatch, combine, their backward and
    the SAR re-dispatch), each with 2,097,152 B x D / 2, on the wire at DeepEP's internode rate: the NIC's bytes
    are those over its efficiency (the harmonic mean of 51 and 50 GB/s x 7 / 8 of 47).
    """
    workload = _workload(ep=16)
    assert workload.tasks_use_nic
    engine = Engine(workload, cluster_preset("h800", 16), memoize=True)
    assert not engine.memoize  # tasks share the NIC with PP/DP traffic: memoization would not be exact
    result = engine.run()
    d = 2 * (1 - 906_192 / 74_974_368)  # C(32,6), C(64,6)
    ep_nic = 28 * 5 * 512 * 2048 * 2 * d / 2 / (2 / (47 / 51 + 47 / 50) * 7 / 8)
    grad, params = engine.dp_wire_bytes(0)
    assert result.network_bytes[("nic_out", 0)] == pytest.approx(ep_nic + grad + params, rel=1e-9)
    assert result.network_bytes[("nic_in", 0)] == pytest.approx(ep_nic + grad + params, rel=1e-9)


def _dispatch(workload: StepWorkload):
    ops = workload.task_ops(workload.task_key(0, workload.stage_order(0)[0]))
    return next(op for op in ops if op.name.endswith("ep_a2a_dispatch"))


def test_a2a_latency_is_one_step_over_the_slowest_link() -> None:
    """EP 16 of deepseekmoe (512 tokens x 2,048 x 2 B per GPU, top-6), once over 2 nodes of 8 GPUs and once
    inside one 16-GPU node. An all-to-all sends to every peer at once: NCCL's fixed 8.4 us and one step, over
    the network (14 us) across nodes, over NVLink (3.4 us) inside one; the NVLink bytes: 6 x 7/8 copies at
    DeepEP's intranode efficiency (the harmonic mean of its 153 and 158 of 160 GB/s, dispatch and combine, logical
    bandwidths of which 7 / 8 cross NVLink) vs
    6 x 15/16 at NCCL's in-node all-to-all efficiency (1.0: the ring's bus bandwidth, nccl-tests#212), at
    160 GB/s. The NIC part of the cross-node one runs
    beside it."""
    from simulator.engine.timing import comm_alone_s

    copy_bytes = 512 * 2048 * 2
    cross = _workload(ep=16)
    in_node = StepWorkload(
        model_preset("deepseekmoe"),
        layout_preset("megascale-moe").with_(pp=1, ep=16),
        16,
        16,
        global_batch=2,
        seq_len=4096,
    )
    gpu = cluster_preset("h800", 16).gpu
    deepep = 2 / (160 / 153 + 160 / 158) * 7 / 8
    cases = ((cross, 6 * 7 / 8, deepep, 14e-6), (in_node, 6 * 15 / 16, 1.0, 3.4e-6))
    for workload, copies, efficiency, step_s in cases:
        op = _dispatch(workload)
        assert op.group_size == 16
        expected = 8.4e-6 + step_s + copy_bytes * copies / efficiency / 160e9
        assert comm_alone_s(op, gpu) == pytest.approx(expected, rel=1e-12)
