"""ZB1P, DualPipeV and Megatron-Core's EP overlap in the engine: bubbles from the engine's own task times,
exposed EP summed task by task, and cross-node EP hidden behind the other micro-batch."""

from __future__ import annotations

import pytest

from simulator.engine.engine import Engine
from simulator.report.simulate import build_report
from tests.scenarios.test_dualpipe import FREE_NIC
from tests.scenarios.test_pipeline import CAL, GPU, SEQ_LEN, TINY
from tests.toys import SCENARIO_CALIBRATION, block_task_key, replay
from topologies.cluster import ClusterSpec, cluster_preset
from workloads.graph.step import StepWorkload
from workloads.schedules.base import BACKWARD, BACKWARD_INPUT, FORWARD, FORWARD_BACKWARD
from workloads.schedules.dualpipe import DualPipeV
from workloads.schedules.one_f_one_b import ZeroBubble1P
from workloads.schedules.pipeline_tasks import WEIGHT
from workloads.schedules.registry import bubble_zb1p_s
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec


def _run(schedule: str, pp: int, micro_batches: int, layout: str = "megascale-moe", **changes):
    lay = layout_preset(layout).with_(pp=pp, micro_batch=1, schedule=schedule, **changes)
    cluster = ClusterSpec(GPU, num_gpus=8 * pp, domain_gpus=8, **FREE_NIC)
    workload = StepWorkload(TINY, lay, cluster.num_gpus, 8, micro_batches, SEQ_LEN)
    engine = Engine(workload, cluster, CAL)
    result = engine.run()
    end = max(log.pipeline_end_s for log in result.stages)
    return workload, cluster, engine, result, max(end - log.busy_s for log in result.stages)


def _durations(workload: StepWorkload, engine: Engine) -> dict:
    kinds = (FORWARD, BACKWARD, BACKWARD_INPUT, WEIGHT, FORWARD_BACKWARD)
    return {kind: engine.task_timing(block_task_key(workload, kind)).duration_s for kind in kinds}


@pytest.mark.parametrize("pp,micro_batches", [(4, 8), (8, 16)])
def test_zb1p_engine_bubble_matches_formula_and_beats_1f1b(pp: int, micro_batches: int) -> None:
    """Equal stages, free network: the most idle stage waits what a hand replay with the engine's F, Bi and
    W gives, which is (PP - 1)(F + B - 2W) (the engine within 3%: the end stages carry the embedding and the
    head, a larger share of PP 8's 4-layer blocks), well below 1F1B's (PP - 1)(F + B)."""
    workload, cluster, engine, result, idle = _run("zb1p", pp, micro_batches)
    d = _durations(workload, engine)
    assert d[BACKWARD_INPUT] + d[WEIGHT] == pytest.approx(d[BACKWARD], rel=0.02)
    by_hand = max(replay(ZeroBubble1P(pp, micro_batches), d))
    assert by_hand == pytest.approx(bubble_zb1p_s(pp, d[FORWARD], d[BACKWARD], d[WEIGHT]), rel=1e-12)
    assert by_hand <= idle < 1.03 * by_hand
    one_f = _run("1f1b", pp, micro_batches)
    assert one_f[4] == pytest.approx((pp - 1) * (d[FORWARD] + d[BACKWARD]), rel=0.02)
    assert idle < 0.75 * one_f[4]
    assert (
        build_report(workload, cluster, result, 0.0).bubble_fraction
        < build_report(*one_f[:2], one_f[3], 0.0).bubble_fraction
    )


def test_dualpipev_engine_bubble_matches_replay() -> None:
    """PP 4 ranks (8 blocks of 4 layers), 8 micro-batches: the engine's most idle rank waits what the hand
    replay with its own half-block task times gives (2%), below DualPipe's on the same 4 ranks."""
    workload, _, engine, _, idle = _run("dualpipev", 4, 8)
    assert workload.layers_per_chunk == 4 and workload.schedule.blocks == 8
    assert idle == pytest.approx(max(replay(DualPipeV(4, 8), _durations(workload, engine))), rel=0.02)


# --- Megatron-Core EP overlap ---------------------------------------------------------------------


def test_ep_overlap_exposed_ep_is_the_sum_of_its_tasks() -> None:
    """PP 2, 2 virtual stages, 4 micro-batches, EP on the compute stream (sp-ep): each stage's exposed EP is
    the sum of its tasks' exposed EP, each timed alone; every F&B hides F + B - F&B of it, so the step's
    exposed EP drops by exactly that sum over the pairs."""
    changes = {"virtual_stages": 2, "ep_overlap": True}
    workload, _, engine, result, _ = _run("interleaved", 2, 4, "sp-ep", **changes)
    plain, _, plain_engine, plain_result, _ = _run("interleaved", 2, 4, "sp-ep", virtual_stages=2)
    for stage, (log, plain_log) in enumerate(zip(result.stages, plain_result.stages)):
        order = workload.stage_order(stage)
        ep = {task: engine.task_timing(workload.task_key(stage, task)).exposed_comm_s["ep"] for task in order}
        assert log.exposed_comm_s["ep"] == pytest.approx(sum(ep.values()), rel=1e-9)
        hidden = 0.0
        for task in order:
            if task.direction == FORWARD_BACKWARD:
                f = plain_engine.task_timing(plain.task_key(stage, task._replace(direction=FORWARD, paired=None)))
                b_task = task._replace(
                    direction=BACKWARD, micro_batch=task.paired[0], chunk=task.paired[1], paired=None
                )
                b = plain_engine.task_timing(plain.task_key(stage, b_task))
                assert ep[task] < f.exposed_comm_s["ep"] + b.exposed_comm_s["ep"]
                hidden += f.exposed_comm_s["ep"] + b.exposed_comm_s["ep"] - ep[task]
        assert hidden > 0
        assert log.exposed_comm_s["ep"] == pytest.approx(plain_log.exposed_comm_s["ep"] - hidden, rel=1e-9)


# Hidden 2,048 and expert FFN 4,096 over 1,024 tokens: layers long enough that the EP all-to-alls the combined 1F1B
# hides outweigh its extra PP sends at NCCL's 22.4 us each (at hidden 512 they do not since stop 36's send latency)
# and the host's launches of the layer's small kernels (at 512 tokens they do not once the residual adds and
# gradient sums of workloads/recipes/residual.py are launched too: 99.2 ms overlapped, 97.9 ms not).
CROSS_NODE = ModelSpec("cross", 8, 2048, 8, 2, 4096, 8, 2, 1024)


@pytest.mark.parametrize("delay_wgrad", [False, True])
def test_ep_overlap_hides_cross_node_ep(delay_wgrad: bool) -> None:
    """EP 8 over 2 nodes of 4 (NIC all-to-all), PP 2 x 2 virtual stages, 16 micro-batches (Megatron-LM's TP
    layout): the combined 1F1B exposes less EP and the step is shorter."""
    runs = []
    for changes in ({}, {"ep_overlap": True, "delay_wgrad": delay_wgrad}):
        layout = layout_preset("megatron-lm").with_(pp=2, intra_size=4, ffn="ep", ep=8, schedule="interleaved")
        layout = layout.with_(virtual_stages=2, **changes)
        workload = StepWorkload(CROSS_NODE, layout, 16, 4, 32, 1024)
        cluster = cluster_preset("h800", 16, domain_gpus=4)
        result = Engine(workload, cluster, SCENARIO_CALIBRATION).run()
        runs.append((result.step_time_s, build_report(workload, cluster, result, 0.0).exposed_comm_s["ep"]))
    (step, ep), (overlapped_step, overlapped_ep) = runs
    assert overlapped_ep < 0.9 * ep and overlapped_step < step
