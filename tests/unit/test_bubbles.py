"""The bubble split: schedule_bubble (balanced stages) + imbalance_idle = bubble_fraction; recompute_to_fit said."""

from __future__ import annotations

import json

import pytest

from experiments.cli.main import main
from simulator.report.bubbles import schedule_bubble
from simulator.report.simulate import simulate
from workloads.schedules.registry import make_schedule


@pytest.mark.parametrize("name, stages, micro_batches, chunks", [("1f1b", 4, 8, 1), ("interleaved", 4, 8, 2)])
def test_balanced_bubble_is_the_textbook_one(name: str, stages: int, micro_batches: int, chunks: int) -> None:
    """1F1B: (p - 1) / (m + p - 1); interleaved with v chunks: (p - 1) / (v m + p - 1), whatever B / F is."""
    schedule = make_schedule(name, stages, micro_batches, chunks)
    kinds = {task.direction for s in range(stages) for task in schedule.order(s)}
    bubble = schedule_bubble(schedule, {kind: 1.0 + 1.7 * (kind != "F") for kind in kinds})
    assert bubble == pytest.approx((stages - 1) / (chunks * micro_batches + stages - 1))


def test_report_splits_the_bubble(capsys: pytest.CaptureFixture[str]) -> None:
    report = simulate("paper-352b", "megascale-moe", 240, global_batch=30)
    assert report.schedule_bubble == pytest.approx(14 / 29)  # PP 15, 15 micro-batches
    assert report.schedule_bubble + report.imbalance_idle == pytest.approx(report.bubble_fraction)
    assert report.imbalance_idle >= 0
    assert report.recompute_fit == ""
    argv = ["run", "--gpus", "240", "--global-batch", "30", "--layout", "megatron-lm", "--json"]
    argv += ["--set", "recompute_to_fit=true"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["recompute_fit"].startswith("recompute_kept_layers=")
    assert {"schedule_bubble", "imbalance_idle", "bubble_fraction"} <= set(data)
