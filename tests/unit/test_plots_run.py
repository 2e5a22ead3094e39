"""Tests for ``moesim run --plot``."""

from __future__ import annotations

import pytest

from experiments.cli.main import main
from experiments.cli.plots_run import breakdown, merge, subtract
from simulator.outputs.trace_files import simulate_with_trace


def test_plot_is_png(tmp_path) -> None:
    """--plot writes a PNG file."""
    path = tmp_path / "run.png"
    assert main(["run", "--gpus", "240", "--global-batch", "30", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_interval_helpers() -> None:
    """merge coalesces; subtract removes holes."""
    assert merge([(2, 3), (0, 1), (1, 1.5)]) == [(0, 1.5), (2, 3)]
    assert subtract([(0, 10)], [(1, 2), (5, 6), (9, 12)]) == [(0, 1), (2, 5), (6, 9)]


def test_breakdown_sums_to_step() -> None:
    """The stacked bar of a stage adds up to the step time (the bubble takes up the rest)."""
    run = simulate_with_trace("paper-352b", "megascale-moe", 240, global_batch=30, trace=False)
    for stage in range(run.workload.pp):
        assert sum(breakdown(run, stage).values()) == pytest.approx(run.result.step_time_s)


def test_breakdown_shows_cp_and_etp() -> None:
    """CP's ring and ETP's all-gather / reduce-scatter are their own parts, not hidden in the bubble."""
    from workloads.inputs.yaml_files import load_layout

    layout = load_layout("megascale-moe").with_(intra_size=4, cp=2, etp=2, pp=2)
    run = simulate_with_trace("mixtral-8x7b", layout, 16, global_batch=8, seq_len=4096, trace=False)
    parts = breakdown(run, 0)
    assert parts["cp"] > 0 and parts["etp"] > 0
    assert parts["etp"] == pytest.approx(run.result.stages[0].exposed_comm_s["etp"])
