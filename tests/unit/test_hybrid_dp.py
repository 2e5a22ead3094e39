"""Hierarchical data parallelism (workloads/specs/hybrid_dp.py): Megatron's --num-distributed-optimizer-instances and
--outer-dp-sharding-strategy as layout fields, the rules Megatron refuses them by, the rings inside and across the
instances, the bytes each sends and what a GPU holds, each computed by hand."""

from __future__ import annotations

import pytest

from experiments.validation.blackwell.check import row_report
from experiments.validation.blackwell.rows import ROWS
from experiments.validation.blackwell.sources import BRIDGE_ULTRA
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.kernels import dp_gradient_bytes_per_param, dp_gradient_efficiency
from simulator.engine.dp_bytes import dp_outer_wire_bytes, dp_wire_bytes
from simulator.engine.ranks import DP, EDP, Place, RankMap
from simulator.memory.per_gpu import stage_memory
from topologies.errors import ConfigError
from workloads.graph.optimizer_work import optimizer_shard
from workloads.graph.step import StepWorkload
from workloads.inputs.megatron import parse_megatron_args
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec
from workloads.specs.precision import DTYPE_BYTES

MOE = ModelSpec("toy-moe", 4, 1024, 8, 4, 2048, 8, 2, 1024)
GPUS, PER_NODE = 32, 8


def _layout(**changes: object) -> LayoutSpec:
    fields = {"attention": "tp", "ffn": "ep", "intra_size": 2, "pp": 1, "ep": 4, "recompute": "none"}
    return LayoutSpec("t", **{"grad_sync": "fp32-rs", **fields, **changes})


def _workload(**changes: object) -> StepWorkload:
    return StepWorkload(MOE, _layout(**changes), GPUS, PER_NODE, 4 * GPUS, 512)  # DP 16, expert DP 8


def test_flags_give_the_fields() -> None:
    flags = (
        "--tensor-model-parallel-size 2 --expert-model-parallel-size 4 --use-megatron-fsdp "
        "--data-parallel-sharding-strategy optim_grads_params --num-distributed-optimizer-instances 4 "
        "--outer-dp-sharding-strategy optim"
    )
    fields = parse_megatron_args(flags).layout_fields
    assert (fields["dp_instances"], fields["outer_dp_sharding"], fields["zero_stage"]) == (4, "optim", 3)
    partial = parse_megatron_args("--use-distributed-optimizer --num-distributed-optimizer-instances 2")
    assert (partial.layout_fields["dp_instances"], partial.layout_fields["zero_stage"]) == (2, 1)
    outer_alone = parse_megatron_args("--use-distributed-optimizer --outer-dp-sharding-strategy optim")
    assert outer_alone.layout_fields["outer_dp_sharding"] == "no_shard"
    assert any("--outer-dp-sharding-strategy" in note for note in outer_alone.notes)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"dp_instances": 2, "zero_stage": 0}, "Partial DistOpt cannot be used without DistOpt"),
        ({"dp_instances": 2, "outer_dp_sharding": "optim"}, "optim_grads_params"),
        ({"dp_instances": 1, "zero_stage": 3, "outer_dp_sharding": "optim"}, "more than one instance"),
        ({"dp_instances": 2, "optimizer": "muon"}, "num_distributed_optimizer_instances > 1"),
        ({"dp_instances": 0}, "positive"),
        ({"outer_dp_sharding": "full"}, "no_shard"),
    ],
)
def test_refused_as_megatron_refuses(changes: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        _layout(**changes)


@pytest.mark.parametrize(("instances", "words"), [(3, "Data parallel size should be divisible"), (16, "Expert data")])
def test_instances_divide_the_dp_groups(instances: int, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        _workload(dp_instances=instances)


def test_rings_inside_and_across_instances() -> None:
    """DP 16 in 4 instances of 4 consecutive replicas: the inner ring stays in its instance, the outer one strides by
    an instance; the FSDP groups (dense DP, expert DP) are the instance's members."""
    ranks = RankMap.of(_workload(dp_instances=4))
    assert ranks.dp_inner == 4
    assert [ranks.dp_successor(Place(r, 0, 1)).replica for r in (4, 5, 6, 7)] == [5, 6, 7, 4]
    assert [ranks.dp_outer_successor(Place(r, 0, 1)).replica for r in (1, 5, 9, 13)] == [5, 9, 13, 1]
    assert {p.replica for p in ranks.members(Place(6, 0, 1), DP)} == {4, 5, 6, 7}
    experts = ranks.members(Place(6, 0, 1), EDP)  # 2 of the instance's 8 GPUs per expert group of 4
    assert len(experts) == 2 and {p.replica for p in experts} <= {4, 5, 6, 7}
    whole = RankMap.of(_workload())
    assert len(whole.members(Place(6, 0, 1), EDP)) == 8 and len(whole.members(Place(6, 0, 1), DP)) == 16


def test_partial_distributed_optimizer_bytes_by_hand() -> None:
    """ZeRO-1 over 2 instances: each bucket reduce-scattered over the instance (8 of DP 16; experts 4 of 8), the shard
    all-reduced across the 2 instances (two reduce-scatters' worth), the weights gathered in the instance."""
    one, two = _workload(), _workload(dp_instances=2)
    layout, cal = two.layout, DEFAULT_CALIBRATION
    per_param = dp_gradient_bytes_per_param(layout.grad_sync, layout.main_grads_dtype) / dp_gradient_efficiency(
        layout.grad_sync
    )
    groups = two.stage_param_groups(0)
    dense, experts = groups[0].synced, groups[1].synced
    inner = per_param * (dense * 7 / 8 + experts * 3 / 4)
    outer = per_param * 2 * (dense / 8 + experts / 4) * 1 / 2
    grads, params = dp_wire_bytes(two, cal, 0)
    assert grads == pytest.approx(inner) and params > 0
    assert dp_outer_wire_bytes(two, cal, 0) == (pytest.approx(outer), 0.0)
    assert dp_outer_wire_bytes(one, cal, 0) == (0.0, 0.0)
    assert dp_wire_bytes(one, cal, 0)[0] == pytest.approx(per_param * (dense * 15 / 16 + experts * 7 / 8))


def test_memory_follows_the_shards() -> None:
    """The optimizer state over the instance (partial DistOpt, HSDP) or all of DP (Hybrid-FSDP); FSDP's weights and
    gradients over the instance."""
    one, two = _workload(zero_stage=3), _workload(zero_stage=3, dp_instances=2)
    hfsdp = _workload(zero_stage=3, dp_instances=2, outer_dp_sharding="optim")
    groups = one.stage_param_groups(0)
    trained = [g.trained for g in groups]
    assert optimizer_shard(one, 0)[0] == pytest.approx(trained[0] / 16 + trained[1] / 8)
    assert optimizer_shard(two, 0)[0] == pytest.approx(trained[0] / 8 + trained[1] / 4)
    assert optimizer_shard(hfsdp, 0)[0] == pytest.approx(optimizer_shard(one, 0)[0])
    grads = DTYPE_BYTES[two.layout.main_grads_dtype]
    assert stage_memory(two, 0).grads_bytes == pytest.approx(grads * (trained[0] / 8 + trained[1] / 4))
    assert stage_memory(two, 0).params_bytes == pytest.approx(2 * stage_memory(one, 0).params_bytes)
    assert stage_memory(hfsdp, 0).optimizer_bytes == pytest.approx(stage_memory(one, 0).optimizer_bytes)


def test_hybrid_fsdp_gathers_the_weight_shard_across_instances() -> None:
    """Hybrid-FSDP reduce-scatters the gradient shard across the instances (one reduce-scatter's worth, half HSDP's
    all-reduce) and all-gathers the weights' shard back; HSDP gathers nothing across them."""
    cal = DEFAULT_CALIBRATION
    hsdp = dp_outer_wire_bytes(_workload(zero_stage=3, dp_instances=2), cal, 0)
    hfsdp = dp_outer_wire_bytes(_workload(zero_stage=3, dp_instances=2, outer_dp_sharding="optim"), cal, 0)
    assert hsdp[1] == 0.0 and hfsdp[1] > 0
    assert hfsdp[0] == pytest.approx(hsdp[0] / 2)


def test_units_gather_and_scatter_inside_the_instance() -> None:
    """FSDP's per-layer collectives run over the instance (dense 8 of DP 16, experts 4 of 8); with the instance inside
    a node they move on NVLink where the whole DP group would cross nodes."""
    whole, split = _workload(zero_stage=3).unit_comm, _workload(zero_stage=3, dp_instances=2).unit_comm
    assert (whole.dense_dp, whole.expert_dp, split.dense_dp, split.expert_dp) == (16, 8, 8, 4)
    in_node = StepWorkload(MOE, _layout(zero_stage=3, dp_instances=4), GPUS, PER_NODE, 4 * GPUS, 512).unit_comm
    assert whole.across_nodes and not in_node.across_nodes


def test_the_ultra_rows_shard_inside_each_nvlink_domain() -> None:
    """Nemotron 3 Ultra's recipes run Megatron FSDP in 4 instances of one 64-GPU NVLink domain each, the optimizer
    state sharded across them (Hybrid-FSDP): its per-layer gathers stay on NVLink, so the same job as one FSDP group
    over all 256 GPUs exposes more FSDP communication (GB200 0.64 against 0.059 s, GB300 0.068 against 0.047 s). Whether
    it runs slower depends on the NIC: GB200 (400G) 3.03 against 2.80 s, GB300 (800G) 2.28 against 2.38 s, where the
    one group's gathers, each GPU's NIC at its ring's share (dp_bytes.ring_nic_share), hide behind compute and
    Hybrid-FSDP still pays its shard's reduce-scatter and all-gather across the instances."""
    for row in (row for row in ROWS if row.source == BRIDGE_ULTRA):
        run = row.job()
        assert (run.layout.dp_instances, run.layout.outer_dp_sharding, run.layout.zero_stage) == (4, "optim", 3)
        hybrid = row_report(row, model=run.model, layout=run.layout)
        whole = row_report(row, model=run.model, layout=run.layout.with_(dp_instances=1, outer_dp_sharding="no_shard"))
        assert whole.exposed_comm_s["fsdp"] > hybrid.exposed_comm_s["fsdp"]


def test_the_memory_hint_names_one_instance() -> None:
    """Where the optimizer state (or FSDP's weights) is the biggest term, one DP instance shards it over all of DP:
    the hint says so in Megatron's flag."""
    from workloads.specs.hints import in_megatron_words, memory_hint

    terms = {"params": 1.0, "grads": 1.0, "optimizer": 40.0, "activations": 5.0, "buffers": 0.1}
    hint = in_megatron_words(memory_hint(terms, _layout(dp_instances=2)))
    assert "--num-distributed-optimizer-instances 1" in hint
    assert "instances" not in memory_hint(terms, _layout())
    fsdp = {**terms, "params": 50.0}
    assert "dp_instances=1" in memory_hint(fsdp, _layout(zero_stage=3, dp_instances=2))


def test_search_keeps_as_many_instances_as_divide_the_point() -> None:
    """moesim search keeps a job's DP instances where they divide the point's DP and expert DP, else their greatest
    common divisor; at one, Hybrid-FSDP's outer sharding goes too."""
    from workloads.specs.hybrid_dp import fitted

    job = _layout(zero_stage=3, dp_instances=4, outer_dp_sharding="optim")  # TP 2, EP 4 on 32 GPUs: DP 16, EDP 8
    assert fitted(_layout(), GPUS, {}) == {}
    assert fitted(job, GPUS, {}) == {"dp_instances": 4, "outer_dp_sharding": "optim"}
    assert fitted(job, GPUS, {"pp": 4}) == {"dp_instances": 2, "outer_dp_sharding": "optim"}  # DP 4, expert DP 2
    assert fitted(job, GPUS, {"pp": 2, "ep": 16}) == {"dp_instances": 1, "outer_dp_sharding": "no_shard"}


def test_search_answers_keep_the_instance_flags() -> None:
    """The job's instance flags are the point's to print (dropped from the job's own flags), but kept when the job is
    rebuilt at another TP, where the point then fits them."""
    from experiments.search.answer import INSTANCE_FLAGS, job_flags

    job = "--use-distributed-optimizer --num-distributed-optimizer-instances 4 --tensor-model-parallel-size 2"
    assert "instances" not in job_flags(job)
    assert job_flags(job, keep=INSTANCE_FLAGS) == "--use-distributed-optimizer --num-distributed-optimizer-instances 4"
