"""The bounded line along one run's steady periods (simulator/fast/run_line.py): where the run's state repeats it is
the exact extrapolation, the warm-up's periods are left out by the Marginal Standard Error Rule, and it declines a
run whose stages do not keep one pace or that holds too few periods."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.fast import run_line
from simulator.fast.bounded import relative_error
from simulator.fast.run_line import line_fields, mser_truncation
from simulator.fast.steady import fields_of, ledgered_run, resized_workload, run_step
from tests.differential.test_schedule_shortcuts import SCHEDULES, _step


def _line(name: str, pp: int, micro_batches: int, m_a: int):
    """The line to ``micro_batches`` from a run at ``m_a``, and the shortcut's own step."""
    workload, cluster = _step(SCHEDULES[name], micro_batches, pp)
    run, ledger = ledgered_run(resized_workload(workload, m_a), cluster, DEFAULT_CALIBRATION, {}, None)
    gathered_s = max(log.params_gathered_s for log in run.stages)
    return line_fields(workload, fields_of(run), ledger, m_a, gathered_s), run_step(
        workload, cluster, DEFAULT_CALIBRATION
    )


def test_mser_leaves_out_the_warm_up_by_hand() -> None:
    """Periods 5, 4, 3 then five of 1: d = 3 leaves a constant rest (statistic 0; d = 4 ties and the first wins);
    a flat series keeps all; at most half the series goes."""
    assert mser_truncation([5.0, 4.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0]) == 3
    assert mser_truncation([1.0] * 6) == 0
    assert mser_truncation([9.0, 8.0, 7.0, 6.0, 1.0, 2.0]) <= 3


@pytest.mark.parametrize("m_a", [32, 40])
def test_where_the_state_repeats_the_line_is_the_exact_step(m_a: int) -> None:
    """DualPipe at PP 2 locks (the exact path, from 16 and 18): the line along a longer run's periods gives the same
    step field by field to 1e-9."""
    fields, exact = _line("dualpipe", 2, 128, m_a)
    assert exact.bound_rel == 0.0 and fields is not None
    assert relative_error(fields, fields_of(exact.result))[0] < 1e-9


def test_the_line_declines_too_few_periods() -> None:
    """A run at DualPipe's shortest congruent count keeps fewer than MIN_PERIODS steady periods."""
    assert _line("dualpipe", 2, 128, 16)[0] is None


def test_the_line_declines_stages_out_of_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """ZB1P at PP 4 from 12 micro-batches: its stages' paces differ by more than PACE_REL (a slack still being
    spent), so the line declines it whatever the periods it keeps, and takes it once the pace rule is loosened;
    from 40 the stages keep one pace."""
    monkeypatch.setattr(run_line, "MIN_PERIODS", 1)
    assert _line("zb1p", 4, 128, 12)[0] is None
    monkeypatch.setattr(run_line, "PACE_REL", 1.0)
    assert _line("zb1p", 4, 128, 12)[0] is not None
    monkeypatch.undo()
    assert _line("zb1p", 4, 128, 40)[0] is not None
