"""experiments.common.layer_costs: where a layer's time goes (the measured causes of Table 5 and Fig. 14)."""

from __future__ import annotations

import pytest

from experiments.common.layer_costs import LayerCosts, Part, TpGap, layer_costs
from simulator.engine.timing import time_task
from simulator.report.simulate import prepare
from workloads.schedules.base import BACKWARD, FORWARD, Task

BATCH = 720


@pytest.fixture(scope="module")
def tp_tp() -> LayerCosts:
    return layer_costs("paper-352b", "tp-tp", 240, global_batch=BATCH)


def test_tp_collectives_are_eq_1_and_4_ten_times(tp_tp) -> None:
    """TP+TP moves 2bsh (n-1)/n = 67,108,864 x 7/8 = 58,720,256 B per collective: the attention's and the
    experts' all-gather and reduce-scatter forward (4); in backward SAR's two re-gathers and the four forward
    collectives transposed (6): 587,202,560 B per layer. SP+EP has no TP collective."""
    assert (tp_tp.tp_collectives, tp_tp.tp_bytes) == (10, 587_202_560)
    sp_ep = layer_costs("paper-352b", "sp-ep", 240, global_batch=BATCH)
    assert (sp_ep.tp_collectives, sp_ep.tp_bytes, sp_ep.seconds[Part.TP_COMM]) == (0, 0.0, 0.0)
    assert sp_ep.seconds[Part.SP_EP_COMM] > 0
    assert tp_tp.tp_bus_bandwidth_Bps == pytest.approx(587_202_560 / tp_tp.seconds[Part.TP_COMM], rel=1e-12)


def test_parts_add_up_to_the_serial_tasks(tp_tp) -> None:
    """Without overlap every op runs one after another on the compute stream: the parts of the mean layer, the
    GPU's waits for host launches among them, add up to the middle stage's (7 of 15) forward and backward spans
    over its 4 layers."""
    workload, cluster, _ = prepare("paper-352b", "tp-tp", 240, None, BATCH, 8192, None, True)
    spans = sum(time_task(workload, cluster, 7, Task(phase, 0, 0)).duration_s for phase in (FORWARD, BACKWARD))
    assert tp_tp.total_s == pytest.approx(spans / 4, rel=1e-9)
    assert tp_tp.seconds[Part.OTHER] == 0.0
    assert 0.0 < tp_tp.seconds[Part.HOST_WAIT] < 1e-4


def test_tp_gap_arithmetic() -> None:
    """TP+TP 10 ms (4 of them TP collectives moving 600 MB), SP+EP 8 ms: ratio 1.25; free collectives 6 / 8 =
    0.75; for 1.125 they may take 1.125 x 8 - 6 = 3 ms, i.e. 600 MB / 3 ms = 200 GB/s; for 0.7 none would do."""
    tp = LayerCosts({**dict.fromkeys(Part, 0.0), Part.TP_COMM: 4e-3, Part.GEMM: 6e-3}, 10, 600e6)
    sp = LayerCosts({**dict.fromkeys(Part, 0.0), Part.SP_EP_COMM: 1e-3, Part.GEMM: 7e-3}, 0, 0.0)
    gap = TpGap(tp, sp, 1.125)
    assert gap.ratio == pytest.approx(1.25, rel=1e-12)
    assert gap.extra_s(Part.GEMM) == pytest.approx(-1e-3, rel=1e-12)
    assert gap.without_tp_comm_ratio == pytest.approx(0.75, rel=1e-12)
    assert gap.needed_tp_comm_s == pytest.approx(3e-3, rel=1e-12)
    assert gap.needed_bus_bandwidth_Bps == pytest.approx(200e9, rel=1e-12)
    assert TpGap(tp, sp, 0.7).needed_bus_bandwidth_Bps == float("inf")
