"""The bytes each GPU sends for a step's data-parallel sync, a pure function of the workload and the calibration:
inside the DP group (or its instance), and across the DP instances (workloads/specs/hybrid_dp.py).

A ring all-gather or reduce-scatter of P parameters over d GPUs sends (d - 1) / d of them per GPU; gradients at the
layout's gradient-sync bytes per parameter and efficiency (simulator/costs/kernels.py: MegaScale-MoE Sec. 5's BF16
all-to-all, or a reduce-scatter of the main gradients), weights BF16 or FP8 / FP4 with scales under
--fp8-param-gather (workloads/graph/fsdp.py param_gather_bytes)."""

from __future__ import annotations

from simulator.costs.calibration import Calibration
from simulator.costs.kernels import dp_gradient_bytes_per_param, dp_gradient_efficiency
from workloads.graph.fsdp import param_gather_bytes
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import LayoutSpec


def grad_wire_bytes(layout: LayoutSpec, groups: list[tuple[float, int]]) -> float:
    """Gradient wire bytes per GPU of (parameters reduced, GPUs of the ring) pairs."""
    per_param = dp_gradient_bytes_per_param(layout.grad_sync, layout.main_grads_dtype)
    efficiency = dp_gradient_efficiency(layout.grad_sync)
    return sum(grads * per_param * ((dp - 1) / dp) / efficiency for grads, dp in groups if dp > 1)


def param_wire_bytes(layout: LayoutSpec, cal: Calibration, groups: list[tuple[float, int]]) -> float:
    """Weight all-gather wire bytes per GPU of (parameters gathered, GPUs of the ring) pairs."""
    per_param = param_gather_bytes(layout)
    return sum(params * per_param * ((dp - 1) / dp) / cal.ring_efficiency for params, dp in groups if dp > 1)


def dp_wire_bytes(workload: StepWorkload, cal: Calibration, stage: int) -> tuple[float, float]:
    """(gradient, weight) wire bytes each GPU of ``stage`` sends per step in its DP group's (or instance's) ring;
    experts sync over expert DP; under ZeRO-2 / 3 the units' gradients / weights go unit by unit in the tasks."""
    groups = workload.step_sync_groups(stage)
    grads = grad_wire_bytes(workload.layout, [(grads, dp) for grads, _, dp in groups])
    return grads, param_wire_bytes(workload.layout, cal, [(params, dp) for _, params, dp in groups])


def dp_outer_wire_bytes(
    workload: StepWorkload, cal: Calibration, stage: int, chunks: tuple[int, ...] | None = None
) -> tuple[float, float]:
    """(gradient, weight) wire bytes each GPU of ``stage`` (of its ``chunks``) sends per step in the ring across the
    DP instances: the shard's all-reduce or reduce-scatter, and Hybrid-FSDP's all-gather of the weights' shard."""
    groups = workload.outer_sync_groups(stage, chunks)
    grads = grad_wire_bytes(workload.layout, [(grads, n) for grads, _, n in groups])
    return grads, param_wire_bytes(workload.layout, cal, [(params, n) for _, params, n in groups])
