"""The folded view's two replica classes under a degraded NIC (simulator/engine/replica_classes.py): which replicas
run at the degraded NIC's pace, and that the second class costs what one more set of stages costs, whatever the DP
degree."""

from __future__ import annotations

from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.engine.placement import FoldedPlacement
from simulator.engine.ranks import RankMap
from simulator.engine.replica_classes import slow_replicas
from simulator.engine.sim_env import environment
from tests.differential.drawn_steps import DENSE, TINY
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset

DENSE_LAYOUT = layout_preset("megascale-moe").with_(pp=4, intra_size=2, schedule="interleaved", virtual_stages=2)
JOINED = layout_preset("megascale-moe").with_(  # EP 4 over four replicas of one GPU per stage: a node's replicas
    pp=4, intra_size=1, cp=1, ep=4, etp=1, schedule="interleaved", virtual_stages=2, token_dispatcher="megascale"
)


def _dense(dp: int) -> tuple[StepWorkload, object]:
    gpus = 8 * dp
    return StepWorkload(DENSE, DENSE_LAYOUT, gpus, 4, 4 * dp, 512), cluster_preset("h800", gpus, domain_gpus=4)


def _joined() -> tuple[StepWorkload, object]:
    return StepWorkload(TINY, JOINED, 32, 4, 64, 512), cluster_preset("h800", 32, domain_gpus=4, nic_bandwidth_Bps=2e9)


def _slow(workload: StepWorkload, cluster, faults: Faults) -> frozenset[int] | None:
    return slow_replicas(faults, cluster, RankMap.of(workload), workload.model.num_experts > 0, wraps=True)


def test_a_degraded_nic_slows_its_replica_and_those_sharing_its_expert_groups() -> None:
    workload, cluster = _dense(2)
    assert _slow(workload, cluster, Faults(degraded=[("nic", 0, 1.25)])) == {0}
    assert _slow(workload, cluster, Faults(degraded=[("nic", 9, 2)])) == {1}
    workload, cluster = _joined()  # GPUs 0-3: stage 0 of replicas 0-3, one EP group; GPUs 16-19 replicas 4-7's
    assert _slow(workload, cluster, Faults(degraded=[("nic", 0, 2)])) == {0, 1, 2, 3}
    assert _slow(workload, cluster, Faults(degraded=[("nic", 18, 2)])) == {4, 5, 6, 7}


def test_one_class_where_other_faults_or_every_replica_is_slowed() -> None:
    workload, cluster = _dense(2)
    assert _slow(workload, cluster, Faults(stragglers=[(0, 1.2)])) is None
    assert _slow(workload, cluster, Faults(degraded=[("nic", 0, 2), ("nvlink", 1, 2)])) is None
    assert _slow(workload, cluster, Faults(degraded=[("nic", 0, 2), ("nic", 8, 2)])) is None  # both replicas
    assert _slow(workload, cluster, Faults()) is None


def test_the_second_class_costs_one_more_set_of_stages_at_any_dp_degree() -> None:
    faults = Faults(degraded=[("nic", 0, 1.25)])
    ops = {}
    for dp in (2, 8):
        workload, cluster = _dense(dp)
        placement = FoldedPlacement(environment(), workload, cluster, faults)
        assert len(placement.places) == 2 * workload.pp
        assert len(FoldedPlacement(environment(), workload, cluster, Faults()).places) == workload.pp
        ops[dp] = Engine(workload, cluster, placement="folded", faults=faults, memoize=False).run().simulated_ops
        healthy = Engine(workload, cluster, placement="folded", memoize=False).run().simulated_ops
        assert ops[dp] == 2 * healthy
    assert ops[2] == ops[8]
