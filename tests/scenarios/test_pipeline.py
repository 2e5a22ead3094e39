"""Pipeline schedules (workloads.schedules.base) and the pipeline engine (simulator.engine.engine.Engine)."""

from __future__ import annotations

from collections import Counter

import pytest

from simulator.costs.gemm_efficiency import flat_gemm_table
from simulator.engine.engine import Engine
from simulator.fast.ledger import Ledger
from simulator.report.simulate import build_report
from tests.toys import EQUAL_STAGES, block_task_key, toy_calibration, toy_gpu
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload
from workloads.schedules.base import BACKWARD, FORWARD, Task
from workloads.schedules.one_f_one_b import Interleaved, OneFOneB
from workloads.schedules.registry import SCHEDULES, bubble_fraction_1f1b, make_schedule
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

# --- schedules ------------------------------------------------------------------------------------


def test_1f1b_last_stage_alternates() -> None:
    """The last stage has no warm-up: F0 B0 F1 B1 F2 B2."""
    assert OneFOneB(4, 3).order(3) == [
        Task(FORWARD, 0, 0),
        Task(BACKWARD, 0, 0),
        Task(FORWARD, 1, 0),
        Task(BACKWARD, 1, 0),
        Task(FORWARD, 2, 0),
        Task(BACKWARD, 2, 0),
    ]


def test_1f1b_first_stage_order() -> None:
    """Stage 0 of 4 with 5 micro-batches: warm-up p - s - 1 = 3 forwards, then 2 x (F, B), then 3 B."""
    expected = (
        "F0 F1 F2 "  # warm-up
        "F3 B0 F4 B1 "  # steady state: 5 - 3 = 2 pairs
        "B2 B3 B4"
    )  # cool-down
    got = " ".join(f"{t.direction}{t.micro_batch}" for t in OneFOneB(4, 5).order(0))
    assert got == expected


@pytest.mark.parametrize("stages,micro_batches", [(4, 8), (4, 2), (15, 15), (1, 3)])
def test_1f1b_counts(stages: int, micro_batches: int) -> None:
    """Every stage runs each micro-batch once forward and once backward, backward after forward, and
    holds at most p - s micro-batches in flight (warm-up min(p - s - 1, m) + 1)."""
    for stage in range(stages):
        order = OneFOneB(stages, micro_batches).order(stage)
        assert len(order) == 2 * micro_batches
        counts = Counter((t.direction, t.micro_batch) for t in order)
        assert set(counts.values()) == {1}
        assert {mb for d, mb in counts if d == FORWARD} == set(range(micro_batches))
        assert {mb for d, mb in counts if d == BACKWARD} == set(range(micro_batches))
        position = {(t.direction, t.micro_batch): i for i, t in enumerate(order)}
        assert all(position[(FORWARD, mb)] < position[(BACKWARD, mb)] for mb in range(micro_batches))
        in_flight = peak = 0
        for task in order:
            in_flight += 1 if task.direction == FORWARD else -1
            peak = max(peak, in_flight)
        assert peak == min(stages - stage, micro_batches)


@pytest.mark.parametrize("stages,micro_batches,chunks", [(4, 8, 2), (4, 4, 3), (2, 6, 2)])
def test_interleaved_each_task_once_backward_after_forward(stages: int, micro_batches: int, chunks: int) -> None:
    """Interleaved 1F1B: every (micro-batch, chunk) once per direction; each backward after its forward;
    a micro-batch's forward visits chunks 0, 1, ... in order and its backward the reverse."""
    for stage in range(stages):
        order = Interleaved(stages, micro_batches, chunks).order(stage)
        assert len(order) == 2 * micro_batches * chunks
        everything = {(mb, c) for mb in range(micro_batches) for c in range(chunks)}
        forwards = [(t.micro_batch, t.chunk) for t in order if t.direction == FORWARD]
        backwards = [(t.micro_batch, t.chunk) for t in order if t.direction == BACKWARD]
        assert sorted(forwards) == sorted(everything) and len(set(forwards)) == len(forwards)
        assert sorted(backwards) == sorted(everything) and len(set(backwards)) == len(backwards)
        position = {(t.direction, t.micro_batch, t.chunk): i for i, t in enumerate(order)}
        for mb, c in everything:
            assert position[(FORWARD, mb, c)] < position[(BACKWARD, mb, c)]
            if c > 0:
                assert position[(FORWARD, mb, c - 1)] < position[(FORWARD, mb, c)]
                assert position[(BACKWARD, mb, c)] < position[(BACKWARD, mb, c - 1)]


def test_interleaved_first_stage_warmup() -> None:
    """p = 2, v = 2, m = 2 on stage 0: warm-up (p - 0 - 1) * 2 + (v - 1) * p = 4 forwards =
    F(mb0, c0) F(mb1, c0) F(mb0, c1) F(mb1, c1), then backwards from the last chunk."""
    order = Interleaved(2, 2, 2).order(0)
    assert order[:4] == [Task(FORWARD, 0, 0), Task(FORWARD, 1, 0), Task(FORWARD, 0, 1), Task(FORWARD, 1, 1)]
    assert order[4:] == [Task(BACKWARD, 0, 1), Task(BACKWARD, 1, 1), Task(BACKWARD, 0, 0), Task(BACKWARD, 1, 0)]


def test_stage_order_dispatch_and_bubble_formula() -> None:
    assert make_schedule("1f1b", 4, 8).order(1) == OneFOneB(4, 8).order(1)
    assert make_schedule("interleaved", 4, 8, 2).order(1) == Interleaved(4, 8, 2).order(1)
    assert set(SCHEDULES) == {"1f1b", "zb1p", "interleaved", "dualpipe", "dualpipev"}
    assert bubble_fraction_1f1b(4, 8) == pytest.approx(3 / 11, rel=1e-15)  # (p-1)/(m+p-1)
    assert bubble_fraction_1f1b(15, 48) == pytest.approx(14 / 62, rel=1e-15)


# --- engine ---------------------------------------------------------------------------------------

GPU = toy_gpu()

# Every constant spelled out (the engine tests compare the engine with itself or with task timings it
# reports, so the exact values matter less than that they are fixed here).
CAL = toy_calibration(attention_bwd_efficiency=0.4, all_to_all_efficiency=0.75)

TINY = EQUAL_STAGES
SEQ_LEN = 4096


def _workload(
    model: ModelSpec, pp: int, dp: int, micro_batches: int, layout: str = "megascale-moe", **cluster
) -> tuple[StepWorkload, ClusterSpec]:
    lay = layout_preset(layout).with_(pp=pp, micro_batch=1)
    spec = ClusterSpec(GPU, num_gpus=8 * pp * dp, domain_gpus=8, **cluster)
    return StepWorkload(model, lay, spec.num_gpus, 8, micro_batches * dp, SEQ_LEN), spec


def test_two_stage_pipeline_pp_send() -> None:
    """PP 2, one micro-batch, no DP. The critical path is
        F(stage 0) -> send -> F(stage 1) -> B(stage 1) -> send -> B(stage 0),
    and each send is the NIC latency + [b, s/n, h] BF16 bytes at the NIC rate:
        1 * 4096 / 8 * 2048 * 2 = 2,097,152 B at 50 GB/s * 1.0 = 41.94304 us, + 5 us = 46.94304 us.
    """
    workload, cluster = _workload(
        TINY, pp=2, dp=1, micro_batches=1, nic_bandwidth_Bps=50e9, nic_efficiency=1.0, nic_latency_s=5e-6
    )
    assert workload.pp_bytes_per_gpu == 2_097_152
    send_s = 5e-6 + 2_097_152 / 50e9
    assert send_s == pytest.approx(46.94304e-6, rel=1e-12)
    ledger = Ledger()
    engine = Engine(workload, cluster, CAL, probes=[ledger])
    result = engine.run()
    f0 = engine.task_timing(block_task_key(workload, FORWARD, True, False)).duration_s
    f1 = engine.task_timing(block_task_key(workload, FORWARD, False, True)).duration_s
    b1 = engine.task_timing(block_task_key(workload, BACKWARD, False, True)).duration_s
    b0 = engine.task_timing(block_task_key(workload, BACKWARD, True, False)).duration_s
    # Then stage 0's optimizer step at HBM speed (simulator/costs/optimizer_step.py; no DP, so the shard is all it
    # holds; FP32 main gradients, no FP8 weights): the gradient norm (4 B) and clip (8 B), Adam (28 B), the weights
    # back to BF16 (6 B), and the gradient buffer zeroed (4 B): 50 B per parameter in 5 launches.
    held = workload.stage_params_per_gpu(0)[0]
    optimizer_s = held * 50 / (cluster.gpu.hbm_bandwidth_Bps * CAL.memory_efficiency) + 5 * CAL.kernel_overhead_s
    assert result.step_time_s == pytest.approx(f0 + send_s + f1 + b1 + send_s + b0 + optimizer_s, rel=1e-12)
    # Each stage waits exactly one send: stage 1 for the activation, stage 0 for its gradient.
    assert [log.pp_wait_s for log in result.stages] == pytest.approx([send_s, send_s], rel=1e-9)
    assert ledger.longest_send_s == pytest.approx(send_s, rel=1e-9)  # the steady lock's reach (periodic.py)
    report = build_report(workload, cluster, result, 0.0)
    assert report.exposed_comm_s["pp"] == pytest.approx(send_s, rel=1e-9)
    assert report.exposed_comm_s["dp"] == 0.0
    # The activation went out of stage 0's NIC into stage 1's, the gradient the other way: 2,097,152 B each.
    assert result.network_bytes[("nic_out", 0)] == result.network_bytes[("nic_in", 1)] == 2_097_152
    assert result.network_bytes[("nic_out", 1)] == result.network_bytes[("nic_in", 0)] == 2_097_152


def test_a_split_pp_send_crosses_the_nic_in_eighths_then_is_gathered_on_nvlink() -> None:
    """2021-22 Megatron-LM's scatter/gather (LayoutSpec.pp_scatter_gather, SC21 Sec. 4.1): TP 8 without sequence
    parallelism sends the whole [b, s, h] = 1 x 4096 x 2048 x 2 B = 16,777,216 B from every TP rank; split, each sends
    an eighth over its NIC (2,097,152 B at 50 GB/s = 41.94304 us) and the receivers all-gather the other seven eighths
    on NVLink (14,680,064 B at the GPU's NVLink rate). The tasks are the same either way, so the step (two sends on
    its critical path, test_two_stage_pipeline_pp_send) moves by exactly twice the difference of the two sends."""
    dense = TINY.with_(name="equal-dense", num_experts=0, top_k=0, expert_ffn_size=0, dense_ffn_size=4096)
    runs = {}
    for split in (False, True):
        workload, cluster = _workload(
            dense, pp=2, dp=1, micro_batches=1, nic_bandwidth_Bps=50e9, nic_efficiency=1.0, nic_latency_s=5e-6
        )
        changes = {
            "attention": "tp",
            "ffn": "tp",
            "recompute": "none",
            "inter_op_overlap": False,
            "intra_op_overlap": False,
        }
        layout = workload.layout.with_(**changes, sequence_parallel=False, pp_scatter_gather=split)
        workload = StepWorkload(dense, layout, cluster.num_gpus, 8, 1, SEQ_LEN)
        assert (workload.pp_bytes_per_gpu, workload.pp_split) == (16_777_216, 8 if split else 1)
        runs[split] = Engine(workload, cluster, CAL).run()
    whole_s = 16_777_216 / 50e9
    split_s = 2_097_152 / 50e9 + 14_680_064 / cluster.gpu.nvlink_bandwidth_Bps
    assert runs[True].step_time_s - runs[False].step_time_s == pytest.approx(2 * (split_s - whole_s), rel=1e-9)
    assert runs[True].network_bytes[("nic_out", 0)] == 2_097_152  # an eighth of the activation left stage 0's NIC
    assert runs[True].network_bytes[("nvl_out", 1)] == 14_680_064  # the rest of it gathered on stage 1's NVLink


def test_two_stage_pipeline_sends_as_the_probes_see_them() -> None:
    """test_two_stage_pipeline_pp_send's two sends, told to a TransferLog (engine._send's callbacks): the
    activation leaves stage 0 one NIC latency (5 us) after F(0) ends and lands 41.94304 us later; the gradient
    leaves stage 1 5 us after B(1) ends. Every send is two callbacks, no process: the step's simpy events are
    its 4 task timeouts, 4 per send (latency, flow wake, flow done, arrival) and per stage its process's start
    and end, the all_of of its (no) DP buckets and its optimizer step: 4 + 2 x 4 + 2 x 4 = 20 (a process per
    send added its start and end: 24)."""
    from simulator.engine.probes import TransferLog

    workload, cluster = _workload(
        TINY, pp=2, dp=1, micro_batches=1, nic_bandwidth_Bps=50e9, nic_efficiency=1.0, nic_latency_s=5e-6
    )
    log = TransferLog()
    engine = Engine(workload, cluster, CAL, probes=[log])
    engine.run()
    f0 = engine.task_timing(block_task_key(workload, FORWARD, True, False)).duration_s
    f1 = engine.task_timing(block_task_key(workload, FORWARD, False, True)).duration_s
    b1 = engine.task_timing(block_task_key(workload, BACKWARD, False, True)).duration_s
    wire_s = 2_097_152 / 50e9
    activation, gradient = log.transfers
    assert (activation.kind, activation.src, activation.dst, activation.nbytes) == ("pp", 0, 1, 2_097_152)
    assert (activation.start_s, activation.end_s) == pytest.approx((f0 + 5e-6, f0 + 5e-6 + wire_s), rel=1e-12)
    back_s = f0 + 5e-6 + wire_s + f1 + b1 + 5e-6
    assert (gradient.src, gradient.dst) == (1, 0)
    assert (gradient.start_s, gradient.end_s) == pytest.approx((back_s, back_s + wire_s), rel=1e-12)
    assert gradient.key == (BACKWARD, 0, 0, 0)
    assert next(engine.env._eid) == 20


@pytest.mark.parametrize("micro_batches", [4, 8])
def test_1f1b_bubble_matches_formula(micro_batches: int) -> None:
    """Equal stages (8 layers each; the 8-word vocabulary makes embedding and head negligible) and a
    near-free network: the simulated bubble is (p-1)/(m+p-1) = 3/7 (m = 4) or 3/11 (m = 8) within 1%."""
    workload, cluster = _workload(
        TINY, pp=4, dp=1, micro_batches=micro_batches, nic_bandwidth_Bps=1e15, nic_efficiency=1.0, nic_latency_s=1e-12
    )
    assert workload.layers_per_chunk == 8 and workload.micro_batches == micro_batches
    report = build_report(workload, cluster, Engine(workload, cluster, CAL).run(), 0.0)
    expected = (4 - 1) / (micro_batches + 4 - 1)
    assert report.bubble_fraction == pytest.approx(expected, rel=0.01)
    assert report.bubble_fraction == pytest.approx(bubble_fraction_1f1b(4, micro_batches), rel=0.01)


SMALL = ModelSpec(
    "small",
    num_layers=4,
    hidden_size=1024,
    num_heads=8,
    num_kv_heads=2,
    expert_ffn_size=2048,
    num_experts=16,
    top_k=4,
    vocab_size=1024,
)


@pytest.mark.parametrize("layout", ["megascale-moe", "megatron-lm", "sp-ep"])
def test_memoized_engine_equals_op_level(layout: str) -> None:
    """PP 4, DP 2, 8 micro-batches, with the default NIC: replaying memoized task times gives the same
    step time as running every task at op level (to 1e-9 relative), DP traffic included."""
    cal = CAL.with_(gemm_efficiency=flat_gemm_table(0.75), kernel_overhead_s=4e-6, host_launch_s=10e-6)
    workload, cluster = _workload(SMALL, pp=4, dp=2, micro_batches=8, layout=layout)
    assert (workload.dp, workload.micro_batches) == (2, 8)
    memo = Engine(workload, cluster, cal, memoize=True).run()
    workload, cluster = _workload(SMALL, pp=4, dp=2, micro_batches=8, layout=layout)
    ops = Engine(workload, cluster, cal, memoize=False).run()
    assert memo.step_time_s == pytest.approx(ops.step_time_s, rel=1e-9)
    for a, b in zip(memo.stages, ops.stages):
        assert a.busy_s == pytest.approx(b.busy_s, rel=1e-9)
        assert a.end_s == pytest.approx(b.end_s, rel=1e-9)
    # Memoization times each of the 6 distinct tasks once; op level runs every task of every stage.
    assert memo.simulated_ops < ops.simulated_ops
