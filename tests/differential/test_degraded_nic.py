"""Folded against unfolded with one degraded NIC (issue 42's class 3), over random small configurations: every
schedule, TP/SP, CP, in-node and cross-node EP, ETP, FP8, recompute, DP overlap, stages and replicas sharing a
node or not, NICs of 2 to 50 GB/s, and the fault on any GPU, slowed 1.25 to 16 times.

The folded representative of the faulty stage becomes its slowest member (simulator/engine/faults.py). A degraded
port is one GPU's: its DP ring hops are slow at its own end only, and FoldedPlacement.dp_transfer moves them as two
flows, each with a healthy ring neighbour's NIC at the other end; before, one flow over two slow ends gave up to
2.9% (tests/differential/test_unfolded.py, nic-degraded).

Where stages or replicas share a node, one folded NIC per stage stands for GPUs' NICs that carry different
traffic (a PP send leaves by its own rail, a DP ring's wrap by a neighbour's, over PXN): a degraded NIC that carries
only some of it, or none, slows only those folded routes (faults.carried_nics; before, a NIC degraded 16 times that
carried nothing made the folded step 15 times the unfolded one, and one that carried only PP sends twice).

Where the NIC slows only some replicas (its own, those whose hops leave by it over PXN, those sharing their
expert groups), the folded view runs them as one class and the others as a healthy class on links of their own,
joined at every DP bucket (simulator/engine/replica_classes.py). Before, every replica was slowed: the ring
neighbour's healthy NIC, which also carries its own replica's PP sends, and each chunk's gradient reduce-scatter
beside the PP sends under the interleaved schedule gave 2.09% (a dense model, n 2 PP 4 DP 2 on 4-GPU nodes, a 2 GB/s
NIC degraded 1.25 times), and expert groups joining a node's replicas 4.6%; both now agree to 1e-5. A degraded NIC
that carries some kinds of traffic is one port they share (a link per kind gave +27% with EP and PP sends on it).

What is left is ``DEGRADED_NIC_BOUND`` (tests/differential/bounds.py, 1%; issue 42's 1% met): one GPU's slow NIC
stands for its stage's NICs, which send at different times, and in shared nodes one folded NIC for several.
Measured: 0.52% over two 250-case draws (one replica, so one class), 0.33% where nodes are shared. The default run
draws 15 (40, then 25, until the default run neared its 150 s on 2 cores; the long draw, ``-m benchmark``, 250).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.engine.ranks import RankMap
from tests.differential.bounds import DEGRADED_NIC_BOUND
from tests.differential.drawn_steps import DENSE, TINY, draw_step
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset

MAX_GPUS = 32  # the unfolded engine simulates every GPU


@st.composite
def degraded_nic_cases(draw: st.DrawFn) -> tuple:
    """A valid small step on more than one node, and one GPU's NIC degraded."""
    gpn = draw(st.sampled_from([4, 8]))
    n = draw(st.sampled_from([s for s in (1, 2, 4, 8) if s <= gpn]))
    cp = draw(st.sampled_from([1, 2]))
    pp, dp = draw(st.sampled_from([2, 4])), draw(st.sampled_from([1, 2, 4]))
    gpus = n * cp * pp * dp
    assume(gpus % gpn == 0 and gpn < gpus <= MAX_GPUS)
    return draw_step(draw, gpn, n, cp, pp, dp, after=_one_degraded_nic)


def _one_degraded_nic(draw: st.DrawFn, gpus: int) -> Faults:
    """Any GPU's NIC, slowed 1.25 to 16 times."""
    return Faults(degraded=[("nic", draw(st.integers(0, gpus - 1)), draw(st.sampled_from([1.25, 1.5, 2, 4, 16])))])


def gap(workload: StepWorkload, cluster, faults: Faults) -> float:
    """unfolded / folded - 1 of the step time."""
    folded = Engine(workload, cluster, faults=faults).run().step_time_s
    unfolded = Engine(workload, cluster, placement="unfolded", faults=faults).run().step_time_s
    return unfolded / folded - 1


DRAW = {"deadline": None, "derandomize": True, "suppress_health_check": list(HealthCheck), "database": None}
LARGEST: dict[bool, float] = {}  # the long draw's largest gap, apart where nodes are shared


@settings(max_examples=15, **DRAW)
@given(degraded_nic_cases())
def test_degraded_nic_folded_against_unfolded(case) -> None:
    workload, cluster, faults = case
    assert abs(gap(workload, cluster, faults)) < DEGRADED_NIC_BOUND


@pytest.mark.benchmark
@settings(max_examples=250, **DRAW)
@given(degraded_nic_cases())
def test_degraded_nic_long_draw(case) -> None:
    """The long draw; with -s each new largest gap of a class is printed."""
    workload, cluster, faults = case
    measured = gap(workload, cluster, faults)
    shared = RankMap.of(workload).group < cluster.gpus_per_node
    if abs(measured) > LARGEST.get(shared, 0.0):
        LARGEST[shared] = abs(measured)
        layout, ranks = workload.layout, RankMap.of(workload)
        print(
            f"largest gap{' (shared nodes)' if shared else ''}: {measured:+.3e} ({workload.model.name} {layout.name} "
            f"{layout.schedule} n {ranks.n} cp {ranks.cp} ep {ranks.ep} etp {ranks.etp} pp {ranks.pp} dp {ranks.dp} "
            f"GPUs/node {ranks.gpus_per_node}, {cluster.num_gpus} GPUs, NIC {cluster.nic_bandwidth_Bps:g}, "
            f"{', '.join(faults.describe())})"
        )
    assert abs(measured) < DEGRADED_NIC_BOUND


def test_the_largest_known_gap_holds_its_bound() -> None:
    """The worst case found (over two 250-case draws) stays inside the stated bound: one replica of 8 GPUs over two
    nodes (one class), interleaved VP 2 in FP8, a 2 GB/s NIC degraded 4 times."""
    layout = layout_preset("megascale-moe").with_(
        intra_size=4, pp=4, schedule="interleaved", virtual_stages=2, ep=2, gemm_dtype="fp8", cp=2, etp=2
    )
    workload = StepWorkload(TINY, layout, 32, 4, 8, 512)
    cluster = cluster_preset("h800", 32, domain_gpus=4, nic_bandwidth_Bps=2e9)
    measured = gap(workload, cluster, Faults(degraded=[("nic", 0, 4)]))
    assert 3e-3 < abs(measured) < DEGRADED_NIC_BOUND  # 0.52%


def test_the_former_worst_cases_agree() -> None:
    """The cases that set the old bounds, now folded into a slow and a healthy class, and a NIC carrying EP and PP
    sends (one port they share): 2.09%, 4.6% and 27% before."""
    dense = layout_preset("megascale-moe").with_(pp=4, intra_size=2, schedule="interleaved", virtual_stages=2)
    workload = StepWorkload(DENSE, dense, 16, 4, 8, 512)
    cluster = cluster_preset("h800", 16, domain_gpus=4, nic_bandwidth_Bps=2e9)
    assert abs(gap(workload, cluster, Faults(degraded=[("nic", 0, 1.25)]))) < 1e-9  # two replicas: exact
    joined = layout_preset("megascale-moe").with_(
        pp=4, intra_size=1, cp=1, ep=4, etp=1, schedule="interleaved", virtual_stages=2, token_dispatcher="megascale"
    )
    workload = StepWorkload(TINY, joined, 32, 4, 64, 512)
    cluster = cluster_preset("h800", 32, domain_gpus=4, nic_bandwidth_Bps=2e9)
    assert abs(gap(workload, cluster, Faults(degraded=[("nic", 0, 2)]))) < 1e-5  # 2e-6
    shared = layout_preset("megascale-moe").with_(
        pp=4, intra_size=2, cp=1, ep=4, etp=2, schedule="zb1p", token_dispatcher="megascale", dp_overlap=False
    )
    workload = StepWorkload(TINY, shared.with_(gemm_dtype="bf16", recompute="none"), 32, 4, 16, 512)
    assert abs(gap(workload, cluster, Faults(degraded=[("nic", 19, 16)]))) < 1e-9
