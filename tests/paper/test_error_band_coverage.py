"""The error band holds the measured value for at least 80% of the validated runs under leave-one-out (issue 41,
item 2): each run's band from the other runs of results/validation.csv (moesim validate's table)."""

from __future__ import annotations

from experiments.common.error_band import VALIDATION_CSV, leave_one_out_coverage, load_known


def test_leave_one_out_coverage_is_at_least_80_percent() -> None:
    known = load_known(VALIDATION_CSV)
    assert len(known) >= 20  # the corpus and the matched runs that ran
    inside, total = leave_one_out_coverage(known)
    assert inside / total >= 0.8, f"{inside} of {total}"
