"""The bytes each GPU sends for a step's data-parallel sync, a pure function of the workload and the calibration:
inside the DP group (or its instance), and across the DP instances (workloads/specs/hybrid_dp.py).

A ring all-gather or reduce-scatter of P parameters over d GPUs sends (d - 1) / d of them per GPU; gradients at the
layout's gradient-sync bytes per parameter and efficiency (simulator/costs/kernels.py: MegaScale-MoE Sec. 5's BF16
all-to-all, or a reduce-scatter of the main gradients), weights BF16 or FP8 / FP4 with scales under
--fp8-param-gather (workloads/graph/fsdp.py param_gather_bytes). Where a ring leaves the node, each group's bytes
are its share on one GPU's NIC (``ring_nic_share``)."""

from __future__ import annotations

from simulator.costs.calibration import Calibration
from simulator.costs.kernels import dp_gradient_bytes_per_param, dp_gradient_efficiency
from simulator.engine.ranks import DP, EDP, RankMap
from workloads.graph.fsdp import param_gather_bytes
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import LayoutSpec


def ring_nic_share(in_node: int, size: int, nic_over_nvlink: float) -> float:
    """The share of a DP ring's bytes per GPU that one GPU's NIC carries, for a ring of ``size`` GPUs with ``in_node``
    of them in each node (``nic_over_nvlink``: the NIC's bandwidth over NVLink's). NCCL lays its rings (channels) so
    that each of a node's members is where some of them leave it, on its own NIC, and collectives over rings aggregate
    the NICs' bandwidth where an all-to-all cannot
    (NVIDIA/nccl-tests #267): 256 H100 with 8 x 400G NICs per node all-gather 2 GB at 200 GB/s of bus bandwidth
    (NVIDIA/nccl #1218), 4.3x one NIC's 46-48 GB/s (nccl-tests #290). So a node's crossing bytes spread over its
    ``in_node`` NICs, while each member takes the rest, (k - 1) / k, over NVLink; NVLink keeps up with at most
    1 + NVLink / NIC members' NICs (k - 1 of them reach each member over its NVLink), so the share is one over the lesser
    of the two. A ring inside one node runs on NVLink alone (the placement's links): 1."""
    if in_node <= 1 or in_node >= size:
        return 1.0
    return 1.0 / min(in_node, 1.0 + 1.0 / nic_over_nvlink)


def stage_ring_shares(ranks: RankMap, stage: int, nic_over_nvlink: float) -> tuple[float, float]:
    """The dense and the expert DP ring's share of their bytes on one NIC of ``stage`` (``ring_nic_share``)."""
    dense, expert = (ring_nic_share(*ranks.members_in_node(stage, kind), nic_over_nvlink) for kind in (DP, EDP))
    return dense, expert


def _ring_bytes(
    groups: list[tuple[float, int]], shares: tuple[float, ...], per_param: float, efficiency: float
) -> float:
    """Ring wire bytes per GPU of (parameters, GPUs of the ring) pairs, each at its NIC share (the dense group first,
    then the experts', where there are): (d - 1) / d of them, ``per_param`` bytes each at ``efficiency``."""
    pairs = zip(groups, shares)
    return sum(params * per_param * ((dp - 1) / dp) / efficiency * share for (params, dp), share in pairs if dp > 1)


def grad_wire_bytes(
    layout: LayoutSpec, groups: list[tuple[float, int]], shares: tuple[float, ...] = (1.0, 1.0)
) -> float:
    """Gradient wire bytes per GPU of (parameters reduced, GPUs of the ring) pairs, each at its NIC share."""
    per_param = dp_gradient_bytes_per_param(layout.grad_sync, layout.main_grads_dtype)
    return _ring_bytes(groups, shares, per_param, dp_gradient_efficiency(layout.grad_sync))


def param_wire_bytes(
    layout: LayoutSpec, cal: Calibration, groups: list[tuple[float, int]], shares: tuple[float, ...] = (1.0, 1.0)
) -> float:
    """Weight all-gather wire bytes per GPU of (parameters gathered, GPUs of the ring) pairs, each at its NIC share."""
    return _ring_bytes(groups, shares, param_gather_bytes(layout), cal.ring_efficiency)


def dp_wire_bytes(
    workload: StepWorkload, cal: Calibration, stage: int, shares: tuple[float, ...] = (1.0, 1.0)
) -> tuple[float, float]:
    """(gradient, weight) wire bytes each GPU of ``stage`` sends per step in its DP group's (or instance's) ring;
    experts sync over expert DP; under ZeRO-2 / 3 the units' gradients / weights go unit by unit in the tasks.
    ``shares``: the dense and the expert ring's NIC shares (``ring_nic_share``)."""
    groups = workload.step_sync_groups(stage)
    grads = grad_wire_bytes(workload.layout, [(grads, dp) for grads, _, dp in groups], shares)
    return grads, param_wire_bytes(workload.layout, cal, [(params, dp) for _, params, dp in groups], shares)


def dp_outer_wire_bytes(
    workload: StepWorkload, cal: Calibration, stage: int, chunks: tuple[int, ...] | None = None
) -> tuple[float, float]:
    """(gradient, weight) wire bytes each GPU of ``stage`` (of its ``chunks``) sends per step in the ring across the
    DP instances: the shard's all-reduce or reduce-scatter, and Hybrid-FSDP's all-gather of the weights' shard."""
    groups = workload.outer_sync_groups(stage, chunks)
    grads = grad_wire_bytes(workload.layout, [(grads, n) for grads, _, n in groups])
    return grads, param_wire_bytes(workload.layout, cal, [(params, n) for _, params, n in groups])


def grad_transfers(
    workload: StepWorkload, cal: Calibration, stage: int, shares: tuple[float, float], per_chunk: bool, buckets: int
) -> int:
    """How many DP gradient transfers a GPU of ``stage`` makes per step: one per model chunk with gradients to
    reduce under the interleaved schedule's per-chunk sync (``per_chunk``), else one per bucket of ``buckets`` (none
    without DP bytes); twice that across DP instances."""
    twice = 1 + (workload.layout.dp_instances > 1)
    if workload.dp > 1 and per_chunk:
        grads = (
            grad_wire_bytes(workload.layout, workload.chunk_grad_groups(stage, chunk), shares)
            + dp_outer_wire_bytes(workload, cal, stage, (chunk,))[0]
            for chunk in range(workload.chunks)
        )
        return twice * sum(grad > 0 for grad in grads)
    grad = dp_wire_bytes(workload, cal, stage, shares)[0] + dp_outer_wire_bytes(workload, cal, stage)[0]
    return twice * buckets if grad > 0 else 0
