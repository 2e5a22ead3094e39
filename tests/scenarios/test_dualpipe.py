"""DualPipe: schedule (workloads.schedules.base.dualpipe), op-list split and pairing (workloads.graph.dualpipe_pairs),
paired-task execution (simulator.streams.tasks lanes), the engine and memory."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from simulator.costs.gemm_efficiency import flat_gemm_table
from simulator.engine.engine import Engine
from simulator.memory.per_gpu import in_flight_micro_batches, stage_memory
from simulator.report.simulate import build_report
from tests.scenarios.test_pipeline import CAL, GPU, SEQ_LEN, SMALL, TINY
from tests.toys import block_task_key, replay
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.graph import combined_1f1b
from workloads.graph.step import StepWorkload
from workloads.ops import LayerKind
from workloads.schedules.base import BACKWARD, BACKWARD_INPUT, FORWARD, FORWARD_BACKWARD, Task
from workloads.schedules.dualpipe import DualPipe
from workloads.schedules.pipeline_tasks import WEIGHT, Block
from workloads.schedules.registry import bubble_dualpipe_s
from workloads.specs.layouts import layout_preset

FREE_NIC = {"nic_bandwidth_Bps": 1e15, "nic_efficiency": 1.0, "nic_latency_s": 1e-12}


def _replay(stages: int, micro_batches: int, durations: dict[str, float]) -> list[float]:
    """Idle time of each DualPipe stage when tasks take fixed durations and sends are free (a hand model)."""
    return replay(DualPipe(stages, micro_batches), durations)


# --- schedule -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stages,micro_batches", [(2, 4), (4, 8), (4, 12), (8, 16), (8, 20)])
def test_dualpipe_each_task_once_in_dependency_order(stages: int, micro_batches: int) -> None:
    """Every (micro-batch, direction) is forwarded once and backwarded once per stage (B, Bi or the backward
    half of an F&B), after its forward; each Bi is followed later by its W; m/2 micro-batches per direction."""
    for stage in range(stages):
        order = DualPipe(stages, micro_batches).order(stage)
        forwards, backwards, weights, position = [], [], [], {}
        for i, task in enumerate(order):
            if task.direction in (FORWARD, FORWARD_BACKWARD):
                forwards.append((task.micro_batch, task.chunk))
                position[(FORWARD, task.micro_batch, task.chunk)] = i
            if task.direction in (BACKWARD, BACKWARD_INPUT):
                backwards.append((task.micro_batch, task.chunk))
                position[(BACKWARD, task.micro_batch, task.chunk)] = i
            if task.direction == FORWARD_BACKWARD:
                backwards.append(task.paired)
                position[(BACKWARD, *task.paired)] = i
            if task.direction == WEIGHT:
                weights.append((task.micro_batch, task.chunk))
                assert position[(BACKWARD, task.micro_batch, task.chunk)] < i
        everything = {(mb, c) for mb in range(micro_batches // 2) for c in (0, 1)}
        assert sorted(forwards) == sorted(everything) and len(forwards) == len(everything)
        assert sorted(backwards) == sorted(everything) and len(backwards) == len(everything)
        assert Counter(weights) == Counter((t.micro_batch, t.chunk) for t in order if t.direction == BACKWARD_INPUT)
        assert all(position[(FORWARD, *k)] < position[(BACKWARD, *k)] for k in everything)


def test_dualpipe_stage0_of_4() -> None:
    """Rank 0 of 4, 8 micro-batches (deepseek-ai/DualPipe steps 1-8, chunk a = 0, b = 1):
    step 1 F0a F1a, step 2 F2a F0b, step 3 Bi0b W0b F1b, step 4 (F3a & B1b) (F2b & B0a),
    step 5 B2b (F3b & B1a), step 6 B3b Bi2a (zero bubble from the middle), step 7 W2a Bi3a, step 8 W3a."""
    got = []
    for t in DualPipe(4, 8).order(0):
        name = f"{t.direction}{t.micro_batch}{'ab'[t.chunk]}"
        got.append(name + (f"/{t.paired[0]}{'ab'[t.paired[1]]}" if t.paired else ""))
    assert " ".join(got) == ("F0a F1a F2a F0b Bi0b W0b F1b F&B3a/1b F&B2b/0a B2b F&B3b/1a B3b Bi2a W2a Bi3a W3a")


@pytest.mark.parametrize("stages", [4, 8, 16])
def test_dualpipe_bubble_readme_formula_unit_tasks(stages: int) -> None:
    """With F = W = 1, Bi = 1, B = Bi + W = 2 and F&B = 3 or 2.5, the most idle (middle) rank waits
    (PP/2 - 1)(F&B + B - 3W) (deepseek-ai/DualPipe README): for PP 4 and F&B 3, 1 x (3 + 2 - 3) = 2.
    The README's figure draws F = Bi = W; with other ratios the bubble differs (see the engine test)."""
    for f_and_b in (3.0, 2.5):
        idle = _replay(
            stages, 2 * stages, {FORWARD: 1, BACKWARD: 2, BACKWARD_INPUT: 1, WEIGHT: 1, FORWARD_BACKWARD: f_and_b}
        )
        assert max(idle) == pytest.approx(bubble_dualpipe_s(stages, f_and_b, 2, 1), abs=1e-12)
    assert bubble_dualpipe_s(4, 3, 2, 1) == 2.0


# --- op lists -------------------------------------------------------------------------------------


def _workload(model, layout: str, pp: int, micro_batches: int, **nic) -> tuple[StepWorkload, ClusterSpec]:
    lay = layout_preset(layout).with_(pp=pp, micro_batch=1, schedule="dualpipe")
    spec = ClusterSpec(GPU, num_gpus=8 * pp, domain_gpus=8, **nic)
    return StepWorkload(model, lay, spec.num_gpus, 8, micro_batches, SEQ_LEN), spec


def test_split_backward_partitions_the_full_backward() -> None:
    """Bi + W hold exactly the full backward's ops; W is the .wgrad GEMMs, Bi keeps valid deps."""
    workload, _ = _workload(TINY, "megascale-moe", 4, 8)
    full = workload.task_ops(block_task_key(workload, BACKWARD, False, False))
    inputs, weights = (
        workload.task_ops(block_task_key(workload, BACKWARD_INPUT, False, False)),
        workload.task_ops(block_task_key(workload, WEIGHT, False, False)),
    )
    assert len(inputs) + len(weights) == len(full)
    assert weights and all(op.name.endswith(".wgrad") and op.deps == () for op in weights)
    assert sum(op.flops for op in inputs) + sum(op.flops for op in weights) == pytest.approx(
        sum(op.flops for op in full)
    )
    assert all(dep < i for i, op in enumerate(inputs) for dep in op.deps)


def test_pair_keeps_each_list_order_and_dependencies() -> None:
    workload, _ = _workload(TINY, "megascale-moe", 4, 8)
    key = block_task_key(workload, FORWARD_BACKWARD)
    ops, lanes = workload.task_ops(key), workload.task_lanes(key)
    f_ops, b_ops = (
        workload.task_ops(block_task_key(workload, FORWARD, False, False)),
        workload.task_ops(block_task_key(workload, BACKWARD, False, False)),
    )
    assert [op.name for op, lane in zip(ops, lanes) if lane == 0] == [op.name for op in f_ops]
    assert [op.name for op, lane in zip(ops, lanes) if lane == 1] == [op.name for op in b_ops]
    assert all(lanes[d] == lanes[i] and d < i for i, op in enumerate(ops) for d in op.deps)


@pytest.mark.parametrize("layout", ["sp-ep", "megatron-lm"])
def test_paired_task_hides_communication(layout: str) -> None:
    """With collectives on the compute stream, F&B is shorter than F + B (one lane's collectives run
    beside the other's compute) but no shorter than the GPU's compute work, which the lanes share."""
    workload, cluster = _workload(TINY, layout, 4, 8)
    engine = Engine(workload, cluster, CAL)
    f = engine.task_timing(block_task_key(workload, FORWARD, False, False))
    b = engine.task_timing(block_task_key(workload, BACKWARD, False, False))
    fb = engine.task_timing(block_task_key(workload, FORWARD_BACKWARD))
    assert fb.duration_s < 0.97 * (f.duration_s + b.duration_s)
    assert fb.duration_s >= f.compute_busy_s + b.compute_busy_s - 1e-12
    assert fb.compute_busy_s == pytest.approx(f.compute_busy_s + b.compute_busy_s, rel=1e-9)
    assert sum(fb.exposed_comm_s.values()) < sum(f.exposed_comm_s.values()) + sum(b.exposed_comm_s.values())


# --- engine ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("pp,micro_batches", [(4, 8), (8, 16)])
def test_dualpipe_engine_bubble_matches_formula_and_beats_1f1b(pp: int, micro_batches: int) -> None:
    """Equal stages, free network: the most idle stage waits what a hand replay of the schedule with the
    engine's own F, B, Bi, W and F&B durations gives (within 2%: the end stages carry the embedding and
    head); its idle time and the bubble fraction are below 1F1B's (PP - 1)(F + B) for the same stages."""
    workload, cluster = _workload(TINY, "megascale-moe", pp, micro_batches, **FREE_NIC)
    engine = Engine(workload, cluster, CAL)
    result = engine.run()
    end = max(log.pipeline_end_s for log in result.stages)
    idle = max(end - log.busy_s for log in result.stages)
    d = {
        kind: engine.task_timing(block_task_key(workload, kind, False, False)).duration_s
        for kind in (FORWARD, BACKWARD, BACKWARD_INPUT, WEIGHT)
    }
    d[FORWARD_BACKWARD] = engine.task_timing(block_task_key(workload, FORWARD_BACKWARD)).duration_s
    assert d[FORWARD_BACKWARD] <= d[FORWARD] + d[BACKWARD]
    assert idle == pytest.approx(max(_replay(pp, micro_batches, d)), rel=0.02)
    # Here Bi > F > W (SAR recompute sits in Bi); the README formula, exact for F = Bi = W, bounds it.
    assert d[BACKWARD_INPUT] > d[FORWARD] > d[WEIGHT]
    assert idle < bubble_dualpipe_s(pp, d[FORWARD_BACKWARD], d[BACKWARD], d[WEIGHT])

    lay = workload.layout.with_(schedule="1f1b")
    one_f = StepWorkload(TINY, lay, cluster.num_gpus, 8, micro_batches, SEQ_LEN)
    one_f_engine = Engine(one_f, cluster, CAL)
    one_f_result = one_f_engine.run()
    one_f_end = max(log.pipeline_end_s for log in one_f_result.stages)
    one_f_idle = max(one_f_end - log.busy_s for log in one_f_result.stages)
    assert one_f_idle == pytest.approx((pp - 1) * (d[FORWARD] + d[BACKWARD]), rel=0.02)
    assert idle < 0.5 * one_f_idle
    dual_report = build_report(workload, cluster, result, 0.0)
    assert dual_report.bubble_fraction < build_report(one_f, cluster, one_f_result, 0.0).bubble_fraction


@pytest.mark.parametrize("ep_overlap", [False, True])
def test_dualpipe_memoized_engine_equals_op_level(ep_overlap: bool) -> None:
    """PP 4, DP 2, 8 micro-batches, default NIC: memoized replay equals op-level execution (with ep_overlap,
    F&B tasks in DeepSeek-V3's Fig. 4 order too)."""
    cal = CAL.with_(gemm_efficiency=flat_gemm_table(0.75), kernel_overhead_s=4e-6, host_launch_s=10e-6)
    lay = layout_preset("sp-ep").with_(pp=4, micro_batch=1, schedule="dualpipe", ep_overlap=ep_overlap)
    cluster = ClusterSpec(GPU, num_gpus=64, domain_gpus=8)
    runs = []
    for memoize in (True, False):
        workload = StepWorkload(replace(SMALL, name="small8", num_layers=8), lay, 64, 8, 16, SEQ_LEN)
        runs.append(Engine(workload, cluster, cal, memoize=memoize).run())
    assert runs[0].step_time_s == pytest.approx(runs[1].step_time_s, rel=1e-9)
    for a, b in zip(runs[0].stages, runs[1].stages):
        assert a.busy_s == pytest.approx(b.busy_s, rel=1e-9)


# --- memory and validation ------------------------------------------------------------------------


def test_dualpipe_memory_two_parameter_copies_and_pp_plus_one_activations() -> None:
    """Parameters 2x and activations PP + 1 chunks on every rank (DualPipe README table); counting the
    schedule's forwards minus backwards (an F&B holds its forward while its backward runs) agrees."""
    workload, _ = _workload(TINY, "megascale-moe", 4, 8)
    one_f = StepWorkload(TINY, workload.layout.with_(schedule="1f1b"), 32, 8, 8, SEQ_LEN)
    for stage in range(4):
        # stage s holds blocks s and pp-1-s, so stages 0 and pp-1 both hold the embedding and the head
        assert workload.stage_params_per_gpu(stage) == pytest.approx(
            tuple(2 * x for x in one_f.stage_params_per_gpu(stage))
        )
        assert in_flight_micro_batches(workload, stage) == 5
        live = peak = 0
        for task in DualPipe(4, 8).order(stage):
            live += {FORWARD: 1, BACKWARD: -1, BACKWARD_INPUT: -1}.get(task.direction, 0)
            peak = max(peak, live + (task.direction == FORWARD_BACKWARD))
        assert peak == 5
    assert stage_memory(workload, 1).params_bytes == pytest.approx(2 * stage_memory(one_f, 1).params_bytes)


@pytest.mark.parametrize("pp,micro_batches", [(3, 12), (4, 6), (4, 7)])
def test_dualpipe_rejects_bad_sizes(pp: int, micro_batches: int) -> None:
    with pytest.raises(ConfigError):
        _workload(TINY, "megascale-moe", pp, micro_batches)


@pytest.mark.parametrize("schedule", ["dualpipe", "dualpipev"])
def test_dualpipe_ep_overlap_issues_the_pair_layer_by_layer(schedule: str) -> None:
    """With ep_overlap an F&B task is one op list in DeepSeek-V3's Fig. 4 order (combined_1f1b.pair of its
    forward and its full backward), no lanes; without, the two lanes. W passes stay DualPipe's own: no
    delay_wgrad."""
    lay = layout_preset("megascale-moe").with_(pp=4, micro_batch=1, schedule=schedule, intra_op_overlap=False)
    lanes, layerwise = (StepWorkload(TINY, lay.with_(ep_overlap=on), 32, 8, 16, SEQ_LEN) for on in (False, True))
    pair = next(t for t in layerwise.stage_order(1) if t.direction == FORWARD_BACKWARD)
    key = layerwise.task_key(1, pair)
    forward = layerwise.task_ops(layerwise.task_key(1, Task(FORWARD, pair.micro_batch, pair.chunk)))
    backward = layerwise.task_ops(layerwise.task_key(1, Task(BACKWARD, *pair.paired)))
    assert layerwise.task_ops(key) == combined_1f1b.pair(forward, backward, delay_wgrad=False)
    assert layerwise.task_lanes(key) is None and lanes.task_lanes(lanes.task_key(1, pair)) is not None
    with pytest.raises(ConfigError, match="delay_wgrad"):
        StepWorkload(TINY, lay.with_(ep_overlap=True, delay_wgrad=True), 32, 8, 16, SEQ_LEN)


def test_task_tuple_defaults_keep_old_equality() -> None:
    assert Task(FORWARD, 0, 0) == (FORWARD, 0, 0, None)


def test_dualpipe_runs_uneven_blocks() -> None:
    """61 layers over 16 DualPipe blocks: blocks 15, 0 and 14 hold 3 layers, the rest 4 (the last, then the
    first blocks are short); stage 0 holds blocks 0 and 15 (6 layers), stage 1 blocks 1 and 14 (7)."""
    from workloads.specs.models import model_preset

    layout = layout_preset("deepseek-v3").with_(schedule="dualpipe")
    workload = StepWorkload(model_preset("deepseek-v3"), layout, 2048, 8, 15360, 4096)
    assert [len(r) for r in workload.block_ranges] == [3] + [4] * 13 + [3, 3]
    assert len(workload.stage_layers(0)) == 6 and len(workload.stage_layers(1)) == 7


def test_dualpipe_runs_extended_models_with_their_own_blocks() -> None:
    """Dense leading layers and shared experts under DualPipe: stage 0 and stage pp-1 both hold block 0
    (the dense one), so their tasks differ from the middle stages'; the bubble beats 1F1B's."""
    from dataclasses import replace as with_fields

    from simulator.report.simulate import simulate
    from workloads.specs.models import ModelSpec

    model = ModelSpec(
        "ext", 8, 1024, 8, 8, 1024, 8, 2, 1024, num_dense_layers=2, dense_ffn_size=2048, num_shared_experts=1
    )
    layout = with_fields(layout_preset("megascale-moe"), pp=4)
    one_f_one_b = simulate(model, layout, 32, global_batch=32, seq_len=1024)
    dual = simulate(model, layout.with_(schedule="dualpipe"), 32, global_batch=32, seq_len=1024)
    assert dual.bubble_fraction < one_f_one_b.bubble_fraction
    workload = StepWorkload(model, layout.with_(schedule="dualpipe"), 32, 8, 32, 1024)
    first = workload.task_key(0, Task(FORWARD, 0, 0))
    middle = workload.task_key(1, Task(FORWARD, 0, 0))
    assert first.blocks == (Block(True, False, (LayerKind(True, 0),) * 2),)  # block 0 holds both dense layers
    assert middle.blocks == (Block(False, False, (LayerKind(False, 0),) * 2),)
    assert workload.task_key(3, Task(FORWARD, 0, 1)) == first  # the reverse pipeline's block 0 on stage 3
