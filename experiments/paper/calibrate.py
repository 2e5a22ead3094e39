"""The one fit to the paper: the GPU-wide compute residual on Table 3's MegaScale-MoE 240-GPU row.

``python -m experiments.paper.calibrate`` prints the fitted value; ``--implied`` prints, for every validation case, the
residual at which that case alone would be predicted exactly: a diagnostic of where the missing physics lives
(a case far from the fitted value runs on a stack the one residual does not describe), never a second fit.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from experiments.common.roots import bisect_root
from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.report.simulate import simulate

FIT_TARGET_STEP_S = 21.61  # MegaScale-MoE, 240 GPUs, Table 3
RESIDUAL_RANGE = (0.2, 2.0)  # where the bisections look; step time falls as the residual rises


def fit_compute_residual(base: Calibration = DEFAULT_CALIBRATION, tolerance: float = 1e-4) -> float:
    """Bisect compute_residual until the simulated 240-GPU MegaScale-MoE step takes 21.61 s."""

    def step_s(residual: float) -> float:
        return simulate(
            "paper-352b", "megascale-moe", 240, calibration=base.with_(compute_residual=residual)
        ).step_time_s

    return _bisect(lambda residual: FIT_TARGET_STEP_S - step_s(residual), tolerance)


def _bisect(rising: Callable[[float], float], tolerance: float) -> float:
    """The root of ``rising`` (increasing in the residual), an end of RESIDUAL_RANGE when it lies outside."""
    return bisect_root(rising, *RESIDUAL_RANGE, tolerance)


def implied_residual(case_name: str, base: Calibration = DEFAULT_CALIBRATION, tolerance: float = 2e-3) -> float | None:
    """The compute_residual at which the validation case predicts its measured tokens/s per GPU (None: the case
    does not run; an end of RESIDUAL_RANGE: no residual inside it does)."""
    from experiments.validation.corpus import load_cases
    from experiments.validation.validate import case_job, case_settings
    from topologies.errors import ConfigError

    (case,) = load_cases(names=[case_name])
    try:
        job = case_job(case)
    except ConfigError:
        return None

    def error(residual: float) -> float:
        settings = case_settings(case, allow_oom=True)
        report = simulate(
            job.model, job.layout, case.gpus, calibration=base.with_(compute_residual=residual), **settings
        )
        return report.tokens_per_s_per_gpu / case.measured_tokens_per_s_per_gpu - 1

    return _bisect(error, tolerance)


def _implied_table(jobs: int | None) -> str:
    from experiments.common.parallel import default_jobs, in_order
    from experiments.validation.corpus import load_cases

    names = [case.name for case in load_cases()]
    rows = ["| case | implied compute_residual |", "|---|---|"]
    for name, value in zip(names, in_order(implied_residual, names, jobs or default_jobs()), strict=True):
        rows.append(f"| {name} | {'does not run' if value is None else f'{value:.3f}'} |")
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--implied", action="store_true", help="the residual each validation case implies")
    parser.add_argument("--jobs", type=int, default=None, help="processes for --implied (default: one per CPU)")
    args = parser.parse_args()
    print(_implied_table(args.jobs) if args.implied else f"compute_residual = {fit_compute_residual():.4f}")
