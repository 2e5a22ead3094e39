"""A made-up GPU and fully spelled-out calibrations for hand-computed tests (round numbers)."""

from __future__ import annotations

from dataclasses import replace

from simulator.costs.calibration import DEFAULT_CALIBRATION, GRACE_TORCH_OP_HOST_S, TORCH_OP_HOST_S, Calibration
from simulator.costs.gemm_efficiency import flat_gemm_table
from topologies.hardware import GpuSpec
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.schedules.base import PAIRED, Phase, Schedule
from workloads.schedules.pipeline_tasks import Block, TaskKey
from workloads.specs.models import LayerKind, ModelSpec

TOY_GPU = GpuSpec(
    name="toy",
    peak_bf16_flops=100e12,  # 100 SMs at 1e12 FLOP/s each
    peak_fp8_flops=200e12,
    hbm_bytes=80e9,
    hbm_bandwidth_Bps=1e12,
    sm_count=100,
    nvlink_bandwidth_Bps=100e9,
    nvlink_latency_s=1e-6,
    source="made up for tests",
)

# 32 equal layers; 8 heads and 8 experts divide n = 8; a vocabulary of 8 makes the embedding and LM head
# negligible, so every pipeline stage does the same work.
EQUAL_STAGES = ModelSpec("equal", 32, 2048, 8, 8, 4096, 8, 2, 8)

# Every constant spelled out so that no test depends on the project's calibrated values.
TOY_CALIBRATION = Calibration(
    gemm_tile_m=128,
    gemm_tile_n=128,
    gemm_efficiency=flat_gemm_table(1.0),  # one efficiency for every shape and dtype
    compute_residual=1.0,
    sustained_clock_fraction=1.0,
    attention_fwd_efficiency=0.5,
    attention_bwd_efficiency=0.25,
    attention_causal_fraction=0.5,
    memory_efficiency=1.0,
    kernel_overhead_s=0.0,
    graph_kernel_overhead_s=0.0,
    host_launch_s=0.0,
    torch_host_launch_s=None,  # host_launch_s serves every stack (simulator/streams/op_costs.py)
    grace_torch_host_launch_s=None,
    host_sync_s=50e-6,
    all_to_all_efficiency=0.5,
    ring_efficiency=1.0,
    collective_base_latency_s=0.0,  # a collective's latency: its steps at the GPU's nvlink_latency_s (1 us) only
    net_step_latency_s=1e-6,
    comm_sms_nccl=0,  # communication kernels take no SMs from compute (tests/scenarios/test_sm_share.py sets them)
    comm_sms_deepep=0,
    comm_sms_hybridep=0,
    comm_sms_hybridep_internode=0,
    fitted_on=(),
)

# A bare torch op's host time per eager kernel (torch.nn.Linear's on a DGX-H100 and on a GB200, TransformerEngine
# #2053), stop 47's calibration for every stack: at a TE module's (36.5 / 99.66 us since, where the layers are
# Megatron-Core's with TE) the toy layers' short kernels leave the host on the critical path, where the engine
# scenarios built on them look at the GPU, the NIC and the pipeline.
TORCH_HOST = {"host_launch_s": TORCH_OP_HOST_S, "grace_host_launch_s": GRACE_TORCH_OP_HOST_S}

# Stop 34's per-kernel, sync and residual constants (kernel_overhead_s 4 us and host_sync_s 50 us, assumed then;
# measured values since stop 35, simulator/costs/calibration.py) and a bare torch op's host time (TORCH_HOST). Engine
# scenarios whose property (a fault on the critical path, a slow transient, a send forecast needed once, an overlap
# that pays, a path the steady shortcut takes) was built on their timings pin them, so that they test the engine
# rather than the calibration of the day.
SCENARIO_CALIBRATION = DEFAULT_CALIBRATION.with_(
    kernel_overhead_s=4e-6,
    graph_kernel_overhead_s=4e-6,
    host_sync_s=50e-6,
    compute_residual=0.8576,
    **TORCH_HOST,
)


def megatron_field(flags: str, field: str) -> object:
    """The layout field ``field`` that Megatron-LM arguments ``flags`` set (workloads/inputs/megatron.py)."""
    return parse_megatron_args(flags).layout_fields[field]


def toy_gpu(**changes: object) -> GpuSpec:
    return replace(TOY_GPU, **changes)


def toy_calibration(**changes: object) -> Calibration:
    return replace(TOY_CALIBRATION, **changes)


def block_task_key(workload: StepWorkload, phase: Phase, first: bool = False, last: bool = False) -> TaskKey:
    """The key of a task on a block of ``workload.layers_per_chunk`` MoE layers (models without dense layers)."""
    block = Block(first, last, (LayerKind(False, 0),) * workload.layers_per_chunk)
    return TaskKey(phase, (block, block) if phase in PAIRED else (block,))


def replay(schedule: Schedule, durations: dict) -> list[float]:
    """Idle time of each stage when tasks take fixed durations and sends are free (a hand model); fails
    if some stage waits for an input that never comes (a deadlock)."""
    stages = schedule.stages
    orders = [schedule.order(s) for s in range(stages)]
    arrived: dict[tuple, float] = {}
    clock, busy, next_task = [0.0] * stages, [0.0] * stages, [0] * stages
    moved = True
    while moved:
        moved = False
        for s in range(stages):
            while next_task[s] < len(orders[s]):
                task = orders[s][next_task[s]]
                needed = schedule.inputs(s, task)
                if any(key not in arrived for key in needed):
                    break
                clock[s] = max([clock[s]] + [arrived[key] for key in needed]) + durations[task.direction]
                busy[s] += durations[task.direction]
                for key in schedule.outputs(s, task):
                    arrived[key] = clock[s]
                next_task[s] += 1
                moved = True
    assert next_task == [len(order) for order in orders], "the schedule deadlocks"
    return [max(clock) - b for b in busy]


def costs_without_latency(ops: tuple, gpu: GpuSpec, calibration: Calibration):
    """The op list's OpCosts with no collective latency: hand timelines of bytes over a link alone."""
    from simulator.streams.op_costs import OpCosts

    costs = OpCosts.of(ops, gpu, calibration)
    return replace(costs, latency_s=(0.0,) * len(ops))


def toy_task_s(ops: tuple, calibration: Calibration) -> float:
    """A task's ops run alone on the toy GPU with an idle 1 GB/s NVLink: the simulated time at its end."""
    import simpy

    from simulator.streams.network import FluidNetwork
    from simulator.streams.tasks import TaskTiming, run_task

    env = simpy.Environment()
    costs = costs_without_latency(ops, TOY_GPU, calibration)
    run_task(env, ops, costs, FluidNetwork(env, {"nvl": 1e9}), ("nvl",), TaskTiming())
    env.run()
    return env.now
