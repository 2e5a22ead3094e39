"""Property: any GPU and cluster within the physical bounds of topologies/bounds.py simulates to a finite report
(no overflow, no NaN, no ``RuntimeError: closed task``), with idle fractions in [0, 1]."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.report.simulate import simulate
from topologies.bounds import BOUNDS, QUANTITIES
from topologies.cluster import cluster_preset
from topologies.hardware import GPU_PRESETS
from workloads.specs.layouts import layout_preset

GPU_FIELDS = ("peak_bf16_flops", "peak_fp8_flops", "hbm_bandwidth_Bps", "nvlink_bandwidth_Bps", "nvlink_latency_s")
CLUSTER_FIELDS = ("nic_bandwidth_Bps", "nic_efficiency", "nic_latency_s", "leaf_oversubscription")
LAYOUT = layout_preset("megascale-moe").with_(pp=2)  # 2 stages of 8 GPUs: PP sends cross the NIC


def _within(key: str) -> st.SearchStrategy[float]:
    """Log-uniform over the bound of ``key``, both ends included."""
    bound = BOUNDS[QUANTITIES[key][0]]
    low, high = math.log10(bound.low), math.log10(bound.high)
    return st.one_of(st.sampled_from([bound.low, bound.high]), st.floats(low, high).map(lambda x: 10**x)).map(
        lambda value: min(max(value, bound.low), bound.high)
    )


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.fixed_dictionaries({key: _within(key) for key in (*GPU_FIELDS, *CLUSTER_FIELDS)}))
def test_values_within_the_bounds_give_a_finite_report(values: dict[str, float]) -> None:
    gpu = replace(GPU_PRESETS["h800"], **{key: values[key] for key in GPU_FIELDS})
    cluster = cluster_preset("h800", 16, gpu=gpu, **{key: values[key] for key in CLUSTER_FIELDS})
    report = simulate("deepseekmoe", LAYOUT, cluster=cluster, global_batch=16, seq_len=1024, allow_oom=True)
    assert math.isfinite(report.step_time_s) and report.step_time_s > 0
    assert 0.0 <= report.bubble_fraction <= 1.0 and 0.0 <= report.schedule_bubble <= 1.0
