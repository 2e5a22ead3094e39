"""FSDP / ZeRO-2 and 3 per unit (workloads/graph/fsdp.py): the bytes each unit's all-gather and reduce-scatter
send (BF16 against FP8 weights, FP32 against BF16 gradients, FSDP2's BF16 fallback), which tasks carry them, what the
step's one DP sync keeps, where the DP group sits, and the schedules it is refused with."""

from __future__ import annotations

import pytest
import simpy

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.engine.placement import FoldedPlacement
from simulator.engine.ranks import Place
from simulator.engine.timer import CostCache
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.graph.fsdp import FSDP_AG, FSDP_RS, dp_group_in_node, param_gather_bytes, unit_params
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import Group
from workloads.schedules.base import BACKWARD, FORWARD
from workloads.schedules.pipeline_tasks import TaskKey
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import LayerKind, ModelSpec
from workloads.specs.precision import MXFP8_BLOCK

MOE = ModelSpec("toy-moe", 4, 1024, 8, 4, 2048, 8, 2, 1024)


def _layout(**changes: object) -> LayoutSpec:
    fields = {"attention": "tp", "ffn": "ep", "intra_size": 4, "pp": 1, "recompute": "none", "grad_sync": "fp32-rs"}
    return LayoutSpec("t", **{**fields, **changes})


def _workload(layout: LayoutSpec, gpus: int = 16, gpus_per_node: int = 8) -> StepWorkload:
    return StepWorkload(MOE, layout, gpus, gpus_per_node, 4 * gpus // layout.intra_size, 512)


def _fsdp_ops(workload: StepWorkload, phase) -> list:
    ops = workload.task_ops(TaskKey(phase, (workload.block_key(0),)))
    return [op for op in ops if op.stream in (FSDP_AG, FSDP_RS)]


def test_gather_bytes_bf16_fp8_mxfp8() -> None:
    """BF16 weights 2 B; --fp8-param-gather 1 B ("reducing overhead by 50%"); MXFP8 1 B and a scale per 32."""
    assert param_gather_bytes(_layout()) == 2.0
    fp8 = _layout(gemm_dtype="fp8", fp8_recipe="blockwise", fp8_param_gather=True)
    assert param_gather_bytes(fp8) == 1.0
    assert param_gather_bytes(fp8.with_(fp8_recipe="mxfp8")) == 1.0 + 1.0 / MXFP8_BLOCK
    assert param_gather_bytes(fp8.with_(fp8_recipe="nvfp4")) == 0.5 + 1.0 / 16  # E2M1 and an E4M3 scale per 16


def test_a_unit_gathers_its_weights_at_half_the_bytes_in_fp8() -> None:
    """A unit's all-gather over 16 / 4 = 4 replicas (across nodes: 16 GPUs, 8 per node) sends 3/4 of its weights per
    GPU, dense ones over DP and experts over expert DP; FP8 halves both."""
    bf16 = _workload(_layout(zero_stage=3))
    fp8 = _workload(_layout(zero_stage=3, gemm_dtype="fp8", fp8_recipe="blockwise", fp8_param_gather=True))
    dense, experts = unit_params(MOE, bf16.layout, LayerKind(False, 0))
    gathers = [op for op in _fsdp_ops(bf16, FORWARD) if op.layer == 0]
    assert [(op.group, op.group_size) for op in gathers] == [(Group.DP, 4), (Group.EDP, bf16.expert_dp)]
    assert gathers[0].nic_bytes == pytest.approx(dense * 2 * 3 / 4) and gathers[0].comm_bytes == 0.0
    assert gathers[1].nic_bytes == pytest.approx(experts * 2 * (bf16.expert_dp - 1) / bf16.expert_dp)
    halved = [op for op in _fsdp_ops(fp8, FORWARD) if op.layer == 0]
    assert [op.nic_bytes for op in halved] == pytest.approx([op.nic_bytes / 2 for op in gathers])


def test_gradients_scatter_at_the_main_gradient_dtype() -> None:
    """FP32 main gradients send 4 B per parameter, --grad-reduce-in-bf16's 2 B."""
    fp32 = [op for op in _fsdp_ops(_workload(_layout(zero_stage=2)), BACKWARD) if op.layer == 0]
    bf16 = [
        op for op in _fsdp_ops(_workload(_layout(zero_stage=2, main_grads_dtype="bf16")), BACKWARD) if op.layer == 0
    ]
    assert {op.stream for op in fp32} == {FSDP_RS}  # ZeRO-2: no gathers
    assert [op.nic_bytes for op in bf16] == pytest.approx([op.nic_bytes / 2 for op in fp32])


@pytest.mark.parametrize(("zero", "forward", "backward"), [(1, 0, 0), (2, 0, 2), (3, 2, 4)])
def test_ops_per_unit_and_micro_batch(zero: int, forward: int, backward: int) -> None:
    """Per unit (layer) and group pair (dense, expert): ZeRO-1 none, ZeRO-2 a reduce-scatter in backward, ZeRO-3
    an all-gather in forward and one in backward besides."""
    workload = _workload(_layout(zero_stage=zero))
    layers = MOE.num_layers
    assert len(_fsdp_ops(workload, FORWARD)) == forward * layers
    assert len(_fsdp_ops(workload, BACKWARD)) == backward * layers


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_the_step_sync_keeps_what_the_units_do_not_move(zero: int) -> None:
    """Units + the step's one sync = every synced parameter: ZeRO-2 takes the layers' gradients out of the step's
    reduce-scatter, ZeRO-3 their weights out of its all-gather too; the embedding and head stay in it."""
    workload = _workload(_layout(zero_stage=zero))
    units = [sum(unit_params(MOE, workload.layout, MOE.layer_kind(i))[part] for i in range(4)) for part in (0, 1)]
    for (grads, params, dp), group, unit in zip(workload.step_sync_groups(0), workload.stage_param_groups(0), units):
        assert dp == group.dp
        assert grads == pytest.approx(group.synced - (unit if zero >= 2 else 0.0))
        assert params == pytest.approx(group.synced - (unit if zero >= 3 else 0.0))
    if zero >= 2:  # what the dense group's step reduce-scatter keeps: the embedding and the head
        assert workload.step_sync_groups(0)[0][0] == pytest.approx(workload.embedding_params(0))


@pytest.mark.parametrize(
    ("gpus", "per_node", "changes", "in_node"),
    [
        (16, 8, {}, False),
        (8, 8, {"intra_size": 2}, True),
        (16, 8, {"intra_size": 2, "pp": 2}, False),
        (16, 16, {"intra_size": 2, "pp": 2}, True),
        (32, 8, {"intra_size": 2, "pp": 2, "ep": 8}, False),
        (16, 4, {"intra_size": 2, "pp": 2}, False),
        (8, 8, {"intra_size": 2, "cp": 2}, True),
        (64, 8, {"intra_size": 8, "pp": 2}, False),
    ],
)
def test_dp_group_in_node_is_the_folded_placements(gpus: int, per_node: int, changes: dict, in_node: bool) -> None:
    """The workload's test of whether the DP group leaves the node (it picks NIC or NVLink bytes) is the folded
    placement's DP ring test (simulator/engine/placement.py), for every stage."""
    workload = _workload(_layout(**changes), gpus, per_node)
    layout = workload.layout
    experts = layout.ep_degree * layout.etp
    ours = dp_group_in_node(workload.pp, workload.dp, layout.intra_size, layout.cp, experts, per_node)
    place = FoldedPlacement(simpy.Environment(), workload, cluster_preset("h800", gpus, domain_gpus=per_node), Faults())
    links = [place.dp_links(Place(0, stage, 0)) for stage in range(workload.pp)]
    ring_on_nvlink = not any(link[0] == "nic_out" for stage_links in links for link in stage_links)
    assert ours == ring_on_nvlink == in_node


def test_in_node_groups_move_their_bytes_on_nvlink() -> None:
    workload = _workload(_layout(zero_stage=3, intra_size=2), gpus=8)
    assert workload.unit_comm is not None and not workload.unit_comm.across_nodes
    assert all(op.comm_bytes > 0 and op.nic_bytes == 0 for op in _fsdp_ops(workload, FORWARD))
    assert not workload.tasks_use_nic


@pytest.mark.parametrize(
    "changes", [{"schedule": "dualpipev", "pp": 2}, {"schedule": "zb1p", "pp": 2}, {"ep_overlap": True}]
)
def test_refused_where_tasks_are_split_or_paired(changes: dict) -> None:
    with pytest.raises(ConfigError) as error:
        _workload(_layout(zero_stage=3, **changes), gpus=32)
    assert error.value.field == "layout.zero_stage" and "zero_stage=1" in error.value.rule


def test_fsdp2_gathers_bf16() -> None:
    """Megatron-LM turns --fp8-param-gather off under --use-torch-fsdp2 (validate_args); Megatron FSDP keeps it."""
    flags = "--bf16 --fp8-format e4m3 --fp8-recipe blockwise --fp8-param-gather --untie-embeddings-and-output-weights"
    torch = parse_megatron_args(flags + " --use-torch-fsdp2 --no-gradient-accumulation-fusion")
    assert torch.layout_fields["fp8_param_gather"] is False and torch.layout_fields["zero_stage"] == 3
    assert any("--fp8-param-gather off" in note for note in torch.notes)
    megatron = parse_megatron_args(flags + " --use-megatron-fsdp")
    assert megatron.layout_fields["fp8_param_gather"] is True and megatron.layout_fields["zero_stage"] == 3


def test_zero_0_all_reduces_gradients_and_gathers_nothing() -> None:
    """Megatron-Core's DDP without the distributed optimizer all-reduces the gradients (a reduce-scatter and an
    all-gather of them on a ring: twice the reduce-scatter's bytes) and has no weights to gather."""
    zero0, zero1 = _workload(_layout(zero_stage=0)), _workload(_layout(zero_stage=1))
    for (grads, params, _), (grads1, params1, _) in zip(zero0.step_sync_groups(0), zero1.step_sync_groups(0)):
        assert (grads, params) == (2 * grads1, 0.0) and params1 == grads1
    cluster = cluster_preset("h800", 16, domain_gpus=8)
    grad0, param0 = Engine(zero0, cluster).dp_wire_bytes(0)
    grad1, param1 = Engine(zero1, cluster).dp_wire_bytes(0)
    assert (grad0, param0) == (pytest.approx(2 * grad1), 0.0) and param1 > 0


@pytest.mark.parametrize(
    ("flags", "dtype"),
    [("--bf16", "bf16"), ("", "fp32"), ("--bf16 --megatron-fsdp-main-grads-dtype fp32", "fp32")],
)
def test_megatron_fsdp_main_gradients_follow_the_weights(flags: str, dtype: str) -> None:
    """Megatron FSDP's --megatron-fsdp-main-grads-dtype "auto" (its default) is the weights' dtype; the reduce-scatter
    moves that dtype."""
    job = parse_megatron_args(f"{flags} --use-megatron-fsdp --untie-embeddings-and-output-weights")
    assert job.layout_fields["main_grads_dtype"] == dtype


def test_a_gpu_s_nic_carries_its_ring_share_of_a_unit_s_collectives() -> None:
    """Where a DP ring's members share a node, NCCL's rings leave it at each member's NIC (simulator/engine/dp_bytes.py
    ring_nic_share, as for the step's DP sync): the toy MoE at intra size 1 on 16 H800s, 4 a node, has 4 members of its
    dense and expert DP groups (16 each) in a node, so one GPU's NIC carries 1 / min(4, 1 + 160 / 47) = 1/4 of each
    unit's all-gather; the task's other NIC bytes (none here) would keep theirs. Without a NIC rate the cache keeps
    the whole ring on the NIC, as before."""
    workload = _workload(_layout(intra_size=1, zero_stage=3), gpus=16, gpus_per_node=4)
    cluster = cluster_preset("h800", 16, domain_gpus=4)
    key = TaskKey(FORWARD, (workload.block_key(0),))
    whole = CostCache(workload, cluster.gpu, DEFAULT_CALIBRATION).get(key, stage=0)
    costs = CostCache(workload, cluster.gpu, DEFAULT_CALIBRATION, cluster.nic_effective_Bps)
    assert costs.ring_shares(0) == (0.25, 0.25)
    shared = costs.get(key, stage=0)
    ops = workload.task_ops(key)
    assert {op.group for op in ops if op.nic_bytes} == {Group.DP, Group.EDP}
    assert shared.nic_bytes == tuple(nbytes * 0.25 for nbytes in whole.nic_bytes)
    assert costs.get(key) is not shared and costs.get(key).nic_bytes == whole.nic_bytes  # no stage: the whole ring
