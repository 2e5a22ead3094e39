"""Property tests over random small models, layouts and clusters (hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine, optimizer_s
from simulator.engine.probes import Probe, Transfer
from simulator.report.simulate import simulate
from simulator.streams.network import FluidNetwork
from topologies.cluster import ClusterSpec, cluster_preset
from workloads.specs.layouts import LAYOUT_PRESETS, LayoutSpec

# The paper's layouts (the others, e.g. deepseek-v3, need models with matching experts and domains).
PAPER_LAYOUTS = ("megascale-moe", "megatron-lm", "tp-tp", "sp-ep", "sp-ep-inter", "sp-ep-inter-intra")
from workloads.graph.step import StepWorkload
from workloads.specs.models import ModelSpec

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
REL = 1e-9  # floating-point slack, relative


@dataclass(frozen=True)
class Case:
    """One small configuration: everything simulate needs."""

    model: ModelSpec
    layout: LayoutSpec
    cluster: ClusterSpec
    dp: int
    global_batch: int
    seq_len: int

    def workload(self) -> StepWorkload:
        """The step workload of this case."""
        return StepWorkload(
            self.model, self.layout, self.cluster.num_gpus, self.cluster.gpus_per_node, self.global_batch, self.seq_len
        )


@st.composite
def cases(draw: st.DrawFn, dp: int | None = None) -> Case:
    """A random small model, layout and cluster that pass validation."""
    n = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    schedule = draw(st.sampled_from(["1f1b", "interleaved"])) if pp > 1 else "1f1b"
    chunks = 2 if schedule == "interleaved" else 1
    layers = pp * chunks * draw(st.integers(1, 2))
    heads = draw(st.sampled_from([8, 16]))
    model = ModelSpec(
        "prop",
        layers,
        heads * draw(st.sampled_from([32, 64])),
        heads,
        draw(st.sampled_from([1, 2, 8])),
        draw(st.sampled_from([256, 512, 1024])),
        draw(st.sampled_from([8, 16])),
        draw(st.integers(1, 4)),
        draw(st.sampled_from([1024, 8192])),
    )
    base = LAYOUT_PRESETS[draw(st.sampled_from(PAPER_LAYOUTS))]
    layout = base.with_(
        name="prop",
        intra_size=n,
        pp=pp,
        schedule=schedule,
        virtual_stages=chunks,
        recompute=draw(st.sampled_from(["none", "sar", "full"])),
        dp_overlap=draw(st.booleans()),
    )
    dp = dp or draw(st.sampled_from([1, 2, 4]))
    micro_batches = pp * draw(st.integers(1, 3))
    gpus = n * pp * dp
    per_node = 8 if gpus % 8 == 0 else n
    cluster = cluster_preset(draw(st.sampled_from(["h800", "h100", "a100", "h20"])), gpus, domain_gpus=per_node)
    return Case(model, layout, cluster, dp, dp * micro_batches, draw(st.sampled_from([256, 512, 1024])))


def run(case: Case, cluster: ClusterSpec | None = None, memoize: bool = True):
    """Simulate case (optionally on another cluster) and return the report."""
    return simulate(
        case.model,
        case.layout,
        cluster=cluster or case.cluster,
        global_batch=case.global_batch,
        seq_len=case.seq_len,
        memoize=memoize,
        allow_oom=True,
    )


SPEEDUPS = st.tuples(st.sampled_from(["nvlink", "nic", "flops"]), st.floats(1.0, 4.0))


@SETTINGS
@given(cases(), SPEEDUPS)
def test_more_bandwidth_or_flops_never_slower(case: Case, speedup: tuple[str, float]) -> None:
    what, factor = speedup
    gpu, cluster = case.cluster.gpu, case.cluster
    if what == "nvlink":
        faster = cluster.with_(gpu=replace(gpu, nvlink_bandwidth_Bps=gpu.nvlink_bandwidth_Bps * factor))
    elif what == "nic":
        faster = cluster.with_(nic_bandwidth_Bps=cluster.nic_bandwidth_Bps * factor)
    else:
        faster = cluster.with_(gpu=replace(gpu, peak_bf16_flops=gpu.peak_bf16_flops * factor))
    assert run(case, faster).step_time_s <= run(case).step_time_s * (1 + REL)


@SETTINGS
@given(cases())
def test_step_time_covers_compute_critical_path(case: Case) -> None:
    result = Engine(case.workload(), case.cluster).run()
    for log in result.stages:
        assert result.step_time_s >= log.compute_busy_s * (1 - REL)
        assert log.busy_s >= log.compute_busy_s * (1 - REL)  # a stage's tasks span at least their compute
        assert result.step_time_s >= log.busy_s * (1 - REL)


class CapacityCheck(Probe):
    """After every rate assignment: no link carries more than its capacity."""

    def __init__(self) -> None:
        self.checks = 0
        self.moved = 0.0  # bytes of the PP sends and DP buckets that landed

    def on_link_rates(self, network: FluidNetwork) -> None:
        self.checks += 1
        for link, load in network.link_loads_Bps().items():
            assert load <= network.capacities_Bps[link] * (1 + REL), (link, load)

    def on_transfer(self, transfer: Transfer) -> None:
        self.moved += transfer.nbytes


@SETTINGS
@given(cases(), st.booleans())
def test_links_never_over_capacity_and_bytes_balance(case: Case, memoize: bool) -> None:
    check = CapacityCheck()
    result = Engine(case.workload(), case.cluster, memoize=memoize, probes=(check,)).run()
    assert check.checks or case.workload().pp == 1  # PP sends always use the network
    # Every PP send and DP bucket leaves over the sender's NVLink port or NIC (a PXN detour over both: NVLink to
    # the GPU on the destination's rail, then its NIC) and lands over the receiver's: each kind balances.
    sent = {kind: sum(v for (k, _), v in result.network_bytes.items() if k == kind) for kind in NIC_AND_PORT}
    assert sent["nic_out"] == pytest.approx(sent["nic_in"], rel=1e-12)
    assert sent["nvl_out"] == pytest.approx(sent["nvl_in"], rel=1e-12)
    assert check.moved * (1 - REL) <= sent["nic_out"] + sent["nvl_out"] <= 2 * check.moved * (1 + REL)
    # PP: every micro-batch crosses pp x chunks - 1 boundaries forward and as many backward.
    w = case.workload()
    engine = Engine(w, case.cluster)
    dp_bytes = sum(sum(engine.dp_wire_bytes(stage)) for stage in range(w.pp))
    pp_bytes = 2 * w.micro_batches * (w.pp * w.chunks - 1) * w.pp_bytes_per_gpu
    assert check.moved == pytest.approx(pp_bytes + dp_bytes, rel=1e-9)


NIC_AND_PORT = ("nic_out", "nic_in", "nvl_out", "nvl_in")


@SETTINGS
@given(cases())
def test_same_inputs_same_report(case: Case) -> None:
    first, second = run(case).to_dict(), run(case).to_dict()
    first.pop("sim_wall_s"), second.pop("sim_wall_s")
    assert first == second  # bit-identical floats


def _engine(case: Case):
    """Run the engine on case and return its raw result."""
    return Engine(case.workload(), case.cluster).run()


@SETTINGS
@given(cases(dp=1), st.sampled_from([1, 2]))
def test_doubling_dp_changes_throughput_only_by_dp_sync(case: Case, dp: int) -> None:
    """Per-replica work fixed (gpus x2, global batch x2): per-GPU tokens/s moves only by DP sync, and by the
    optimizer step, which the distributed optimizer shards over DP (ZeRO-1: each replica steps 1 / DP of the
    parameters), so a replica may gain at most what its optimizer step saves where the gradient sync hides.

    The report charges the critical stage's DP waits only; DP traffic that slows another stage's PP
    receives (shared NIC) or delays its first forward reaches the critical stage as bubble. The bound is
    therefore every stage's exposed DP time plus every stage's extra PP wait, over the step time.
    """
    small = replace(
        case,
        dp=dp,
        global_batch=case.global_batch * dp,
        cluster=case.cluster.with_(num_gpus=case.cluster.num_gpus * dp),
    )
    big = replace(
        small,
        dp=2 * dp,
        global_batch=small.global_batch * 2,
        cluster=small.cluster.with_(num_gpus=small.cluster.num_gpus * 2),
    )
    a, b = _engine(small), _engine(big)
    work_a, work_b, gpu = small.workload(), big.workload(), small.cluster.gpu
    saved_s = max(
        optimizer_s(work_a, stage, gpu, DEFAULT_CALIBRATION) - optimizer_s(work_b, stage, gpu, DEFAULT_CALIBRATION)
        for stage in range(work_a.pp)
    )
    assert saved_s >= 0.0
    assert b.step_time_s >= a.step_time_s * (1 - REL) - saved_s  # more replicas speed a replica up by no more
    dp_s = sum(log.dp_exposed_s for log in b.stages)
    pp_s = sum(max(0.0, y.pp_wait_s - x.pp_wait_s) for x, y in zip(a.stages, b.stages))
    per_gpu_a, per_gpu_b = 1 / a.step_time_s, 1 / b.step_time_s  # tokens per GPU per step are equal
    assert (per_gpu_a - per_gpu_b) / per_gpu_a <= (dp_s + pp_s) / b.step_time_s + REL
