"""``moesim bench``: how fast the simulator runs on this machine, at a fixed set of points."""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import simpy

from experiments.progress import bar
from simulator.engine import Engine, EngineResult
from simulator.probes import Probe, observing
from simulator.report import simulate
from workloads.step import StepWorkload

BARE_EVENTS = 200_000  # enough timeouts for a stable per-event time (~0.1 s)


@dataclass(frozen=True)
class BenchPoint:
    """One measured configuration: a simulate() call, or the whole ``moesim reproduce all``."""

    name: str
    model: str = "paper-352b"
    layout: str = "megascale-moe"
    gpus: int = 240
    global_batch: int = 720
    memoize: bool = True  # False: every task at op level, so the per-op cost is the op engine's own

    @property
    def is_reproduce(self) -> bool:
        return self.name == "reproduce-all"


POINTS: tuple[BenchPoint, ...] = (
    BenchPoint("megascale-moe@240", gpus=240, global_batch=720),
    BenchPoint("megascale-moe@1440", gpus=1440, global_batch=720),
    BenchPoint("megascale-moe@11520", gpus=11520, global_batch=5760),
    BenchPoint("megatron-lm@240", layout="megatron-lm", gpus=240, global_batch=720),
    BenchPoint("megascale-moe@1440-oplevel", gpus=1440, global_batch=720, memoize=False),
    BenchPoint("reproduce-all"),
)


def represented_ops(workload: StepWorkload) -> int:
    """Ops the step stands for on one representative GPU per stage: every task's op list, summed."""
    total = 0
    for stage in range(workload.pp):
        for task in workload.stage_order(stage):
            total += len(workload.task_ops(workload.task_key(stage, task)))
    return total


@dataclass
class Steps(Probe):
    """What every engine run during a measurement did (reproduce runs many): its workload and result."""

    workloads: list[StepWorkload] = field(default_factory=list)
    results: list[EngineResult] = field(default_factory=list)

    def on_start(self, engine: Engine) -> None:
        self.workloads.append(engine.workload)

    def on_run(self, result: EngineResult) -> None:
        self.results.append(result)


def bare_event_s(events: int = BARE_EVENTS) -> float:
    """Seconds per event of a bare simpy loop: one process yielding ``events`` timeouts."""
    env = simpy.Environment()

    def loop():
        for _ in range(events):
            yield env.timeout(1.0)

    env.process(loop())
    start = time.perf_counter()
    env.run()
    return (time.perf_counter() - start) / events


def _action(point: BenchPoint) -> Callable[[], None]:
    if point.is_reproduce:
        from experiments.reproduce import reproduce

        def run_reproduce() -> None:
            with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
                reproduce("all", Path(out))

        return run_reproduce

    def run_point() -> None:
        simulate(point.model, point.layout, point.gpus, global_batch=point.global_batch, memoize=point.memoize)

    return run_point


def measure(point: BenchPoint, event_s: float) -> dict:
    """Time one point, then run it again under tracemalloc for its peak Python allocation."""
    action = _action(point)
    seen = Steps()
    with observing(seen):
        start = time.perf_counter()
        action()
        wall_s = time.perf_counter() - start
    # tracemalloc slows allocation-heavy code several-fold, so memory gets its own run.
    tracemalloc.start()
    try:
        action()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    simulated = sum(result.simulated_ops for result in seen.results)
    represented = sum(represented_ops(w) for w in seen.workloads)
    engine_s = sum(result.sim_wall_s for result in seen.results)
    step = seen.results[0].step_time_s if len(seen.results) == 1 else float("nan")
    return {
        "point": point.name,
        "gpus": point.gpus if not point.is_reproduce else 0,
        "steps": len(seen.results),
        "wall_s": wall_s,
        "engine_s": engine_s,
        "simulated_ops": simulated,
        "represented_ops": represented,
        "ops_per_s": simulated / wall_s,
        # the engine's own time (no workload or report building) per op it simulated, in bare events
        "cost_per_op_vs_simpy": engine_s / simulated / event_s if simulated else float("nan"),
        "cost_per_step_op_vs_simpy": engine_s / represented / event_s if represented else float("nan"),
        "peak_mem_mib": peak / 2**20,
        "step_time_s": step,
    }


def run_bench(points: list[BenchPoint] | tuple[BenchPoint, ...] | None = None, quiet: bool = False) -> pd.DataFrame:
    """Measure every point (default: POINTS) and the bare simpy event time in this process."""
    event_s = bare_event_s()
    todo = POINTS if points is None else points
    rows = []
    with bar(len(todo), "bench", quiet=quiet) as progress:
        for point in todo:
            rows.append(measure(point, event_s))
            progress.update()
    frame = pd.DataFrame(rows)
    frame.attrs["bare_event_s"] = event_s
    return frame


def format_bench(frame: pd.DataFrame) -> str:
    """The bench table as aligned text, with the bare simpy event time underneath."""
    shown = frame.copy()
    formats = {
        "wall_s": "{:.3f}",
        "engine_s": "{:.3f}",
        "ops_per_s": "{:,.0f}",
        "cost_per_op_vs_simpy": "{:.1f}",
        "cost_per_step_op_vs_simpy": "{:.2f}",
        "peak_mem_mib": "{:.1f}",
        "step_time_s": "{:.4f}",
    }
    for column, fmt in formats.items():
        shown[column] = shown[column].map(fmt.format)
    text = shown.to_string(index=False)
    event_s = frame.attrs.get("bare_event_s")
    if event_s:
        text += f"\nbare simpy timeout: {event_s * 1e6:.2f} us per event"
    return text


def main(quiet: bool = False) -> None:
    """Run the bench and print it."""
    print(format_bench(run_bench(quiet=quiet)))
