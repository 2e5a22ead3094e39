"""The folded, memoized engine and the unfolded engine (every GPU, every flow) agree on small clusters."""

from __future__ import annotations

import pytest

from simulator.engine import PipelineEngine
from simulator.report import build_report
from simulator.unfolded import UnfoldedEngine
from topologies.cluster import cluster_preset, gpu_path
from workloads.layouts import layout_preset
from workloads.models import ModelSpec
from workloads.step import StepWorkload

TINY = ModelSpec("tiny", 8, 512, 8, 2, 1024, 8, 2, 1024)
SMALL = ModelSpec("small", 4, 1024, 8, 4, 2048, 8, 2, 2048)

# (layout, model, gpus, gpus_per_node = intra size, pp, dp, micro-batches, extra layout changes)
CASES = [
    ("megascale-moe", TINY, 16, 4, 2, 2, 8, {}),
    ("megascale-moe", TINY, 32, 4, 4, 2, 8, {}),
    ("megascale-moe", SMALL, 32, 8, 2, 2, 2, {}),
    ("megascale-moe", TINY, 32, 4, 2, 4, 4, {}),
    ("megascale-moe", TINY, 16, 4, 2, 2, 4, {"schedule": "interleaved", "virtual_stages": 2}),
    ("megascale-moe", TINY, 16, 4, 2, 2, 4, {"dp_overlap": False, "grad_sync": "fp32-rs"}),
    ("megatron-lm", TINY, 16, 4, 2, 2, 8, {}),
    ("megatron-lm", TINY, 64, 8, 4, 2, 8, {}),
    ("tp-tp", TINY, 64, 8, 4, 2, 4, {}),
    ("sp-ep", TINY, 16, 4, 2, 2, 8, {}),
    ("sp-ep-inter", SMALL, 16, 4, 2, 2, 4, {"recompute": "full"}),
]


def _workload(layout_name, model, gpus, n, pp, dp, micro_batches, changes):
    layout = layout_preset(layout_name).with_(pp=pp, intra_size=n, **changes)
    cluster = cluster_preset("h800", gpus, domain_gpus=n)
    workload = StepWorkload(model, layout, gpus, n, dp * micro_batches, 512)
    assert (workload.dp, workload.micro_batches) == (dp, micro_batches)
    return workload, cluster


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[2]}gpus-pp{c[4]}-dp{c[5]}-{len(c[7])}")
def test_folded_equals_unfolded(case) -> None:
    workload, cluster = _workload(*case)
    folded = PipelineEngine(workload, cluster).run()
    unfolded = UnfoldedEngine(workload, cluster).run()
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
    # every GPU ran every task at op level
    assert unfolded.simulated_ops == cluster.num_gpus // workload.pp * sum(
        len(workload.task_ops(workload.task_key(s, t))) for s in range(workload.pp) for t in workload.stage_order(s)
    )
    a, b = build_report(workload, cluster, folded, 0.0), build_report(workload, cluster, unfolded, 0.0)
    assert b.bubble_fraction == pytest.approx(a.bubble_fraction, rel=1e-9, abs=1e-12)
    for kind, seconds in a.exposed_comm_s.items():
        assert b.exposed_comm_s[kind] == pytest.approx(seconds, rel=1e-9, abs=1e-15), kind


def test_unfolded_traffic_uses_the_real_graph() -> None:
    workload, cluster = _workload("megascale-moe", TINY, 16, 4, 2, 2, 2, {})
    engine = UnfoldedEngine(workload, cluster)
    engine.run()
    sent = engine.network.bytes_sent
    # GPU 0 (replica 0, stage 0, rank 0) sends PP activations to GPU 4 and DP traffic to GPU 8, both on rail 0.
    for dst in (4, 8):
        for edge in gpu_path(cluster, 0, dst):
            assert sent[edge] > 0
    # ... and all its collectives over its own NVLink port.
    assert sent[(("gpu", 0), ("nvswitch", 0))] > 0
    assert engine.gpu_index((1, 1, 3)) == 15


@pytest.mark.parametrize("layout_name", ["megascale-moe", "megatron-lm"])
def test_two_stages_per_node_send_over_nvlink(layout_name) -> None:
    """With 4-GPU stages on 8-GPU nodes, stages 0 and 1 share a node: PP sends take NVLink in both engines
    (the folded one used to charge them to the NIC), and the engines agree."""
    layout = layout_preset(layout_name).with_(pp=2, intra_size=4)
    cluster = cluster_preset("h800", 16, domain_gpus=8)
    workload = StepWorkload(TINY, layout, 16, 8, 2 * 8, 512)
    folded = PipelineEngine(workload, cluster).run()
    assert folded.network_bytes[("nvl_pp", 0)] > 0 and folded.network_bytes[("nic_out", 0)] > 0  # DP: NIC
    assert UnfoldedEngine(workload, cluster).run().step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
