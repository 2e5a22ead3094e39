"""Short runs shared between steps (simulator/fast/steady.ShortRuns, experiments/common/shared_sims.sharing):
steps that differ only in their global batch, simulated with the shortcut's short runs shared, give the same
floats as each simulated alone (not to a tolerance: the shared run is the same engine run)."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from experiments.common import shared_sims
from simulator.fast.steady import ShortRuns, run_step
from simulator.report.simulate import prepare, simulate
from tests.toys import SCENARIO_CALIBRATION
from workloads.specs.layouts import layout_preset

# (schedule changes, GPUs, global batches): the first two try the same short count (10, 16, 18 micro-batches),
# the last another (9, 18, 17), which must not be taken for the first's
CASES = [
    ({"schedule": "1f1b"}, 32, (40, 160, 81)),
    ({"schedule": "interleaved", "virtual_stages": 2}, 32, (96, 192, 100)),
    ({"schedule": "dualpipev"}, 32, (80, 160, 163)),
]
IGNORED = ("sim_wall_s",)  # the wall time of the simulation, not an output of it


def _step(gpus: int, global_batch: int, changes: dict, short_runs: ShortRuns | None):
    layout = layout_preset("megascale-moe").with_(pp=4, **changes)
    workload, cluster, _ = prepare("mixtral-8x7b", layout, gpus, "h100", global_batch, 4096, None, True)
    return run_step(workload, cluster, SCENARIO_CALIBRATION, short_runs=short_runs)


def _fields(step) -> dict:
    result = step.result
    return {
        "step_time_s": result.step_time_s,
        "stages": [vars(log) for log in result.stages],
        "simulated_ops": result.simulated_ops,
        "network_bytes": result.network_bytes,
        "phase_spans": result.phase_spans,
        "runs": step.runs,
        "bound_rel": step.bound_rel,
    }


@pytest.mark.parametrize("changes, gpus, batches", CASES, ids=lambda v: str(v))
def test_shared_short_runs_give_the_same_floats_as_unshared_steps(changes: dict, gpus: int, batches: tuple) -> None:
    shared = ShortRuns()
    together = [_step(gpus, batch, changes, shared) for batch in batches]
    alone = [_step(gpus, batch, changes, None) for batch in batches]
    assert [_fields(step) for step in together] == [_fields(step) for step in alone]
    assert together[0].runs and set(together[0].runs) & set(together[1].runs)  # a short run was shared
    assert len(shared) < sum(len(step.runs) for step in together)  # ... and made once


def test_sharing_shares_short_runs_between_global_batches_and_reports_the_same() -> None:
    point = ("mixtral-8x7b", layout_preset("megascale-moe").with_(pp=4, schedule="1f1b"), 32)
    alone = [asdict(simulate(*point, cluster="h100", global_batch=batch)) for batch in (40, 160)]
    with shared_sims.sharing():
        together = [asdict(shared_sims.simulate(*point, cluster="h100", global_batch=b)) for b in (40, 160)]
        made = len(shared_sims.short_runs())
    for report in (*alone, *together):
        for name in IGNORED:
            report.pop(name)
    assert together == alone
    assert 0 < made < sum(len(report["steady_runs"]) for report in together)
    assert shared_sims.short_runs() is None  # forgotten after the block
