"""FSDP / ZeRO-2 and 3 per unit (workloads/graph/fsdp.py), folded against unfolded: the folded representative's
per-layer DP and expert-DP collectives on its NIC (or NVLink) against every GPU's ring flows over the cluster graph
(simulator/engine/unfolded.py), each GPU's NIC at its ring's share (simulator/engine/dp_bytes.py ring_nic_share). Equal
where every DP hop leaves the node, none does, or a ring's members share nodes with no TP group; beside TP groups
(intra size 2, within 0.5%) the unfolded ring's in-node hops load NVLink with the TP traffic, where the folded
representative moves its ring bytes on the NIC alone."""

from __future__ import annotations

import pytest

from simulator.engine.engine import Engine
from simulator.report.simulate import build_report
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

TINY = ModelSpec("tiny", 8, 512, 8, 2, 1024, 8, 2, 1024)

# (layout preset, GPUs, GPUs per node, DP, micro-batches, layout changes, bound: None = equal to 1e-9)
CASES = [
    ("megatron-lm", 16, 4, 2, 4, {"zero_stage": 3, "pp": 2, "intra_size": 4}, None),
    ("megatron-lm", 16, 4, 2, 4, {"zero_stage": 2, "pp": 2, "intra_size": 4}, None),
    ("megatron-lm", 16, 4, 4, 4, {"zero_stage": 3, "pp": 1, "intra_size": 4}, None),
    ("sp-ep", 16, 4, 2, 4, {"zero_stage": 3, "pp": 2, "intra_size": 4}, None),
    ("megatron-lm", 8, 8, 4, 4, {"zero_stage": 3, "pp": 1, "intra_size": 2}, None),  # the DP group in the node
    (
        "megatron-lm",
        16,
        8,
        2,
        4,
        {"zero_stage": 3, "pp": 2, "intra_size": 4, "schedule": "interleaved", "virtual_stages": 2},
        None,
    ),
    ("megatron-lm", 16, 8, 4, 4, {"zero_stage": 3, "pp": 2, "intra_size": 2}, 0.005),  # replicas share nodes
    ("megatron-lm", 16, 4, 16, 4, {"zero_stage": 3, "pp": 1, "intra_size": 1}, None),  # 4 of a ring a node
    # hierarchical DP (workloads/specs/hybrid_dp.py): units inside 2 instances of 2 replicas, the shards across them
    ("megatron-lm", 16, 4, 4, 4, {"zero_stage": 3, "pp": 1, "intra_size": 4, "dp_instances": 2}, None),
    ("sp-ep", 32, 4, 4, 4, {"zero_stage": 3, "pp": 2, "intra_size": 4, "dp_instances": 2}, None),  # expert DP too
    (
        "megatron-lm",
        16,
        4,
        4,
        4,
        {"zero_stage": 3, "pp": 1, "intra_size": 4, "dp_instances": 2, "outer_dp_sharding": "optim"},
        None,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}gpus-{c[2]}pernode-dp{c[3]}-{c[5]['zero_stage']}")
def test_fsdp_folded_against_unfolded(case) -> None:
    name, gpus, per_node, dp, micro_batches, changes, bound = case
    layout = layout_preset(name).with_(**changes)
    cluster = cluster_preset("h800", gpus, domain_gpus=per_node)
    workload = StepWorkload(TINY, layout, gpus, per_node, dp * micro_batches, 512)
    assert workload.dp == dp and workload.unit_comm is not None
    folded = Engine(workload, cluster).run()
    unfolded = Engine(workload, cluster, placement="unfolded").run()
    a, b = build_report(workload, cluster, folded, 0.0), build_report(workload, cluster, unfolded, 0.0)
    assert a.exposed_comm_s["fsdp"] > 0  # the per-unit collectives are there and not all hidden
    if bound is None:
        assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
        assert b.exposed_comm_s["fsdp"] == pytest.approx(a.exposed_comm_s["fsdp"], rel=1e-9)
    else:
        assert unfolded.step_time_s != pytest.approx(folded.step_time_s, rel=1e-9)
        assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=bound)


@pytest.mark.parametrize("instances", [1, 2, 4])
def test_partial_distributed_optimizer_folded_against_unfolded(instances: int) -> None:
    """ZeRO-1 over DP 4 in 1, 2 or 4 instances (one replica each: nothing inside, all across): the folded
    representative's rings inside and across the instances against every GPU's."""
    layout = layout_preset("megatron-lm").with_(pp=2, intra_size=2, dp_instances=instances)
    cluster = cluster_preset("h800", 16, domain_gpus=2)
    workload = StepWorkload(TINY, layout, 16, 2, 4 * 4, 512)
    folded = Engine(workload, cluster).run()
    unfolded = Engine(workload, cluster, placement="unfolded").run()
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
    a, b = build_report(workload, cluster, folded, 0.0), build_report(workload, cluster, unfolded, 0.0)
    assert b.exposed_comm_s["dp"] == pytest.approx(a.exposed_comm_s["dp"], rel=1e-9) and a.exposed_comm_s["dp"] > 0
