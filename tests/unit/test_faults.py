"""Faults on demand (simulator/engine/faults.py): stragglers, degraded and failed links, folded and unfolded."""

from __future__ import annotations

import json

import pytest

from experiments.cli.main import main
from simulator.engine.engine import Engine
from simulator.engine.faults import Faults, StageFault, carried_nics, fault_path, speed_factor
from simulator.engine.probes import TransferLog
from simulator.engine.ranks import Place, RankMap
from simulator.report.simulate import simulate
from tests.differential.bounds import FAILED_NIC_BOUND, FAULTS_IN_TWO_REPLICAS_BOUND, SHARED_NODE_BOUND
from tests.toys import EQUAL_STAGES, SCENARIO_CALIBRATION, block_task_key, toy_calibration, toy_gpu
from topologies.cluster import ClusterSpec, cluster_preset, gpu_path
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.schedules.base import BACKWARD, FORWARD
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

CAL = toy_calibration(attention_bwd_efficiency=0.4, all_to_all_efficiency=0.75)
EQUAL = EQUAL_STAGES
TINY = ModelSpec("tiny", 8, 512, 8, 2, 1024, 8, 2, 1024)
SMALL = ModelSpec("small", 4, 1024, 8, 4, 2048, 8, 2, 2048)


def _toy(n: int, pp: int, dp: int, m: int, **layout) -> tuple[StepWorkload, ClusterSpec]:
    """The toy GPU, n GPUs per node = intra size, a near-free NIC unless the layout says otherwise."""
    lay = layout_preset("megascale-moe").with_(pp=pp, micro_batch=1, intra_size=n, **layout)
    spec = ClusterSpec(
        toy_gpu(),
        num_gpus=n * pp * dp,
        domain_gpus=n,
        nic_bandwidth_Bps=1e15,
        nic_efficiency=1.0,
        nic_latency_s=1e-12,
    )
    return StepWorkload(EQUAL, lay, spec.num_gpus, n, m * dp, 4096), spec


# --- parsing, validation, placement ----------------------------------------------------------------


def test_parse_and_describe_round_trip() -> None:
    faults = Faults.parse(["3:1.2", "9:2"], ["nic:17:2", "nvlink:4:1.5"], ["nic:5"])
    assert faults.stragglers == ((3, 1.2), (9, 2.0))
    assert faults.degraded == (("nic", 17, 2.0), ("nvlink", 4, 1.5))
    assert faults.failed == (("nic", 5),)
    assert faults.describe() == [
        "straggler 3:1.2",
        "straggler 9:2",
        "degrade nic:17:2",
        "degrade nvlink:4:1.5",
        "fail-link nic:5",
    ]
    assert not Faults() and faults


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"straggler": ["3"]}, "straggler"),
        ({"straggler": ["3:0.9"]}, "straggler"),
        ({"straggler": ["x:2"]}, "straggler"),
        ({"straggler": ["3:nan"]}, "straggler"),
        ({"straggler": ["-1:2"]}, "straggler"),
        ({"degrade": ["nic:3"]}, "degrade"),
        ({"degrade": ["pcie:3:2"]}, "degrade"),
        ({"fail_link": ["nvlink:3"]}, "fail_link"),
        ({"fail_link": ["17"]}, "fail_link"),
    ],
)
def test_bad_faults_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as error:
        Faults.parse(**kwargs)
    assert error.value.field == field and "\n" not in str(error.value)


def test_gpu_index_out_of_cluster() -> None:
    with pytest.raises(ConfigError, match="^straggler: GPU 16 is not in the cluster"):
        Faults(stragglers=[(16, 2.0)]).validate(cluster_preset("h800", 16))
    with pytest.raises(ConfigError) as error:
        Faults(degraded=[("nic", 3, 0.5)])
    assert error.value.field == "degrade"


def test_faults_use_the_one_numbering() -> None:
    """GPU (d x pp + s) x n + r (simulator/engine/ranks.py), inverted by RankMap.place; both placements use it."""
    workload, _ = _toy(4, 4, 2, 4)
    ranks = RankMap.of(workload)
    assert [ranks.gpu(ranks.place(gpu)) for gpu in range(32)] == list(range(32))
    assert ranks.place(23) == Place(1, 1, 3) and ranks.gpu(Place(1, 0, 1)) == 17


def test_stage_faults_take_the_slowest_member() -> None:
    """Per stage: the largest straggler factor over replicas and ranks, degrades, a failed NIC as a 1/2 NIC."""
    cluster = cluster_preset("h800", 64)  # pp 2, n 8, dp 4
    faults = Faults(stragglers=[(3, 1.2), (16 + 5, 1.5)], degraded=[("nvlink", 9, 2.0)], failed=[("nic", 40)])
    assert faults.stage_faults(cluster, RankMap(pp=2, dp=4, n=8, cp=1, ep=8, etp=1, gpus_per_node=8)) == [
        StageFault(1.5, 1.0, 1.0),
        StageFault(1.0, 2.0, 2.0),
    ]


def test_speed_spread_draws_one_factor_per_gpu() -> None:
    """GPU g's factor is 1 + S u with u numpy's first uniform draw from the seed (speed_seed, g): in [1, 1 + S),
    the same whatever the cluster's size, another for another seed, and averaging 1 + S / 2 over many GPUs."""
    import numpy as np

    faults = Faults(speed_spread=0.08, speed_seed=5)
    assert faults.compute_factor(17) == 1 + 0.08 * np.random.default_rng((5, 17)).random()
    factors = [faults.compute_factor(gpu) for gpu in range(4096)]
    assert all(1.0 <= f < 1.08 for f in factors) and len(set(factors)) == 4096
    assert sum(factors) / 4096 == pytest.approx(1.04, abs=0.002)  # uniform: sd of the mean 0.08 / sqrt(12 x 4096)
    assert Faults(speed_spread=0.08, speed_seed=6).compute_factor(17) != factors[17]
    assert Faults(speed_spread=0.08, speed_seed=5, stragglers=[(17, 1.5)]).compute_factor(17) == 1.5
    assert Faults(speed_spread=0.08, speed_seed=5, stragglers=[(17, 1.01)]).compute_factor(17) == factors[17]
    assert Faults().compute_factor(17) == 1.0 and not Faults(speed_spread=0.0)
    assert faults.describe() == ["gpu-speed-spread 0.08 (seed 5)"]


def test_speed_spread_folds_to_each_stages_slowest_gpu() -> None:
    """64 H800 GPUs, PP 2, n 8, DP 4: stage s holds GPUs (d x 2 + s) x 8 + r; its representative runs at the
    largest of those 32 factors. The same step as the explicit stragglers at the drawn factors."""
    cluster = cluster_preset("h800", 64)
    ranks = RankMap(pp=2, dp=4, n=8, cp=1, ep=8, etp=1, gpus_per_node=8)
    faults = Faults(speed_spread=0.2, speed_seed=1)
    slowest = [max(speed_factor(0.2, 1, (d * 2 + s) * 8 + r) for d in range(4) for r in range(8)) for s in range(2)]
    assert faults.stage_faults(cluster, ranks) == [StageFault(slowest[0]), StageFault(slowest[1])]
    workload, toy_cluster = _toy(2, 4, 2, 8)
    explicit = Faults(stragglers=[(gpu, speed_factor(0.2, 1, gpu)) for gpu in range(toy_cluster.num_gpus)])
    spread = Engine(workload, toy_cluster, CAL, faults=faults).run().step_time_s
    assert spread == Engine(workload, toy_cluster, CAL, faults=explicit).run().step_time_s
    assert spread > Engine(workload, toy_cluster, CAL).run().step_time_s * (1 + 1e-3)


# --- (1) a straggler ----------------------------------------------------------------------------------


@pytest.mark.parametrize("factor", [1.2, 2.0])
def test_straggler_in_last_stage_adds_m_times_its_extra(factor: float) -> None:
    """1F1B, p = 4 equal stages, m = 8, one GPU per stage (no collectives), near-free network, no DP.

    Healthy, the last stage never waits once its first forward arrives: it starts at (p-1)F, runs
    m (F_L + B_L) back to back, and the last backward drains through p-1 stages, so
        step = (p-1)(F + B) + m (F_L + B_L) + optimizer(stage 0).
    A straggler of factor f there scales its pure-compute tasks by f; upstream stages still deliver each
    forward before it is needed (they are faster), so only the middle term changes:
        step(f) - step(1) = m (f - 1)(F_L + B_L).
    """
    workload, cluster = _toy(1, 4, 1, 8)
    healthy = Engine(workload, cluster, CAL)
    base = healthy.run().step_time_s
    last = (
        healthy.task_timing(block_task_key(workload, FORWARD, False, True)).duration_s
        + healthy.task_timing(block_task_key(workload, BACKWARD, False, True)).duration_s
    )
    f_mid = healthy.task_timing(block_task_key(workload, FORWARD, False, False)).duration_s
    b_mid = healthy.task_timing(block_task_key(workload, BACKWARD, False, False)).duration_s
    assert last >= f_mid + b_mid  # the LM-head stage is (barely) the slowest even when healthy
    slow = Engine(workload, cluster, CAL, faults=Faults(stragglers=[(3, factor)])).run().step_time_s
    assert slow - base == pytest.approx(8 * (factor - 1) * last, rel=1e-9)


def test_straggler_with_collectives_costs_m_times_the_stage_extra() -> None:
    """Same pipeline, 8 GPUs per stage: the straggler (rank 5 of stage 3) scales only compute kernels, so
    the stage's tasks grow by less than f (NVLink collectives keep their time); every rank waits for it,
    and the step grows by m x (F'_L + B'_L - F_L - B_L), the last stage's extra time per micro-batch."""
    workload, cluster = _toy(8, 4, 1, 8)
    healthy = Engine(workload, cluster, CAL)
    base = healthy.run().step_time_s
    faulty = Engine(workload, cluster, CAL, faults=Faults(stragglers=[(3 * 8 + 5, 1.2)]))
    slow = faulty.run().step_time_s
    extra = sum(
        faulty.task_timing(key, 3).duration_s - healthy.task_timing(key).duration_s
        for key in (block_task_key(workload, FORWARD, False, True), block_task_key(workload, BACKWARD, False, True))
    )
    assert (
        0
        < extra
        < 0.2
        * sum(
            healthy.task_timing(k).duration_s
            for k in (block_task_key(workload, FORWARD, False, True), block_task_key(workload, BACKWARD, False, True))
        )
    )
    assert slow - base == pytest.approx(8 * extra, rel=1e-9)
    # Memoization keeps the slow stage's timings apart from the healthy stages'.
    assert (
        faulty.task_timing(block_task_key(workload, FORWARD, False, False), 1).duration_s
        == healthy.task_timing(block_task_key(workload, FORWARD, False, False)).duration_s
    )


# --- (2) a degraded NIC -------------------------------------------------------------------------------


def _nic_case(pp: int, dp: int, **layout) -> tuple[StepWorkload, ClusterSpec]:
    lay = layout_preset("megascale-moe").with_(pp=pp, micro_batch=1, **layout)
    spec = ClusterSpec(
        toy_gpu(), num_gpus=8 * pp * dp, domain_gpus=8, nic_bandwidth_Bps=50e9, nic_efficiency=1.0, nic_latency_s=5e-6
    )
    return StepWorkload(EQUAL, lay, spec.num_gpus, 8, 4 * dp, 4096), spec


def test_degraded_nic_slows_dp_sync_by_its_factor() -> None:
    """PP 1, DP 2, no DP overlap: the parameter all-gather runs before the first forward and the gradient
    reduce-scatter after the last backward, each alone on the NIC, so they take (params + grads) / C; a
    NIC of GPU 3 degraded by 3 makes every replica's ring run at C / 3: the step grows by 2 (params + grads) / C."""
    workload, cluster = _nic_case(1, 2, dp_overlap=False, grad_sync="fp32-rs")
    healthy = Engine(workload, cluster, CAL)
    base = healthy.run().step_time_s
    grads, params = healthy.dp_wire_bytes(0)
    assert grads > 0 and params > 0
    slow = Engine(workload, cluster, CAL, faults=Faults(degraded=[("nic", 3, 3.0)])).run().step_time_s
    assert slow - base == pytest.approx(2 * (grads + params) / 50e9, rel=1e-9)


def test_degraded_nic_slows_pp_sends_by_its_factor() -> None:
    """PP 2, no DP: a NIC of stage 0 degraded by 2.5; every activation out of and gradient into stage 0
    crosses it alone, so each PP transfer takes 2.5 x bytes / C (latency apart)."""
    workload, cluster = _nic_case(2, 1)
    log = TransferLog()
    Engine(workload, cluster, CAL, faults=Faults(degraded=[("nic", 6, 2.5)]), probes=(log,)).run()
    sends = [t for t in log.transfers if t.kind == "pp"]
    assert len(sends) == 2 * 4
    for send in sends:
        assert send.end_s - send.start_s == pytest.approx(2.5 * workload.pp_bytes_per_gpu / 50e9, rel=1e-9)


# --- (3) a failed NIC ---------------------------------------------------------------------------------


def test_failed_nic_without_a_neighbour_is_one_line() -> None:
    cluster = ClusterSpec(toy_gpu(), num_gpus=4, domain_gpus=1)
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=1)
    with pytest.raises(ConfigError) as error:
        simulate(TINY, layout, cluster=cluster, global_batch=4, seq_len=512, faults=Faults(failed=[("nic", 1)]))
    assert error.value.field == "fail_link" and "gpus_per_node=1" in str(error.value)
    assert "\n" not in str(error.value)


def test_failed_nic_reroutes_and_costs() -> None:
    """8-GPU nodes: GPU 3's NIC is down; its traffic takes NVLink to GPU 4 and shares GPU 4's NIC, so the
    stage sees half a NIC: the folded step equals that of a NIC degraded by 2, and is slower than healthy."""
    workload, cluster = _nic_case(2, 2)
    base = Engine(workload, cluster, CAL).run().step_time_s
    failed = simulate(
        EQUAL,
        workload.layout,
        cluster=cluster,
        global_batch=8,
        seq_len=4096,
        calibration=CAL,
        faults=Faults(failed=[("nic", 3)]),
    )
    halved = Engine(workload, cluster, CAL, faults=Faults(degraded=[("nic", 3, 2.0)])).run().step_time_s
    assert failed.step_time_s > base
    assert failed.step_time_s == pytest.approx(halved, rel=1e-12)
    assert failed.faults == ["fail-link nic:3"] and "fail-link nic:3" in failed.summary()
    # The route: NVLink to GPU 4 (rail 4), rail 4 to the peer node's GPU 4 + 8, NVLink to GPU 3 + 8.
    path = fault_path(cluster, 3, 11, frozenset({3}))
    assert path[:2] == [(("gpu", 3), ("nvswitch", 0)), (("nvswitch", 0), ("gpu", 4))]
    assert path[-2:] == [(("gpu", 12), ("nvswitch", 1)), (("nvswitch", 1), ("gpu", 11))]
    assert fault_path(cluster, 2, 10, frozenset({3})) == gpu_path(cluster, 2, 10)


# --- (4) folded == unfolded ----------------------------------------------------------------------------


def _unfolded_case(model: ModelSpec, gpus: int, n: int, pp: int, layout: str = "megascale-moe", m: int = 0):
    """m micro-batches per replica, 2 pp unless given: 1F1B's warm-up, p + 1 steady pairs and cool-down, each
    phase of a fault's effect; more only repeat the steady pair and cost the unfolded engine linearly."""
    lay = layout_preset(layout).with_(pp=pp, intra_size=n)
    cluster = cluster_preset("h800", gpus, domain_gpus=n)
    workload = StepWorkload(model, lay, gpus, n, gpus // (n * pp) * (m or 2 * pp), 512)
    assert workload.micro_batches == (m or 2 * pp)
    return workload, cluster


EXACT = [
    Faults(stragglers=[(5, 1.5)]),
    # GPU 1's NVLink: on the critical path in every case below (GPU 5's stopped slowing the 16-GPU PP 2 step, 12.119
    # ms either way, once the layer's residual adds, gradient sums and TE's norm backward bytes moved its stages' slack)
    Faults(degraded=[("nvlink", 1, 2.0)]),
    Faults(degraded=[("nic", 5, 2.0)]),
    Faults(stragglers=[(5, 1.5), (6, 1.2)], degraded=[("nvlink", 4, 2.0)]),
    Faults(degraded=[("nic", 5, 3.0), ("nvlink", 4, 2.0)]),
]


@pytest.mark.parametrize(
    "case",
    [
        (TINY, 16, 4, 4, "megascale-moe"),
        (TINY, 16, 4, 2, "megascale-moe"),
        (SMALL, 32, 8, 2, "megascale-moe"),
        (TINY, 32, 4, 4, "megatron-lm"),
    ],
    ids=lambda c: f"{c[4]}-{c[1]}gpus-pp{c[3]}",
)
@pytest.mark.parametrize("faults", EXACT, ids=lambda f: ",".join(f.describe()))
def test_folded_equals_unfolded_with_faults(case, faults: Faults) -> None:
    """Faults within one stage of one replica: every member waits for the slow one at each collective
    and the other replicas' stages at each DP bucket (a ring collective: tests/scenarios/test_dp_ring.py), so the
    folded slowest-member view is exact."""
    workload, cluster = _unfolded_case(*case)
    folded = Engine(workload, cluster, SCENARIO_CALIBRATION, faults=faults).run()
    unfolded = Engine(workload, cluster, SCENARIO_CALIBRATION, placement="unfolded", faults=faults).run()
    assert folded.step_time_s > Engine(workload, cluster, SCENARIO_CALIBRATION).run().step_time_s
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)


def test_failed_nic_folded_vs_unfolded() -> None:
    """Exact without DP; with DP (and rerouted traffic that also crosses NVLink ports and the receiving
    proxy's NIC, which the folded view does not charge) within 0.1%."""
    faults = Faults(failed=[("nic", 5)])
    workload, cluster = _unfolded_case(TINY, 16, 4, 4)
    assert Engine(workload, cluster, placement="unfolded", faults=faults).run().step_time_s == pytest.approx(
        Engine(workload, cluster, faults=faults).run().step_time_s, rel=1e-9
    )
    workload, cluster = _unfolded_case(SMALL, 32, 8, 2)
    folded = Engine(workload, cluster, faults=faults).run().step_time_s
    assert Engine(workload, cluster, placement="unfolded", faults=faults).run().step_time_s == pytest.approx(
        folded, rel=FAILED_NIC_BOUND
    )


def test_where_folding_is_not_exact() -> None:
    """Faults in different replicas (a straggler in replica 0, a slow NIC in replica 1): the folded view
    charges both to every replica's stage, so the unfolded step differs, by well under 1%. On one GPU the
    same two faults are exact: the fault-free replica waits for the slow one at each DP bucket (a ring
    collective, tests/scenarios/test_dp_ring.py) instead of pushing its gradients early onto the slow NIC. Both are
    per replica, not per GPU of a stage, so 4-GPU stages show them as 8-GPU ones do (SMALL on 32 GPUs: 0
    and 0.55%, five times the CPU; here 0 and 0.21%); eight micro-batches, as with four the replicas'
    difference is a larger share of the step (SMALL: 0.94%, near the bound)."""
    workload, cluster = _unfolded_case(TINY, 16, 4, 2, m=8)
    one_gpu = Faults(stragglers=[(5, 1.5)], degraded=[("nic", 5, 3.0)])  # GPU 5: replica 0, stage 1, rank 1
    folded = Engine(workload, cluster, faults=one_gpu).run().step_time_s
    unfolded = Engine(workload, cluster, placement="unfolded", faults=one_gpu).run().step_time_s
    assert unfolded == pytest.approx(folded, rel=1e-9)
    two_replicas = Faults(stragglers=[(5, 1.5)], degraded=[("nic", 12, 3.0)])  # GPU 12: replica 1, stage 1
    folded = Engine(workload, cluster, faults=two_replicas).run().step_time_s
    unfolded = Engine(workload, cluster, placement="unfolded", faults=two_replicas).run().step_time_s
    assert 1e-6 < abs(unfolded / folded - 1) < FAULTS_IN_TWO_REPLICAS_BOUND


# --- (5) the command line -----------------------------------------------------------------------------


def test_cli_fault_flags(capsys) -> None:
    args = ["run", "--gpus", "240", "--global-batch", "30", "--json"]
    assert main(args) == 0
    healthy = json.loads(capsys.readouterr().out)
    assert healthy["faults"] == []
    assert (
        main(
            args
            + ["--straggler", "3:1.2", "--straggler", "100:1.1", "--degrade", "nvlink:17:2", "--fail-link", "nic:17"]
        )
        == 0
    )
    faulty = json.loads(capsys.readouterr().out)
    assert faulty["faults"] == ["straggler 3:1.2", "straggler 100:1.1", "degrade nvlink:17:2", "fail-link nic:17"]
    assert faulty["step_time_s"] > healthy["step_time_s"]
    assert main(args + ["--gpu-speed-spread", "0.08", "--gpu-speed-seed", "2"]) == 0
    spread = json.loads(capsys.readouterr().out)
    assert spread["faults"] == ["gpu-speed-spread 0.08 (seed 2)"] and spread["step_time_s"] > healthy["step_time_s"]


@pytest.mark.parametrize(
    "flag,value,field",
    [
        ("--straggler", "3:0.5", "straggler"),
        ("--straggler", "240:2", "straggler"),
        ("--degrade", "nic:17", "degrade"),
        ("--fail-link", "nvlink:3", "fail_link"),
        ("--gpu-speed-spread", "-0.1", "gpu_speed_spread"),
        ("--gpu-speed-spread", "inf", "gpu_speed_spread"),
    ],
)
def test_cli_bad_fault_exits_2(capsys, flag: str, value: str, field: str) -> None:
    assert main(["run", "--gpus", "240", "--global-batch", "30", flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"moesim: error: {field}: ")


def test_carried_nics_where_replicas_share_a_node() -> None:
    """n 1, CP 2, PP 2, DP 4 on two 8-GPU nodes: a replica's stage is 2 GPUs, GPU = (replica x 2 + stage) x 2 + rank,
    replicas 0 and 1 in node 0. PP sends stay in their node; DP ring (stage 1, rank 1) = GPUs 3, 7, 11, 15: 7 -> 11
    leaves node 0 by rail 3's NIC (GPU 3, PXN), 15 -> 3 lands on GPU 3's NIC; GPU 7's NIC carries nothing, and a
    fault on it costs nothing in either engine, where the folded view once charged it to every stage 1's NIC."""
    ranks = RankMap(pp=2, dp=4, n=1, cp=2, ep=1, etp=1, gpus_per_node=8)
    cluster = cluster_preset("h800", 16, domain_gpus=8)
    carried = carried_nics(cluster, ranks)
    assert carried[3] == {"dp_out", "dp_in"} and 7 not in carried and 6 not in carried
    assert carried_nics(cluster, RankMap(pp=2, dp=2, n=8, cp=1, ep=8, etp=1, gpus_per_node=8)) is None  # whole nodes
    idle = Faults(degraded=[("nic", 7, 16.0)])
    assert idle.stage_faults(cluster, ranks) == [StageFault()] * 2
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=1, cp=2)
    workload = StepWorkload(TINY, layout, 16, 8, 8, 512)
    healthy = Engine(workload, cluster).run().step_time_s
    assert Engine(workload, cluster, faults=idle).run().step_time_s == healthy
    assert Engine(workload, cluster, faults=idle, placement="unfolded").run().step_time_s == pytest.approx(
        healthy, rel=SHARED_NODE_BOUND
    )
