"""``moesim bench``: how fast the simulator runs on this machine, at a fixed set of points.

Each row is one measured action: a single step (simulate()), a search, the validation corpus, ``moesim reproduce
all`` or a bare simpy loop (the reference for the cost per op). ``wall_s`` is elapsed time; ``cpu_s`` is the CPU
time of this process and of the worker processes it waited for (a search with 2 jobs), which is the number to
compare on a shared machine. ``moesim bench --json`` prints one JSON object per row.

The rows that run in this process follow a warm-up row (``warm-up``: imports, the interpreter's first calls, a
small step at both timers), so the first of them does not pay what every later one finds done; the search rows
run in child processes of their own and so include a process's start-up (a dask row's ``wall_s`` leaves out its
LocalCluster's start and stop, which its ``process_wall_s`` and ``cpu_s`` keep). A step's ``cost_per_op_vs_simpy`` is
its engine's CPU time per simulated op over a bare simpy timeout's, both timed with process CPU time under the
engine's collector settings (simulator/engine/gc_budget.py); at op level, each the least of RATIO_RUNS runs, the
step's and the loop's interleaved, and ``ratio_runs`` gives each pair's ratio (the spread).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import resource
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import simpy

from simulator.engine.engine import EngineResult
from simulator.engine.gc_budget import fewer_collections
from simulator.engine.probes import Probe, observing
from simulator.report.simulate import Report, simulate
from workloads.graph.step import StepWorkload

BARE_EVENTS = 100_000  # timeouts of one bare loop (~0.2 CPU s); a row's ratio takes the least of several loops
# Runs of an op-level step and of the bare loop, interleaved, whose least CPU times the ratio divides: on the shared
# 2-core development machine (load ~1) the first pair of five runs gave 1.55-1.92, the least of five pairs 1.57-1.79:
# what is left moves with the process (its five pairs agree to a few percent).
RATIO_RUNS = 5
SEARCH = {"model": "mixtral-8x7b", "gpus": 128, "cluster": "h100", "jobs": 2}  # the search-1000 row's job
SEARCH_POINTS = 1000
MEMORY_BELOW_S = 5.0  # rows that take longer are not run again under tracemalloc (peak_mem_mib left out)
QWEN3_CASE = "bridge-qwen3-235b-a22b-h100-0256"  # Megatron-Bridge's Qwen3-235B-A22B on 256 H100 (FP8, VP 4)


@dataclass(frozen=True)
class BenchPoint:
    """One measured configuration: a simulate() call, or a named action (search, validate, reproduce, simpy)."""

    name: str
    model: str = "paper-352b"
    layout: str = "megascale-moe"
    gpus: int = 240
    global_batch: int = 720
    memoize: bool = True  # False: every task at op level, so the per-op cost is the op engine's own
    action: str = "simulate"  # simulate | qwen3 | search | search-dask-N (N workers) | validate | reproduce | simpy


POINTS: tuple[BenchPoint, ...] = (
    BenchPoint("table3-megascale-240", gpus=240),
    BenchPoint("table3-megascale-1440", gpus=1440),
    BenchPoint("table3-megatron-240", layout="megatron-lm", gpus=240),
    BenchPoint("qwen3-235b-h100-gbs2048", gpus=256, global_batch=2048, action="qwen3"),
    BenchPoint("qwen3-235b-h100-gbs8192", gpus=256, global_batch=8192, action="qwen3"),
    BenchPoint("oplevel-megascale-1440", gpus=1440, memoize=False),
    BenchPoint(f"search-{SEARCH_POINTS}", action="search"),
    BenchPoint(f"search-{SEARCH_POINTS}-dask-1", action="search-dask-1"),
    BenchPoint(f"search-{SEARCH_POINTS}-dask-2", action="search-dask-2"),
    BenchPoint("validate", action="validate"),
    BenchPoint("reproduce-all", action="reproduce"),
    BenchPoint("bare-simpy", action="simpy"),
)
SLOW = (
    "reproduce-all",
    f"search-{SEARCH_POINTS}-dask-1",
    f"search-{SEARCH_POINTS}-dask-2",
)  # left out unless asked for (--all): minutes on a laptop


def represented_ops(workload: StepWorkload) -> int:
    """Ops the step stands for on one representative GPU per stage: every task's op list, summed."""
    total = 0
    for stage in range(workload.pp):
        for task in workload.stage_order(stage):
            total += len(workload.task_ops(workload.task_key(stage, task)))
    return total


@dataclass
class Steps(Probe):
    """What every step run during a measurement was (reproduce runs many): its workload and result."""

    needs_full_run = False  # reads results only: steps may be extrapolated (simulator/fast/steady.py)
    results: list[EngineResult] = field(default_factory=list)

    def on_run(self, result: EngineResult) -> None:
        self.results.append(result)

    @property
    def workloads(self) -> list[StepWorkload]:
        return [w for w in (getattr(result, "workload", None) for result in self.results) if w is not None]


def bare_event_s(events: int = BARE_EVENTS) -> float:
    """CPU seconds per event of a bare simpy loop: one process yielding ``events`` timeouts, under the collector
    settings a step runs with (simulator/engine/gc_budget.py), as the engine's time it is compared with."""
    env = simpy.Environment()

    def loop():
        for _ in range(events):
            yield env.timeout(1.0)

    env.process(loop())
    with fewer_collections():
        start = time.process_time()
        env.run()
        return (time.process_time() - start) / events


WARM_UP = {"model": "paper-352b", "layout": "megascale-moe", "gpus": 480, "global_batch": 40}  # no row's shapes


def warm_up() -> dict:
    """The warm-up row: what the first in-process row would pay alone (the simulator's and the Qwen3 rows' imports,
    the interpreter's first calls) paid before the rows, on a step no row simulates (its task timings then
    dropped, so no row finds its own made)."""
    from simulator.engine.timer import TIMINGS

    start, cpu = time.perf_counter(), _cpu_s()
    for memoize in (True, False):
        simulate(**WARM_UP, memoize=memoize)
    bare_event_s(BARE_EVENTS // 10)
    TIMINGS.clear()
    where = f"{WARM_UP['model']} {WARM_UP['layout']} on {WARM_UP['gpus']} GPUs, global batch {WARM_UP['global_batch']}"
    note = (
        f"imports and one step ({where}) memoized and at op level before the rows, in none of them; validate and "
        "reproduce-all therefore leave out the simulator's imports, the search rows (child processes) do not"
    )
    return {"point": "warm-up", "wall_s": time.perf_counter() - start, "cpu_s": _cpu_s() - cpu, "note": note}


def _qwen3(global_batch: int) -> Report:
    """The Megatron-Bridge Qwen3-235B case at ``global_batch`` (it needs more than 80 GB: simulated anyway)."""
    from experiments.validation.corpus import CASES_DIR, load_case
    from experiments.validation.validate import case_job

    case = load_case(CASES_DIR / f"{QWEN3_CASE}.yaml")  # its file alone, not the corpus's 20 (~0.1 CPU-s of YAML)
    job = case_job(case)
    return simulate(
        job.model,
        job.layout,
        case.gpus,
        cluster=case.cluster,
        global_batch=global_batch,
        seq_len=case.seq_len,
        allow_oom=True,
    )


def search_points(dask_workers: int = 0) -> None:
    """The search-1000 job (run in a process of its own by the bench): the first SEARCH_POINTS candidates
    ranked as ``moesim search`` ranks them, every phase on SEARCH["jobs"] local processes or on a dask LocalCluster
    of ``dask_workers`` single-threaded worker processes. The cluster is started (its workers connected) before
    the search is timed and stopped after, as a search meets a running cluster (``--scheduler``); its workers
    import the simulator within the search. Prints one JSON object: points, skipped, and the seconds."""
    from experiments.common.parallel import Workers
    from experiments.search import search

    with contextlib.ExitStack() as stack:
        start = time.perf_counter()
        client = None
        if dask_workers:
            from dask.distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=dask_workers, threads_per_worker=1, processes=True, dashboard_address=None)
            stack.callback(cluster.close)
            client = stack.enter_context(Client(cluster))
            client.wait_for_workers(dask_workers)
        ready = time.perf_counter()
        lines: list[str] = []
        with Workers(SEARCH["jobs"], client) as workers:
            points, _ = search.candidates(SEARCH["model"], SEARCH["gpus"], cluster=SEARCH["cluster"], workers=workers)
            points = points[:SEARCH_POINTS]
            search.rank(points, workers=workers, progress=lines.append)
        searched = time.perf_counter()
    skipped = int(next((line.split("(")[1].split()[0] for line in lines if "skipped:" in line), "0"))
    times = {
        "cluster_start_s": ready - start,
        "search_s": searched - ready,
        "cluster_stop_s": time.perf_counter() - searched,
    }
    print(json.dumps({"points": len(points), "skipped": skipped, **times}))


def _search(dask_workers: int = 0) -> dict:
    """search-1000 in a child process, so that its CPU time and its workers' count once it has exited. A dask row's
    wall_s is the search's own on the running cluster (the child's whole wall, cluster start and stop included, is
    process_wall_s); cpu_s is the whole child's with its workers, the cluster's start and stop included."""
    import subprocess
    import sys

    command = [sys.executable, "-c", f"from experiments.cli.bench import search_points; search_points({dask_workers})"]
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    process_wall_s = time.perf_counter() - start
    result = json.loads(done.stdout.splitlines()[-1])
    count, skipped = result["points"], result["skipped"]
    short = f" (the search space has only {count})" if count < SEARCH_POINTS else ""
    where = f"a dask LocalCluster of {dask_workers} workers" if dask_workers else f"{SEARCH['jobs']} jobs"
    job = f"{SEARCH['model']} on {SEARCH['gpus']} {SEARCH['cluster']}, {where}"
    note = f"{job}: {count} points{short}, {count - skipped} simulated, {skipped} skipped by their lower bound"
    row = {"points": count, "simulated_points": count - skipped, "search_s": result["search_s"]}
    if not dask_workers:
        return {**row, "note": note + ", in a child process"}
    cluster_s = f"started in {result['cluster_start_s']:.1f} s and stopped in {result['cluster_stop_s']:.1f} s"
    return {
        **row,
        "wall_s": result["search_s"],
        "process_wall_s": process_wall_s,
        "cluster_start_s": result["cluster_start_s"],
        "cluster_stop_s": result["cluster_stop_s"],
        "note": f"{note}; wall_s: the search on the running cluster ({cluster_s}, in process_wall_s)",
    }


def _validate() -> dict:
    from experiments.validation.corpus import load_cases
    from experiments.validation.validate import run_cases

    results = run_cases(load_cases(), say=lambda line: None)
    return {"points": len(results), "note": f"{len(results)} cases"}


def _reproduce() -> dict:
    from experiments.paper.reproduce import reproduce

    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
        reproduce("all", Path(out), quiet=True)
    return {}


def _action(point: BenchPoint) -> Callable[[], dict]:
    """What to run for the point; it returns extra fields of its row."""
    if point.action == "qwen3":
        return lambda: {"report": _qwen3(point.global_batch)}
    if point.action == "search":
        return _search
    if point.action.startswith("search-dask-"):
        return lambda: _search(int(point.action.rsplit("-", 1)[1]))
    if point.action == "validate":
        return _validate
    if point.action == "reproduce":
        return _reproduce
    return lambda: {
        "report": simulate(
            point.model, point.layout, point.gpus, global_batch=point.global_batch, memoize=point.memoize
        )
    }


def _cpu_s() -> float:
    """CPU seconds of this process and of its children waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(point: BenchPoint, memory: bool = True) -> dict:
    """Time one point (wall and CPU); single steps run again under tracemalloc for their peak allocation."""
    if point.action == "simpy":
        start, cpu = time.perf_counter(), _cpu_s()
        measured_s = bare_event_s()  # this row's own timing, not the one taken at the bench's start
        return {
            "point": point.name,
            "wall_s": time.perf_counter() - start,
            "cpu_s": _cpu_s() - cpu,
            "note": f"{BARE_EVENTS} timeouts, {measured_s * 1e6:.3f} us CPU per event",
            "event_us": measured_s * 1e6,
        }
    action = _action(point)
    seen = Steps()
    with observing(seen):
        start, cpu = time.perf_counter(), _cpu_s()
        extra = action()
        wall_s, cpu_s = time.perf_counter() - start, _cpu_s() - cpu
    row: dict = {"point": point.name, "wall_s": wall_s, "cpu_s": cpu_s, "steps": len(seen.results)}
    report: Report | None = extra.pop("report", None)
    row.update(extra)
    simulated = sum(result.simulated_ops for result in seen.results)
    represented = sum(represented_ops(w) for w in seen.workloads)
    engine_s = sum(result.sim_wall_s for result in seen.results)
    row.update({"simulated_ops": simulated, "represented_ops": represented, "engine_s": engine_s})
    if report is not None:
        engine_cpu_s, event_s, ratios = _ratio_runs(point, action, seen.results, simulated)
        row.update(
            {
                "gpus": report.gpus,
                "micro_batches": report.micro_batches,
                "step_time_s": report.step_time_s,
                "steady_runs": list(getattr(report, "steady_runs", ())),
                "nic_replay": list(
                    getattr(report, "nic_replay", ())
                ),  # runs and forced share (simulator/fast/nic_replay.py)
                "engine_cpu_s": engine_cpu_s,
                # the engine's own CPU time (no workload or report building) per op it simulated, in bare events
                "cost_per_op_vs_simpy": engine_cpu_s / simulated / event_s if simulated else math.nan,
                "cost_per_represented_op_vs_simpy": engine_cpu_s / represented / event_s if represented else math.nan,
                "event_us": event_s * 1e6,
                "ratio_runs": ratios,
            }
        )
        if memory and wall_s < MEMORY_BELOW_S:  # tracemalloc slows allocation several-fold: a run of its own
            tracemalloc.start()
            try:
                action()
                row["peak_mem_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
            finally:
                tracemalloc.stop()
    return row


def _ratio_runs(
    point: BenchPoint, action: Callable[[], dict], results: list[EngineResult], simulated: int
) -> tuple[float, float, list[float]]:
    """(engine CPU s, bare event CPU s, each pair's ratio per op): the row's run and a bare loop timed right after
    it, and at op level RATIO_RUNS - 1 more pairs, the least engine and the least loop kept. Memoized steps run
    once: a second run would find its task timings made (simulator/engine/timer.py TIMINGS) and be a cheaper step.

    NOTE: the machine's speed drifts (a shared 2-core machine varies by a third between runs), so the engine and
    the loop it is divided by are timed alternately, each the same way (process CPU time, the same collector)."""
    engines, events = [sum(result.sim_cpu_s for result in results)], [bare_event_s()]
    for _ in range(RATIO_RUNS - 1 if not point.memoize else 0):
        seen = Steps()
        with observing(seen):
            action()
        engines.append(sum(result.sim_cpu_s for result in seen.results))
        events.append(bare_event_s())
    ratios = [engine / simulated / event if simulated else math.nan for engine, event in zip(engines, events)]
    return min(engines), min(events), ratios


def run_bench(
    points: list[BenchPoint] | tuple[BenchPoint, ...] | None = None,
    quiet: bool = False,
    slow: bool = False,
    say: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Measure every point (default: POINTS, without SLOW unless ``slow``), after the warm-up row where a point runs in
    this process; ``say`` gets each row as it is done."""
    from experiments.common.progress import bar

    todo = [p for p in POINTS if slow or p.name not in SLOW] if points is None else list(points)
    rows = []
    if any(point.action not in ("simpy", "search") and not point.action.startswith("search-") for point in todo):
        rows.append(warm_up())  # a row of its own, before the rows it warms
        if say is not None:
            say(rows[-1])
    with bar(len(todo), "bench", quiet=quiet) as progress:
        for point in todo:
            rows.append(measure(point))
            if say is not None:
                say(rows[-1])
            progress.update()
    return rows


COLUMNS = {
    "wall_s": "{:.3f}",
    "cpu_s": "{:.3f}",
    "engine_s": "{:.3f}",
    "engine_cpu_s": "{:.3f}",
    "step_time_s": "{:.4f}",
    "micro_batches": "{:.0f}",
    "simulated_ops": "{:,.0f}",
    "cost_per_op_vs_simpy": "{:.2f}",
    "peak_mem_mib": "{:.1f}",
}


def format_bench(rows: list[dict]) -> str:
    """The bench table as aligned text, one line per row, with each row's note underneath its table."""
    names = ["point", *COLUMNS, "steady_runs"]
    cells = [names]
    for row in rows:
        line = [row["point"]]
        for column, fmt in COLUMNS.items():
            value = row.get(column)
            line.append("" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value))
        line.append(",".join(map(str, row.get("steady_runs", []))))
        cells.append(line)
    widths = [max(len(line[i]) for line in cells) for i in range(len(names))]
    text = [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
        for line in cells
    ]
    text += [f"{row['point']}: {row['note']}" for row in rows if row.get("note")]
    return "\n".join(text)


def main(args: argparse.Namespace | None = None, quiet: bool = False) -> None:
    """Run the bench and print it (``--json``: one object per line, as each row is done)."""
    as_json = bool(args and args.json)
    points = None
    if args is not None and args.point:
        known = {point.name: point for point in POINTS}
        unknown = [name for name in args.point if name not in known]
        if unknown:
            from topologies.errors import ConfigError

            raise ConfigError("point", f"unknown {', '.join(unknown)}; one of {', '.join(known)}")
        points = [known[name] for name in args.point]
    say = (lambda row: print(json.dumps(row), flush=True)) if as_json else None
    rows = run_bench(points, quiet=quiet or as_json, slow=bool(args and args.all), say=say)
    if not as_json:
        print(format_bench(rows))
