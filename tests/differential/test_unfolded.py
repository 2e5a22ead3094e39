"""The folded placement (one representative per stage, memoized) against the unfolded one (every GPU,
every flow): equal where folding is exact, within a stated bound where it is not."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import simpy

from experiments.cli.main import main
from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.engine.ranks import CP, EP, ETP, TP, Place, RankMap
from simulator.engine.unfolded import UnfoldedPlacement, unfolded_ops
from simulator.report.simulate import build_report
from tests.differential.bounds import DEGRADED_NVLINK_BOUND, SPEED_SPREAD_BOUND
from tests.toys import SCENARIO_CALIBRATION
from topologies.cluster import cluster_preset, gpu_path
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

TINY = ModelSpec("tiny", 8, 512, 8, 2, 1024, 8, 2, 1024)
SMALL = ModelSpec("small", 4, 1024, 8, 4, 2048, 8, 2, 2048)
TINY16 = replace(TINY, name="tiny16", num_experts=16)  # EP 16
TINY_DENSE = replace(TINY, name="tiny-dense", num_experts=0, top_k=0, expert_ffn_size=0, dense_ffn_size=1024)
# a hybrid (Nemotron-H's blocks): Mamba-2, attention, MoE and MLP layers, 8 Mamba heads in 4 groups
TINY_HYBRID = replace(
    TINY, name="tiny-hybrid", hybrid_pattern="M*EMM-EM", dense_ffn_size=1024, mamba_heads=8, mamba_groups=4
)

# (layout, model, gpus, gpus_per_node = intra size, pp, dp, micro-batches, extra layout changes)
CASES = [
    ("megascale-moe", TINY, 16, 4, 2, 2, 8, {}),
    ("megascale-moe", TINY, 32, 4, 4, 2, 8, {}),
    ("megascale-moe", SMALL, 32, 8, 2, 2, 2, {}),
    ("megascale-moe", TINY, 32, 4, 2, 4, 4, {}),
    ("megascale-moe", TINY, 16, 4, 2, 2, 4, {"schedule": "interleaved", "virtual_stages": 2}),
    ("megascale-moe", TINY, 16, 4, 2, 2, 4, {"dp_overlap": False, "grad_sync": "fp32-rs"}),
    ("megatron-lm", TINY, 16, 4, 2, 2, 8, {}),
    ("megatron-lm", TINY, 64, 8, 4, 2, 8, {}),
    ("tp-tp", TINY, 64, 8, 4, 2, 4, {}),
    ("sp-ep", TINY, 16, 4, 2, 2, 8, {}),
    ("sp-ep-inter", SMALL, 16, 4, 2, 2, 4, {"recompute": "full"}),
]


def _workload(layout_name, model, gpus, n, pp, dp, micro_batches, changes):
    layout = layout_preset(layout_name).with_(pp=pp, intra_size=n, **changes)
    cluster = cluster_preset("h800", gpus, domain_gpus=n)
    workload = StepWorkload(model, layout, gpus, n, dp * micro_batches, 512)
    assert (workload.dp, workload.micro_batches) == (dp, micro_batches)
    return workload, cluster


def _assert_equal(workload, cluster, folded, unfolded) -> None:
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
    a, b = build_report(workload, cluster, folded, 0.0), build_report(workload, cluster, unfolded, 0.0)
    assert b.bubble_fraction == pytest.approx(a.bubble_fraction, rel=1e-9, abs=1e-12)
    for kind, seconds in a.exposed_comm_s.items():
        assert b.exposed_comm_s[kind] == pytest.approx(seconds, rel=1e-9, abs=1e-15), kind


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[2]}gpus-pp{c[4]}-dp{c[5]}-{len(c[7])}")
def test_folded_equals_unfolded(case) -> None:
    workload, cluster = _workload(*case)
    folded = Engine(workload, cluster).run()
    unfolded = Engine(workload, cluster, placement="unfolded").run()
    _assert_equal(workload, cluster, folded, unfolded)
    assert unfolded.simulated_ops == unfolded_ops(workload)


# --- every feature --------------------------------------------------------------------------------
# (id, model, gpus, GPUs per node, global batch, layout changes, faults, NIC bytes/s, bound). Bound None:
# folding is exact, so the two agree to 1e-9. Otherwise the stated mechanism makes them differ, by at most
# the bound (relative step time), and the test checks that they do differ.
VPP2 = {"schedule": "interleaved", "virtual_stages": 2}
OVERLAP_WGRAD = {"ep_overlap": True, "delay_wgrad": True}
NIC_SLOW_Bps = 2e9  # a slow NIC, so that PP sends still run when the next task's EP flows start

TE_TP = {"inter_op_overlap": False, "intra_op_overlap": False}  # Megatron's: only userbuffers overlap
NO_SP_ASYNC = {"sequence_parallel": False, "tp_async_backward": True}

MEGATRON_ROUTER_HYBRIDEP = {
    "router_fusion": True,
    "router_aux_loss": True,
    "router_random_logits": True,
    "token_dispatcher": "flex-hybridep",
    "host_sync_per_moe_layer": True,
}
FEATURES = [
    # Hidden and attention dropout (NeMo's GPT-3): the masked bias-dropout-adds and the slower attention kernel
    (
        "dropout",
        replace(TINY, name="tiny-dropout", hidden_dropout=0.1, attention_dropout=0.1),
        16,
        4,
        8,
        {"intra_size": 4, "ep": 8},
        None,
        None,
        None,
    ),
    # A hybrid model under Megatron's TP 4 with cross-node EP: Mamba layers' TP collectives beside the MoE layers' EP.
    ("hybrid", TINY_HYBRID, 16, 4, 8, {**TE_TP, "attention": "tp", "intra_size": 4, "ep": 8}, None, None, None),
    # CP on NVLink: intra_size x cp = 4 GPUs of one node; ring hops on NVLink, DP over the replicas' NICs.
    ("cp-nvlink", TINY, 16, 4, 8, {"intra_size": 2, "cp": 2}, None, None, None),
    # CP across nodes on the same rails (intra_size = GPUs per node): each ring hop crosses one NIC, as
    # the folded representative sends its whole ring over its NIC; with one replica DP rings the CP ranks.
    ("cp-nic", TINY, 16, 4, 8, {"intra_size": 4, "cp": 2}, None, None, None),
    # ETP 2 x EP 2 inside a node of 4: expert-tensor all-gather / reduce-scatter and EP all-to-all.
    ("etp", TINY, 16, 4, 8, {"intra_size": 4, "ep": 2, "etp": 2}, None, None, None),
    # Cross-node EP over 2 nodes (DeepEP): one NIC flow to the same-rail peer, NVLink fan-out to 3 peers.
    ("ep-2-nodes", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8}, None, None, None),
    ("ep-4-nodes", TINY16, 32, 4, 8, {"intra_size": 4, "ep": 16}, None, None, None),
    # Cross-node EP with NCCL's all-to-all (the alltoall dispatcher): a NIC copy per remote routed expert.
    ("ep-2-nodes-nccl", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8, "token_dispatcher": "alltoall"}, None, None, None),
    # TE userbuffers: TP collectives fused into their GEMMs, the backward bulk ones on the comm stream.
    (
        "tp-comm-overlap",
        TINY,
        16,
        4,
        8,
        {**TE_TP, "attention": "tp", "ffn": "tp", "intra_size": 4, "recompute": "none", "tp_comm_overlap": True},
        None,
        None,
        None,
    ),
    # TP without sequence parallelism: all-reduces at the TP blocks' ends and of their input gradients (async
    # beside the wgrads), whole-sequence norms and pipeline sends
    (
        "tp-no-sp",
        TINY_DENSE,
        16,
        4,
        8,
        {"attention": "tp", "ffn": "tp", "intra_size": 4, "recompute": "none", **TE_TP, **NO_SP_ASYNC},
        None,
        None,
        None,
    ),
    # ... with 2021-22 Megatron-LM's split PP sends: a quarter of each over the NIC, then the receivers' NVLink all-gather
    (
        "tp-no-sp-scatter-gather",
        TINY_DENSE,
        16,
        4,
        8,
        {
            "attention": "tp",
            "ffn": "tp",
            "intra_size": 4,
            "recompute": "none",
            **TE_TP,
            **NO_SP_ASYNC,
            "pp_scatter_gather": True,
        },
        None,
        None,
        None,
    ),
    ("ep-node-limited", TINY16, 32, 4, 8, {"intra_size": 4, "ep": 16, "ep_max_nodes": 2}, None, None, None),
    # LoRA on a MoE model with cross-node EP: the routed experts' shared adapters reduced over expert DP
    ("lora-moe", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8, "peft": "lora"}, None, None, None),
    # LoRA on a dense model under TP 4: no weight-gradient GEMMs, the adapters' gradients alone reduced over DP 2
    (
        "lora",
        TINY_DENSE,
        16,
        4,
        8,
        {"attention": "tp", "ffn": "tp", "intra_size": 4, "recompute": "none", **TE_TP, "peft": "lora"},
        None,
        None,
        None,
    ),
    # Muon's layer-wise distributed optimizer: each GPU's share of the Newton-Schulz GEMMs after the DP sync
    ("muon", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8, "optimizer": "muon", "zero_stage": 1}, None, None, None),
    # Megatron's --first-last-layers-bf16: the last layer of an FP8 run with BF16 GEMMs and no quantization kernels
    (
        "bf16-layers",
        TINY,
        16,
        4,
        8,
        {"intra_size": 4, "ep": 8, "gemm_dtype": "fp8", "fp8_recipe": "tensorwise", "bf16_last_layers": 1},
        None,
        None,
        None,
    ),
    # --te-precision-config-file: the attention's projections in BF16, the experts' FC2 in blockwise FP8
    (
        "module-precisions",
        TINY,
        16,
        4,
        8,
        {
            "intra_size": 4,
            "ep": 8,
            "gemm_dtype": "fp8",
            "fp8_recipe": "tensorwise",
            "module_precisions": ("*.linear_qkv=bf16", "*.linear_proj=bf16", "*experts.linear_fc2=blockwise"),
        },
        None,
        None,
        None,
    ),
    ("dualpipe", TINY, 16, 4, 8, {"intra_size": 4, "schedule": "dualpipe"}, None, None, None),
    ("dualpipe-ep", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8, "schedule": "dualpipe"}, None, None, None),
    ("zb1p", TINY, 16, 4, 8, {"intra_size": 4, "schedule": "zb1p"}, None, None, None),
    # FP8 quantization kernels (workloads/recipes/fp8_quant.py) and CUDA graphs (workloads/specs/cuda_graphs.py): more ops and
    # host launch times, the same in both placements.
    (
        "fp8-quant-graphs",
        TINY,
        16,
        4,
        8,
        {"intra_size": 4, "ep": 8, "gemm_dtype": "fp8", "fp8_recipe": "tensorwise", "cuda_graph_scope": ("attn",)},
        None,
        None,
        None,
    ),
    ("zb1p-ep", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8, "schedule": "zb1p"}, None, None, None),
    # Megatron-Core's router kernels (workloads/recipes/router.py) and HybridEP's kernels and routing-map all-gather
    # (workloads/dispatchers/flex_hybridep.py), EP inside a node. NOTE: across nodes the unfolded ring sends a boundary GPU's whole
    # all-gather egress over its NIC, where the folded op spreads N/n of it over every rail as NCCL's rings do.
    ("router-hybridep", TINY, 16, 4, 8, {"intra_size": 4, "ep": 4, **MEGATRON_ROUTER_HYBRIDEP}, None, None, None),
    ("dualpipev", TINY, 16, 4, 8, {"intra_size": 4, "schedule": "dualpipev"}, None, None, None),
    ("dualpipev-ep", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8, "schedule": "dualpipev"}, None, None, None),
    # DualPipe's F&B pairs in DeepSeek-V3's Fig. 4 order (one op list, the all-to-alls on the comm stream).
    (
        "dualpipe-ep-fig4",
        TINY,
        16,
        4,
        8,
        {"intra_size": 4, "ep": 8, "schedule": "dualpipe", "ep_overlap": True},
        None,
        None,
        None,
    ),
    # Megatron-Core's combined 1F1B: steady-state F&B (and F&Bi + W with delay_wgrad) over cross-node EP.
    ("ep-overlap", TINY, 16, 4, 16, {"intra_size": 4, "ep": 8, **VPP2, "ep_overlap": True}, None, None, None),
    ("ep-overlap-wgrad", TINY, 16, 4, 16, {"intra_size": 4, "ep": 8, **VPP2, **OVERLAP_WGRAD}, None, None, None),
    # Skewed routing: the recipe charges every GPU the busiest one's load, in both placements.
    ("zipf", TINY, 16, 4, 8, {"intra_size": 4, "routing": "zipf", "zipf_exponent": 1.2}, None, None, None),
    # A straggler in replica 0 slows its EP peers in replica 1 at every EP barrier; the folded view charges
    # every replica's stage, so it is exact again.
    ("ep-straggler", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8}, Faults(stragglers=[(5, 1.5)]), None, None),
    ("cp-straggler", TINY, 16, 4, 8, {"intra_size": 4, "cp": 2}, Faults(stragglers=[(5, 1.5)]), None, None),
    # A speed spread gives all 16 GPUs their own factor (1.01-1.18 here). EP 8 spans both replicas of a stage,
    # so every member waits for the stage's slowest at each EP barrier, but between them each SP group of 4
    # waits only for its own slowest (GPU 3 at 1.179 in one, GPU 4 at 1.177 in the other), where the folded
    # representative runs all at the stage's: an upper bound, 0.02% here.
    ("ep-speed-spread", TINY, 16, 4, 8, {"intra_size": 4, "ep": 8}, Faults(speed_spread=0.2), None, SPEED_SPREAD_BOUND),
    # One replica: the gradients reduce over the CP ranks (RankMap.dp_successor), here the 2 of a node (intra 2 x
    # cp 2 = 4 GPUs per node, 2 nodes for PP 2): the ring stays on NVLink in both placements (the folded one sent
    # it over the NIC while the cluster had more than one node: -43% at this 2 GB/s NIC, issue 42).
    ("cp-one-replica", TINY, 8, 4, 8, {"intra_size": 2, "cp": 2}, None, NIC_SLOW_Bps, None),
    # CP across nodes with intra_size 2 < 4 GPUs per node: ranks 0 and 1 of the ring share a node, so
    # half its hops (and of the CP-rank DP ring's) stay on NVLink, and the others detour over a
    # neighbour's rail (PXN); the folded representative sends every hop over its own NIC. Exact: each
    # ring (CP in a task, DP per bucket) ends for all at its slowest hop, a NIC one.
    ("cp-nic-pxn", TINY, 16, 4, 8, {"intra_size": 2, "cp": 4}, None, None, None),
    # DeepEP over 4 nodes while PP sends share the NIC: max-min fairness is per flow, and each GPU sends its NIC
    # bytes as 3 EP flows (one per remote node), 3/4 of its NIC beside one PP flow; the folded representative
    # moves them as 3 flows too (FoldedPlacement._nic_flows; as one flow it got 1/2 of the NIC: 3%, issue 42).
    ("ep-4-nodes-slow-nic", TINY16, 32, 4, 8, {"intra_size": 4, "ep": 16}, None, NIC_SLOW_Bps, None),
    # A degraded NIC is one GPU's: its DP hops run slow at its own end and healthy at its ring neighbour's, two
    # flows the folded representative moves apart (FoldedPlacement.dp_transfer); as one flow over both slow ends
    # the bucket ran at the lesser of the two ends' shares where PP sends load them unevenly: +2.65% here at a
    # 2 GB/s NIC divided by 4 (issue 42's class 3). The other ranks of the stage start a task on their own PP
    # arrival, but wait for the slow one at its first collective, so the pipeline was and is exact.
    ("nic-degraded", TINY, 16, 4, 16, {"intra_size": 4}, Faults(degraded=[("nic", 5, 4.0)]), NIC_SLOW_Bps, None),
    # A degraded NVLink port slows only its own TP and CP groups; the folded view slows the whole stage's
    # NVLink (every member waits for the slowest only where one group spans the stage). 0.44%.
    (
        "cp-nvlink-faults",
        TINY,
        16,
        4,
        8,
        {"intra_size": 2, "cp": 2},
        Faults(stragglers=[(5, 1.5)], degraded=[("nvlink", 6, 2.0)]),
        None,
        DEGRADED_NVLINK_BOUND,
    ),
]


@pytest.mark.parametrize("case", FEATURES, ids=lambda c: c[0])
def test_every_feature_folded_against_unfolded(case) -> None:
    _, model, gpus, gpn, batch, changes, faults, nic_Bps, bound = case
    layout = layout_preset("megascale-moe").with_(pp=2, **changes)
    workload = StepWorkload(model, layout, gpus, gpn, batch, 512)
    cluster = cluster_preset("h800", gpus, domain_gpus=gpn, **({"nic_bandwidth_Bps": nic_Bps} if nic_Bps else {}))
    folded = Engine(workload, cluster, SCENARIO_CALIBRATION, faults=faults).run()
    unfolded = Engine(workload, cluster, SCENARIO_CALIBRATION, placement="unfolded", faults=faults).run()
    assert unfolded.simulated_ops == unfolded_ops(workload)
    if bound is None and faults:  # the unfolded log is replica 0 rank 0's, not the slowest member's
        assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
    elif bound is None:
        _assert_equal(workload, cluster, folded, unfolded)
    else:
        gap = abs(unfolded.step_time_s / folded.step_time_s - 1)
        assert 1e-6 < gap < bound


def test_dp_hop_on_nvlink_beside_task_collectives() -> None:
    """In-node EP 4 over two replicas of intra_size 2 (a node holds both; simulator/engine/ranks.py): the DP ring's hop
    between those replicas runs on NVLink and the next one detours over a neighbour's rail (PXN), where the
    folded representative sends all its DP bytes over its own NIC. A bucket ends for the whole ring at its
    slowest hop, the NIC one, as folded; the step time agrees. The NVLink hop of the buckets the forwards overlap
    (dp_overlap) shares the GPUs' NVLink with their SP and EP collectives, which the folded view keeps apart:
    replica 0 rank 0's exposed SP time grows, by under 1%."""
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=2, ep=4)
    workload = StepWorkload(TINY, layout, 16, 4, 8, 512)
    cluster = cluster_preset("h800", 16, domain_gpus=4)
    folded = Engine(workload, cluster).run()
    unfolded = Engine(workload, cluster, placement="unfolded").run()
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)
    a, b = build_report(workload, cluster, folded, 0.0), build_report(workload, cluster, unfolded, 0.0)
    assert b.exposed_comm_s["dp"] == pytest.approx(a.exposed_comm_s["dp"], rel=1e-9)
    assert 1e-6 < b.exposed_comm_s["sp"] / a.exposed_comm_s["sp"] - 1 < 0.01


def test_representative_links_carry_the_folded_bytes() -> None:
    """Cross-node EP over 2 nodes: the folded representative's NIC and NVLink bytes are GPU 0's edges."""
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=4, ep=8)
    workload = StepWorkload(TINY, layout, 16, 4, 8, 512)
    cluster = cluster_preset("h800", 16, domain_gpus=4)
    folded = Engine(workload, cluster, memoize=False).run().network_bytes
    unfolded = Engine(workload, cluster, placement="unfolded").run().network_bytes
    nic, nvl = ("gpu", 0), ("leaf", 0, 0)
    assert unfolded[(nic, nvl)] == pytest.approx(folded[("nic_out", 0)], rel=1e-12)
    assert unfolded[(nvl, nic)] == pytest.approx(folded[("nic_in", 0)], rel=1e-12)
    assert unfolded[(("gpu", 0), ("nvswitch", 0))] == pytest.approx(folded[("nvl", 0)], rel=1e-12)


# --- where each GPU sits, and its groups ----------------------------------------------------------
def test_numbering_and_groups() -> None:
    """16 GPUs, 4 per node, PP 2: replica-major, then stage, then local rank (CP rank x intra_size + TP)."""
    cp = RankMap(pp=2, dp=2, n=2, cp=2, ep=2, etp=1, gpus_per_node=4)  # intra 2 x cp 2 fills a node
    assert [cp.gpu(Place(d, s, 0)) for d in range(2) for s in range(2)] == [0, 4, 8, 12]
    assert cp.place(13) == Place(1, 1, 1)
    assert [cp.gpu(p) for p in cp.members(Place(1, 1, 1), TP)] == [12, 13]
    assert [cp.gpu(p) for p in cp.members(Place(1, 1, 1), CP)] == [13, 15]
    assert cp.dp_successor(Place(1, 1, 3)) == Place(0, 1, 3)
    ep = RankMap(pp=2, dp=2, n=4, cp=1, ep=8, etp=1, gpus_per_node=4)  # EP 8 over replicas 0 and 1
    assert [ep.gpu(p) for p in ep.members(Place(0, 0, 1), EP)] == [0, 1, 2, 3, 8, 9, 10, 11]
    shared = RankMap(pp=2, dp=4, n=2, cp=1, ep=4, etp=1, gpus_per_node=4)  # EP 4 = replicas 0 and 1 of a node
    assert [shared.gpu(Place(d, 0, 0)) for d in range(4)] == [0, 2, 8, 10] and shared.gpu(Place(0, 1, 0)) == 4
    assert [shared.gpu(p) for p in shared.members(Place(1, 0, 1), EP)] == [0, 1, 2, 3]
    etp = RankMap(pp=2, dp=2, n=4, cp=1, ep=2, etp=2, gpus_per_node=4)  # ETP fastest, then EP
    assert [etp.gpu(p) for p in etp.members(Place(0, 1, 1), ETP)] == [4, 5]
    assert [etp.gpu(p) for p in etp.members(Place(0, 1, 1), EP)] == [5, 7]


def test_deepep_flows_by_hand() -> None:
    """GPU 0 of EP 8 over 2 nodes of 4: 1/3 of its NVLink bytes to each node peer, all NIC bytes to GPU 8."""
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=4, ep=8)
    workload = StepWorkload(TINY, layout, 16, 4, 8, 512)
    engine = Engine(workload, cluster_preset("h800", 16, domain_gpus=4), placement="unfolded")
    placement = engine.placement
    assert isinstance(placement, UnfoldedPlacement)
    dispatch = next(op for op in workload.task_ops(workload.task_key(0, workload.stage_order(0)[0])) if op.nic_bytes)
    plan = placement._plan(Place(0, 0, 0), dispatch)
    assert [(route[-1][1][1], nvl, nic) for route, nvl, nic in plan] == [
        (1, 1 / 3, 0.0),
        (2, 1 / 3, 0.0),
        (3, 1 / 3, 0.0),
        (8, 0.0, 1.0),
    ]
    assert plan[-1][0] == tuple(gpu_path(engine.cluster, 0, 8))  # over rail 0's leaf


def test_a_placement_object_is_a_part() -> None:
    """Engine(placement=obj) runs on the placement's environment and faults, as the name would."""
    workload, cluster = _workload("megatron-lm", TINY, 16, 4, 2, 2, 4, {})
    faults = Faults(stragglers=[(5, 1.5)])
    placement = UnfoldedPlacement(simpy.Environment(), workload, cluster, faults)
    by_object = Engine(workload, cluster, placement=placement).run().step_time_s
    assert by_object == Engine(workload, cluster, placement="unfolded", faults=faults).run().step_time_s
    with pytest.raises(ConfigError, match="engine"):
        Engine(workload, cluster, placement="sideways")


def test_unfolded_traffic_uses_the_real_graph() -> None:
    workload, cluster = _workload("megascale-moe", TINY, 16, 4, 2, 2, 2, {})
    sent = Engine(workload, cluster, placement="unfolded").run().network_bytes
    # GPU 0 (replica 0, stage 0, rank 0) sends PP activations to GPU 4 and DP traffic to GPU 8, both on rail 0.
    for dst in (4, 8):
        for edge in gpu_path(cluster, 0, dst):
            assert sent[edge] > 0
    # ... and all its collectives over its own NVLink port.
    assert sent[(("gpu", 0), ("nvswitch", 0))] > 0


@pytest.mark.parametrize("layout_name", ["megascale-moe", "megatron-lm"])
def test_two_stages_per_node_send_over_nvlink(layout_name) -> None:
    """With 4-GPU stages on 8-GPU nodes, stages 0 and 1 share a node: PP sends take NVLink in both
    placements, and they agree."""
    layout = layout_preset(layout_name).with_(pp=2, intra_size=4)
    cluster = cluster_preset("h800", 16, domain_gpus=8)
    workload = StepWorkload(TINY, layout, 16, 8, 2 * 8, 512)
    folded = Engine(workload, cluster).run()
    assert folded.network_bytes[("nvl_out", 0)] == folded.network_bytes[("nvl_in", 1)] > 0  # PP: NVLink
    assert folded.network_bytes[("nic_out", 0)] > 0  # DP: NIC
    unfolded = Engine(workload, cluster, placement="unfolded").run()
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)


# --- the command line ---------------------------------------------------------------------------------
TINY_YAML = "name: tiny\nnum_layers: 8\nhidden_size: 512\nnum_heads: 8\nnum_kv_heads: 2\nexpert_ffn_size: 1024\n"
TINY_YAML += "num_experts: 8\ntop_k: 2\nvocab_size: 1024\n"


def test_cli_runs_the_unfolded_engine(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """16 GPUs (2 nodes of 8), SP/EP 4, PP 2, DP 2: the same step as folded; every GPU's ops simulated."""
    model = tmp_path / "tiny.yaml"
    model.write_text(TINY_YAML)
    argv = ["run", "--model", str(model), "--gpus", "16", "--global-batch", "4", "--seq-len", "512"]
    argv += ["--set", "pp=2", "--set", "intra_size=4", "--json"]
    reports = []
    for engine in ("folded", "unfolded"):
        assert main([*argv, "--engine", engine]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    folded, unfolded = reports
    assert unfolded["step_time_s"] == pytest.approx(folded["step_time_s"], rel=1e-9)
    assert unfolded["simulated_ops"] == unfolded_ops(
        StepWorkload(TINY, layout_preset("megascale-moe").with_(pp=2, intra_size=4), 16, 8, 4, 512)
    )


def test_cli_refuses_a_large_unfolded_run(capsys: pytest.CaptureFixture[str]) -> None:
    """The paper's 240-GPU step would be ~36 million unfolded ops (hours): one line, exit status 2."""
    assert main(["run", "--gpus", "240", "--global-batch", "30", "--engine", "unfolded"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moesim: error: engine: unfolded: 240 GPUs x") and err.count("\n") == 1
