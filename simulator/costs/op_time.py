"""One op's time alone: the closed form of what the engine times with flows.

An op alone on its GPU, with its links idle and its host launch already done, takes:
- a compute op (GEMM, attention, memory-bound, host sync): ``compute_time_s``;
- a collective: its latency (NCCL's model, ``collective_latency_s``) plus its NVLink wire bytes at the NVLink
  rate, or its NIC wire bytes at the NIC rate where those take longer (the two move at once);
- a fused GEMM + collective (MegaScale-MoE Sec. 4.2): the later of its GEMM and its transfer, plus the tile that
  cannot overlap (``fused_tail_s``) and the collective's latency.

The engine (simulator/streams/tasks.py) starts from these numbers and refines them where ops meet: shared links
(fluid max-min sharing), SMs held by communication kernels, host launches and syncs, dependencies between
streams. tests/differential/test_op_time_alone.py holds the event path of one op alone to this closed form.
"""

from __future__ import annotations

from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.costs.kernels import (
    collective_latency_s,
    collective_wire_bytes,
    compute_time_s,
    fused_tail_s,
    nic_wire_bytes,
)
from topologies.hardware import GpuSpec
from workloads.ops import COLLECTIVE, FUSED, Op


def transfer_alone_s(op: Op, gpu: GpuSpec, cal: Calibration, nic_Bps: float = 0.0) -> float:
    """The wire time of a collective's or fused op's bytes on idle links: NVLink and (with ``nic_Bps``) the NIC at
    once, so the slower of the two."""
    nvlink_s = collective_wire_bytes(op, cal, gpu) / gpu.nvlink_bandwidth_Bps
    nic_bytes = nic_wire_bytes(op)
    if not nic_bytes or not nic_Bps:
        return nvlink_s
    return max(nvlink_s, nic_bytes / nic_Bps)


def op_time_alone_s(op: Op, gpu: GpuSpec, cal: Calibration = DEFAULT_CALIBRATION, nic_Bps: float = 0.0) -> float:
    """``op`` alone on ``gpu`` from the moment it may start to its end (no host launch, idle links).
    ``nic_Bps``: the NIC rate its NIC bytes move at (0: only its NVLink bytes count)."""
    if op.kind == COLLECTIVE:
        return collective_latency_s(op, gpu, cal) + transfer_alone_s(op, gpu, cal, nic_Bps)
    if op.kind == FUSED and op.is_comm:
        compute_s = compute_time_s(op, gpu, cal)
        comm_s = transfer_alone_s(op, gpu, cal, nic_Bps)
        return max(compute_s, comm_s) + fused_tail_s(compute_s, comm_s, op.tiles) + collective_latency_s(op, gpu, cal)
    return compute_time_s(op, gpu, cal)
