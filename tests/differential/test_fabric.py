"""An oversubscribed leaf/spine fabric under the DP sync (simulator.engine.placement.dp_spine_factor), folded and unfolded."""

from __future__ import annotations

import pytest

from simulator.engine.engine import Engine
from simulator.engine.placement import dp_spine_factor
from simulator.engine.ranks import RankMap
from tests.differential.test_unfolded import TINY
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset


def _step(nodes_per_leaf: int, oversubscription: float, pp: int = 1, placement: str = "folded"):
    """TINY on 16 GPUs, 4 per node, intra_size 4 (EP 4 in the node): one node per replica's stage."""
    layout = layout_preset("megascale-moe").with_(pp=pp, intra_size=4, ep=4)
    workload = StepWorkload(TINY, layout, 16, 4, 8, 512)
    cluster = cluster_preset(
        "h800", 16, domain_gpus=4, nodes_per_leaf=nodes_per_leaf, leaf_oversubscription=oversubscription
    )
    return workload, cluster, Engine(workload, cluster, placement=placement).run()


@pytest.mark.parametrize(
    "nodes_per_leaf, oversubscription, factor",
    [
        (1, 2.0, 2.0),  # 4 pods of one node: every hop of the 4-replica ring leaves its pod, f = 1
        (2, 4.0, 2.0),  # 2 pods: hops 1 -> 2 and 3 -> 0 leave, f = 1/2, o f = 2
        (2, 1.5, 1.0),  # o f = 0.75: the uplink is not what limits
        (4, 8.0, 1.0),  # one pod: no hop reaches the spine
        (1, 1.0, 1.0),  # non-blocking
    ],
)
def test_spine_factor_by_hand(nodes_per_leaf: int, oversubscription: float, factor: float) -> None:
    workload, cluster, _ = _step(nodes_per_leaf, 1.0)
    cluster = cluster.with_(leaf_oversubscription=oversubscription)
    assert RankMap.of(workload).dp == 4
    assert dp_spine_factor(cluster, RankMap.of(workload), 0) == factor


@pytest.mark.parametrize("nodes_per_leaf, oversubscription", [(1, 2.0), (2, 4.0), (1, 1.0)])
def test_one_stage_syncs_at_the_unfolded_rate(nodes_per_leaf: int, oversubscription: float) -> None:
    """PP 1, replicas spread evenly over the pods: each leaf uplink carries the pod's n_pod NICs / o for the c_pod
    hops that leave it, n_pod / (o c_pod) = 1 / (o f) of a NIC per hop, which the folded spine link gives the DP
    flow: the unfolded engine, routing every hop over the graph, ends the step at the same time."""
    _, _, folded = _step(nodes_per_leaf, oversubscription)
    _, _, unfolded = _step(nodes_per_leaf, oversubscription, placement="unfolded")
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)


def test_oversubscription_slows_the_dp_sync_and_only_it() -> None:
    _, _, healthy = _step(1, 1.0)
    _, _, slow = _step(1, 2.0)
    assert slow.step_time_s > healthy.step_time_s
    exposed = {name: sum(log.exposed_comm_s.get(name, 0.0) for log in slow.stages) for name in ("sp", "ep")}
    assert exposed == {name: sum(log.exposed_comm_s.get(name, 0.0) for log in healthy.stages) for name in exposed}
    assert sum(log.dp_exposed_s for log in slow.stages) > sum(log.dp_exposed_s for log in healthy.stages)


def test_pp_sends_across_pods_are_what_the_folded_view_leaves_out() -> None:
    """PP 2 over four one-node pods: stage 0's and stage 1's nodes sit in different pods, so in the unfolded
    graph every PP send also climbs to the spine and shares the oversubscribed uplinks with the DP buckets;
    the folded view charges the spine to DP traffic only (and as if every stage synced at once): here the two
    effects leave it 0.6% short of the unfolded step."""
    _, _, folded = _step(1, 4.0, pp=2)
    _, _, unfolded = _step(1, 4.0, pp=2, placement="unfolded")
    _, _, healthy = _step(1, 1.0, pp=2)
    gap = unfolded.step_time_s / folded.step_time_s - 1
    assert 1e-4 < gap < 0.01
    assert folded.step_time_s > healthy.step_time_s * 1.01  # the spine still costs the DP sync


def test_the_steady_shortcut_holds_over_an_oversubscribed_fabric() -> None:
    """The spine link is one more fixed capacity: the fault-free, oversubscribed step still repeats, and the
    shortcut equals its full run field by field (mixtral-8x7b, 64 H100, PP 4, one node per pod, o = 2)."""
    from dataclasses import asdict

    from simulator.costs.calibration import DEFAULT_CALIBRATION
    from simulator.fast.steady import run_step
    from simulator.report.simulate import build_report, prepare
    from tests.differential.test_steady import _assert_same_report
    from tests.engine_diff import assert_same_fields

    cluster = cluster_preset("h100", 64, nodes_per_leaf=1, leaf_oversubscription=2.0)
    layout = layout_preset("megascale-moe").with_(pp=4)
    workload, cluster, _ = prepare("mixtral-8x7b", layout, 64, cluster, 192, 4096, None, True)
    assert dp_spine_factor(cluster, RankMap.of(workload), 0) == 2.0
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    short = step.result
    assert step.runs and sum(step.runs) < workload.micro_batches
    assert_same_fields(short, full)
    _assert_same_report(
        asdict(build_report(workload, cluster, full, 0.0)), asdict(build_report(workload, cluster, short, 0.0))
    )
