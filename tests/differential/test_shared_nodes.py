"""Folded against unfolded where stages or replicas share a node (a replica's stage, intra_size x cp GPUs, smaller
than the node; issue 42's class 2), over random small configurations: every schedule, in-node and cross-node EP,
ETP, CP, FP8, recompute, DP overlap, NICs of 2 to 50 GB/s.

Two mechanisms made them differ, both fixed in the folded placement (simulator/engine/placement.py):
- a PP send between nodes whose ranks sit on different rails takes NCCL's PXN path, NVLink to the GPU of the
  sending node on the receiver's rail and out of that GPU's NIC, which belongs to another stage: the folded
  view charged the sender's own NIC (1.24% over 300 draws, megatron-lm TP 4 PP 4 ZB1P on 8-GPU nodes);
- PP sends and DP hops between GPUs of one node share the GPU's NVLink port, egress and ingress, with each
  other and with PXN detours through it: the folded view gave each its own link, counted at the sender.

What is left is a bound, ``SHARED_NODE_BOUND`` (tests/differential/bounds.py, with every class's). The folded
representative times its stage's collectives on an NVLink of their own (so tasks can be timed once and replayed,
simulator/engine/timer.py), where a GPU's port also carries the pipeline's NVLink traffic; and replicas that share
a node are not alike: the GPU on the rail a cross-node DP hop needs carries that hop's PXN bytes on its NIC, its
neighbours none. Both go away with a fast NVLink (x20: the gaps drop below 1e-4). Measured: the long draw (250
configurations, ``-m benchmark``, 167 s on 2 shared cores) passes with the largest gap +2.29e-3 (a dense model, n 1,
PP 2, DP 4 on 4-GPU nodes, 1F1B, no DP overlap); 300 earlier draws of the same kind gave at most 1.7e-3 after the
fixes against 1.24% and -0.46% before them, and a partial draw with PP and DP to 8 and 16-GPU nodes 2.5e-3. The
default run draws 25 of at most 32 GPUs (60 of 64 until the default run neared its 150 s on 2 cores; its 25 draws
of 32 come out equal to 1e-15), the long draw up to 64.

Cross-node EP over a slow NIC was bounded at 3% here (max-min fairness is per flow, and an unfolded GPU sends one EP
flow per remote node where the representative sent one): the representative now sends as many
(FoldedPlacement._nic_flows), and the long draw's largest gap where an expert group spans nodes is 3.6e-7, inside
the shared-node bound.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from simulator.engine.engine import Engine
from simulator.engine.ranks import RankMap
from tests.differential.bounds import SHARED_NODE_BOUND
from tests.differential.drawn_steps import TINY, draw_step
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset

# The unfolded engine simulates every GPU: the default draw stays at 32 (its 25 draws 3.7 s; at 64 GPUs four DualPipe
# draws of 64 took 14.5 of 18 s), the long draw goes to 64.
MAX_GPUS, LONG_DRAW_MAX_GPUS = 32, 64


@st.composite
def shared_node_cases(draw: st.DrawFn, max_gpus: int = MAX_GPUS) -> tuple:
    """A valid small step whose replica stages are smaller than the node, PP > 1 and DP > 1, and its cluster, on at
    most ``max_gpus``."""
    gpn = draw(st.sampled_from([4, 8, 16]))
    n = draw(st.sampled_from([s for s in (1, 2, 4) if s < gpn]))
    cp = draw(st.sampled_from([c for c in (1, 2) if n * c < gpn]))
    pp, dp = draw(st.sampled_from([2, 4])), draw(st.sampled_from([2, 4, 8]))
    gpus = n * cp * pp * dp
    assume(gpus % gpn == 0 and gpus <= max_gpus)
    workload, cluster, _ = draw_step(draw, gpn, n, cp, pp, dp)
    assume(RankMap.of(workload).group < gpn)
    return workload, cluster


def gap(workload: StepWorkload, cluster) -> float:
    """unfolded / folded - 1 of the step time."""
    folded = Engine(workload, cluster).run().step_time_s
    unfolded = Engine(workload, cluster, placement="unfolded").run().step_time_s
    return unfolded / folded - 1


DRAW = {"deadline": None, "derandomize": True, "suppress_health_check": list(HealthCheck), "database": None}


@settings(max_examples=25, **DRAW)
@given(shared_node_cases())
def test_shared_nodes_folded_against_unfolded(case) -> None:
    workload, cluster = case
    assert abs(gap(workload, cluster)) < SHARED_NODE_BOUND


@pytest.mark.benchmark
@settings(max_examples=250, **DRAW)
@given(shared_node_cases(LONG_DRAW_MAX_GPUS))
def test_shared_nodes_long_draw(case) -> None:
    """The long draw (about 4 minutes on 2 shared cores); with -s each new largest gap of a class is printed."""
    workload, cluster = case
    measured, bound = gap(workload, cluster), SHARED_NODE_BOUND
    if abs(measured) > LARGEST.get(bound, 0.0):
        LARGEST[bound] = abs(measured)
        print(f"largest gap, class bound {bound:g}: {measured:+.3e} ({_short(workload)}, {cluster.num_gpus} GPUs)")
    assert abs(measured) < bound


LARGEST: dict[float, float] = {}  # the long draw's largest gap of each class, by its bound


def _short(workload: StepWorkload) -> str:
    layout, ranks = workload.layout, RankMap.of(workload)
    return (
        f"{workload.model.name} {layout.name} {layout.schedule} n {ranks.n} cp {ranks.cp} ep {ranks.ep} etp "
        f"{ranks.etp} pp {ranks.pp} dp {ranks.dp} GPUs/node {ranks.gpus_per_node} {layout.gemm_dtype} "
        f"recompute {layout.recompute} {layout.token_dispatcher} dp_overlap {layout.dp_overlap}"
    )


def test_dualpipe_lanes_on_replicas_that_differ_do_not_deadlock_the_unfolded_step() -> None:
    """Found by a draw at a 2 GB/s NIC: DualPipe's F&B task runs two lanes whose compute-stream ops take turns on the
    GPU (simulator/streams/tasks.py), and a fused GEMM + EP all-to-all held its turn while it waited at the EP
    barrier. EP 4 spans replicas 0 and 1 of a node, which are not alike (replica 0's GPUs carry the PXN detours of
    replica 1's cross-node DP hops, overlapped with the step): at 10.18 ms replica 1 reached the forward lane's
    expert_fc13+ep_a2a_dispatch first, at 10.23 ms replica 0 the backward lane's, and each waited for the other at
    a barrier the other never joined (RuntimeError: places never finished). A fused op now gives its turn back
    while its peers have not all joined; the folded step (whose members join together) is unchanged, and the two
    agree (measured: equal, within the class's bound)."""
    layout = layout_preset("megascale-moe").with_(
        pp=4, intra_size=2, ep=4, schedule="dualpipe", recompute="full", dp_overlap=True
    )
    workload = StepWorkload(TINY, layout, 64, 8, 64, 512)
    cluster = cluster_preset("h800", 64, domain_gpus=8, nic_bandwidth_Bps=2e9)
    assert abs(gap(workload, cluster)) < SHARED_NODE_BOUND
