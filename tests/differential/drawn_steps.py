"""What the folded-against-unfolded draws share (tests/differential/test_shared_nodes.py, test_degraded_nic.py):
the small models, and a step drawn on a given GPU grid. The draws run in one fixed order, so a derandomized
hypothesis run draws the same examples."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume
from hypothesis import strategies as st

from topologies.cluster import ClusterSpec, cluster_preset
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

TINY = ModelSpec("tiny", 8, 512, 8, 2, 1024, 8, 2, 1024)
TINY16 = replace(TINY, name="tiny16", num_experts=16)
DENSE = replace(TINY, name="tiny-dense", num_experts=0, top_k=0, expert_ffn_size=0, dense_ffn_size=1024)
SCHEDULES = ("1f1b", "interleaved", "zb1p", "dualpipe", "dualpipev")


def draw_step(draw: st.DrawFn, gpn: int, n: int, cp: int, pp: int, dp: int, after=None) -> tuple:
    """A step on ``n`` x ``cp`` x ``pp`` x ``dp`` GPUs of ``gpn`` per node: model, schedule, EP / ETP and
    dispatcher, precision, recompute, DP overlap (the weight gather aligned as Megatron-LM aligns it), layout preset,
    micro-batches and NIC drawn, then ``after(draw, gpus)``'s draw (a fault, say); (workload, cluster, what ``after``
    drew). An invalid combination is assumed away."""
    gpus = n * cp * pp * dp
    model = draw(st.sampled_from([TINY, TINY16, DENSE]))
    schedule = draw(st.sampled_from(SCHEDULES))
    changes: dict[str, object] = {"pp": pp, "intra_size": n, "cp": cp, "schedule": schedule}
    changes["virtual_stages"] = 2 if schedule == "interleaved" else 1
    if model.num_experts:
        etp = draw(st.sampled_from([1, 2])) if n > 1 else 1
        eps = [e for e in (1, 2, 4, 8, 16) if e * etp <= n * cp * dp and e <= model.num_experts]
        changes.update(ep=draw(st.sampled_from(eps)), etp=etp)
        changes["token_dispatcher"] = draw(st.sampled_from(["megascale", "alltoall"]))
    changes["gemm_dtype"] = draw(st.sampled_from(["bf16", "fp8"]))
    changes["recompute"] = draw(st.sampled_from(["none", "sar", "full"]))
    changes["dp_overlap"] = draw(st.booleans())
    # as Megatron-LM sets it (no draw, so the examples stay those drawn before): without the interleaved schedule each
    # stage gathers its weights from its first forward
    changes["align_param_gather"] = schedule == "interleaved"
    base = draw(st.sampled_from(["megascale-moe", "megatron-lm", "sp-ep"]))
    micro_batches = pp * draw(st.sampled_from([1, 2])) * (2 if schedule.startswith("dualpipe") else 1)
    nic_Bps = draw(st.sampled_from([2e9, 25e9, 50e9]))
    extra = after(draw, gpus) if after is not None else None
    try:
        layout = layout_preset(base).with_(**changes)
        workload = StepWorkload(model, layout, gpus, gpn, dp * micro_batches, 512)
        cluster: ClusterSpec = cluster_preset("h800", gpus, domain_gpus=gpn, nic_bandwidth_Bps=nic_Bps)
    except ConfigError:
        assume(False)
    return workload, cluster, extra
