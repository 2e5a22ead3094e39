"""The steady shortcut against the full run, for every registered schedule (with and without EP overlap): which
path it took (exact or bounded), the counts it ran, its CPU seconds and its error as simulator/fast/bounded.py
measures it. What BOUND_MEASURED_REL there comes from; run by hand (it runs every step in full too):

    python -m experiments.beyond.steady_bound [deepseek|small] [micro-batch counts, comma-separated] [schedules]

With ``--no-full`` it runs the shortcut alone, each step with no task timings made (the micro-batch table of
docs/speed.md: CPU seconds per schedule at 32 to 256 micro-batches; take the least of a few runs):

    python -m experiments.beyond.steady_bound deepseek 32,64,128,256 --no-full
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from experiments.beyond.schedules import SCHEDULES
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.engine import Engine
from simulator.engine.timer import TIMINGS
from simulator.fast.bounded import relative_error
from simulator.fast.steady import fields_of, resized_workload, run_step
from simulator.report.simulate import prepare
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

SCHEDULE_NAMES = [name for name in SCHEDULES if "delay_wgrad" not in name]
# 4 MoE layers, 16 experts: EP 16 over two 8-GPU nodes per stage (tests/differential/test_schedule_shortcuts.py)
SMALL = ModelSpec("small", 4, 1024, 8, 2, 2048, 16, 4, 1024)


def deepseek(name: str, micro_batches: int):
    """DeepSeek-V3 on 2,048 H800s in its layout with the schedule ``name`` (experiments/beyond/schedules.py)."""
    layout = layout_preset("deepseek-v3").with_(**SCHEDULES[name])
    workload, cluster, _ = prepare(
        "deepseek-v3", layout, 2048, None, 128 * micro_batches, 4096, None, True, DEFAULT_CALIBRATION
    )
    return workload, cluster


def small(name: str, micro_batches: int, pp: int = 2):
    """The 4-layer model with cross-node EP 16 at PP ``pp`` (the differential test's case)."""
    layout = layout_preset("megascale-moe").with_(pp=pp, ep=16, micro_batch=1, **SCHEDULES[name])
    workload = StepWorkload(SMALL, layout, 16 * pp, 8, micro_batches * 2, 4096)  # DP 2
    return workload, replace(cluster_preset("h100", 16 * pp), nic_bandwidth_Bps=10e9)


def row(case, name: str, micro_batches: int, full_run: bool = True) -> str:
    """One line: schedule, m, path, runs, shortcut CPU s, full CPU s, worst error and its field (without
    ``full_run``: the shortcut's alone, from no task timings made, as a step of its own would start)."""
    workload, cluster = case(name, micro_batches)
    TIMINGS.clear()
    cpu = time.process_time()
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    short_s = time.process_time() - cpu
    path = "full" if not step.runs else "bounded" if step.bound_rel else "exact"
    if not full_run:
        return f"{name} m={micro_batches} {path} runs={step.runs} cpu={short_s:.3f} step={step.result.step_time_s!r}"
    cpu = time.process_time()
    full = Engine(resized_workload(workload, micro_batches), cluster, DEFAULT_CALIBRATION).run()
    full_s = time.process_time() - cpu
    error, field = relative_error(fields_of(step.result), fields_of(full))
    step_error = abs(step.result.step_time_s / full.step_time_s - 1)
    return (
        f"{name} m={micro_batches} {path} runs={step.runs} cpu={short_s:.2f} full={full_s:.2f} "
        f"step_err={step_error:.2e} err={error:.2e} {field}"
    )


def main(argv: list[str]) -> None:
    full_run = "--no-full" not in argv
    argv = [arg for arg in argv if arg != "--no-full"]
    which = argv[0] if argv else "deepseek"
    cases = {"deepseek": deepseek, "small": small, "small4": lambda n, m: small(n, m, 4)}
    counts = [int(m) for m in argv[1].split(",")] if len(argv) > 1 else [64, 128, 256]
    names = argv[2].split(",") if len(argv) > 2 else SCHEDULE_NAMES
    if which == "small4":  # 4 layers in 8 blocks: the two-chunk schedules do not fit PP 4
        names = [name for name in names if not name.startswith(("dualpipev", "interleaved"))]
    for name in names:
        for micro_batches in counts:
            print(row(cases[which], name, micro_batches, full_run), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
