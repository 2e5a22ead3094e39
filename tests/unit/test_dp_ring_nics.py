"""A DP ring that leaves the node spreads its crossing bytes over the NICs of its members in the node
(simulator/engine/dp_bytes.py ring_nic_share), counted by hand on the GPU numbering of simulator/engine/ranks.py."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.dp_bytes import dp_wire_bytes, ring_nic_share
from simulator.engine.engine import Engine
from simulator.engine.ranks import CP, DP, EDP, EP, ETP, TP, Place, RankMap
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec


def test_members_in_node_by_hand() -> None:
    # TP 1, EP 8 on 8-GPU nodes, 64 GPUs: a stage's 64 replicas hold the dense weights, 8 of them per node; an
    # expert's 8 replicas sit one per node (GPU = d: replicas d and d + 8 hold the same experts)
    ranks = RankMap(pp=1, dp=64, n=1, cp=1, ep=8, etp=1, gpus_per_node=8)
    assert ranks.members_in_node(0, DP) == (8, 64)
    assert ranks.members_in_node(0, EDP) == (1, 8)
    assert len(ranks.members(Place(0, 0, 0), DP)) == 64
    # TP 2: four replicas of a stage per node
    assert RankMap(pp=1, dp=32, n=2, cp=1, ep=2, etp=1, gpus_per_node=8).members_in_node(0, DP) == (4, 32)
    # TP 8 fills the node: one replica per node, every stage
    assert RankMap(pp=4, dp=2, n=8, cp=1, ep=8, etp=1, gpus_per_node=8).members_in_node(3, DP) == (1, 2)


@pytest.mark.parametrize(
    "ranks",
    [
        RankMap(pp=1, dp=64, n=1, cp=1, ep=8, etp=1, gpus_per_node=8),
        RankMap(pp=2, dp=8, n=2, cp=2, ep=4, etp=2, gpus_per_node=8),
        RankMap(pp=3, dp=12, n=4, cp=1, ep=16, etp=1, gpus_per_node=4, instances=3),
        RankMap(pp=1, dp=6, n=1, cp=2, ep=3, etp=1, gpus_per_node=72, instances=2),
    ],
)
def test_a_groups_size_is_its_members(ranks: RankMap) -> None:
    """``size`` (what members_in_node counts the ring by) is the length of the group ``members`` walks, for every
    kind and every place."""
    for gpu in range(ranks.pp * ranks.dp * ranks.group):
        place = ranks.place(gpu)
        for kind in (TP, CP, EP, ETP, DP, EDP):
            assert len(ranks.members(place, kind)) == ranks.size(kind), (place, kind)


def test_share_by_hand() -> None:
    h100 = 45e9 / 360e9  # NIC over NVLink, NCCL-class rates
    assert ring_nic_share(1, 8, h100) == 1.0  # one member per node: all of it on its NIC
    assert ring_nic_share(8, 8, h100) == 1.0  # the ring inside one node: NVLink's (the placement's links)
    assert ring_nic_share(4, 32, h100) == 0.25  # four NICs carry the node's crossing bytes
    assert ring_nic_share(8, 64, h100) == 1 / 8  # NVLink (8 x 45 < 360 x 8 / 7) keeps up with all eight
    # 64 members in an NVLink domain with 50 GB/s NICs and 680 GB/s NVLink: NVLink feeds 1 + 13.6 NICs' worth
    assert ring_nic_share(64, 256, 50 / 680) == pytest.approx(1 / (1 + 680 / 50))


def test_the_engine_sends_a_quarter_for_four_members_per_node() -> None:
    """A dense model at TP 2 on 32 GPUs of 8-GPU nodes: DP 16, four replicas per node; the engine's DP bytes per GPU
    are a quarter of the single-NIC ring's."""
    model = ModelSpec("toy-dense", 4, 1024, 8, 8, 0, 0, 0, 1024, dense_ffn_size=4096)
    layout = LayoutSpec("t", attention="tp", ffn="tp", intra_size=2, pp=1, recompute="none", grad_sync="fp32-rs")
    workload = StepWorkload(model, layout, 32, 8, 64, 512)
    cluster = cluster_preset("h100", 32)
    one_nic = dp_wire_bytes(workload, DEFAULT_CALIBRATION, 0)
    engine = Engine(workload, cluster, DEFAULT_CALIBRATION)
    assert engine.nic_shares(0) == (0.25, 0.25)
    assert engine.dp_wire_bytes(0) == pytest.approx(tuple(part / 4 for part in one_nic), rel=1e-12)
    assert engine.run().step_time_s > 0
