"""Wherever a step is taken on the line along one run's steady periods (simulator/fast/run_line.py), it lies within the
line's stated bounds of the full run: drawn over the small model with cross-node EP (layers, width, PP, NIC speed,
micro-batches) and the schedules whose exact attempts fail there (EP-overlapped DualPipe(V), ZB1P, 1F1B at PP 4)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from experiments.beyond.schedules import SCHEDULES
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.fast.bounded import relative_error
from simulator.fast.run_line import BOUND_REL, STEP_BOUND_REL
from simulator.fast.steady import fields_of, run_step
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    name=st.sampled_from(["zb1p", "1f1b", "dualpipe+ep_overlap", "dualpipev+ep_overlap"]),
    pp=st.sampled_from([2, 4]),
    layers_per_stage=st.sampled_from([2, 4]),
    hidden=st.sampled_from([1024, 2048]),
    nic_Bps=st.sampled_from([5e9, 10e9, 25e9]),
    micro_batches=st.sampled_from([96, 128, 192]),
)
def test_a_step_on_the_line_lies_within_its_bounds(
    name: str, pp: int, layers_per_stage: int, hidden: int, nic_Bps: float, micro_batches: int
) -> None:
    model = ModelSpec("small", pp * layers_per_stage, hidden, 8, 2, 2 * hidden, 16, 4, hidden)
    layout = layout_preset("megascale-moe").with_(pp=pp, ep=16, micro_batch=1, **SCHEDULES[name])
    workload = StepWorkload(model, layout, 16 * pp, 8, micro_batches * 2, 4096)
    cluster = replace(cluster_preset("h100", 16 * pp), nic_bandwidth_Bps=nic_Bps)
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    assume(step.bound_rel == BOUND_REL and len(step.runs) == 1)
    full = Engine(workload, cluster, DEFAULT_CALIBRATION).run()
    error, field = relative_error(fields_of(step.result), fields_of(full))
    assert error <= BOUND_REL, field
    assert abs(step.result.step_time_s / full.step_time_s - 1) <= STEP_BOUND_REL
