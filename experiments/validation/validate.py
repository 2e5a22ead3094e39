"""``moesim validate``: simulated against measured throughput of published training runs.

The corpus is ``experiments/validation/cases/*.yaml``, one published run a file: the model, the job (moesim
layout fields or Megatron-LM arguments), the cluster preset, GPUs, global batch and sequence length, the
measured tokens/s per GPU (model TFLOP/s per GPU where published) and the source. Every case is a
prediction except one marked ``fitted`` (the calibration point, simulator/costs/calibration.py), which is shown
but kept out of the MAPE; a case that cannot run (a feature refused, out of memory) is a row with its
error message, also kept out of the MAPE, and counted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from experiments.common.args import integer
from experiments.common.error_band import mechanisms_of
from experiments.common.parallel import default_jobs, in_order
from experiments.common.paths import check_output_dir, write_csv
from experiments.common.shared_sims import sharing, short_runs, simulate
from experiments.common.stage_costs import busiest_stage
from experiments.common.unit_costs import costliest_first
from experiments.validation.case_result import MISS, CaseResult
from experiments.validation.corpus import CASES_DIR, Case, load_cases
from experiments.validation.tables import markdown, table, to_frame, to_json
from simulator.costs.calibration import DEFAULT_CALIBRATION, UNFITTED_CALIBRATION, Calibration
from simulator.report.clusters import load_cluster
from simulator.report.simulate import Report, prepare
from simulator.report.simulate import simulate as simulate_at
from topologies.errors import ConfigError
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec


class Job(NamedTuple):
    """What simulate() runs for a case, what of the recipe it does not simulate, and how to name errors."""

    model: ModelSpec
    layout: LayoutSpec
    not_simulated: tuple[str, ...]  # "--flag: reason" of recipe flags the simulator parses but does not run
    notes: tuple[str, ...]  # where the simulator runs something other than the recipe
    explain: Callable[[ConfigError], ConfigError]


def _megatron_job(case: Case) -> Job:
    """The glue to workloads.inputs.megatron: the case's Megatron-LM flags over its model (and layout, as base)."""
    try:
        from workloads.inputs.megatron import parse_megatron_args
        from workloads.inputs.megatron_args import NOT_MODELLED, NOT_SIMULATED, UNKNOWN
    except ImportError:
        raise ConfigError(
            "megatron_args", "needs the Megatron-LM argument parser (workloads/inputs/megatron.py)"
        ) from None
    job = parse_megatron_args(case.megatron_args)
    try:
        run = job.resolve(case.model, case.layout)
    except ConfigError as error:
        raise job.explain(error) from None
    for flag, given, wanted in (
        ("global_batch", run.global_batch, case.global_batch),
        ("seq_len", run.seq_len, case.seq_len),
    ):
        if given is not None and given != wanted:
            raise ConfigError(f"{case.name}:{flag}", f"{wanted} but the Megatron arguments give {given}")
    missing = tuple(
        f"{arg.flag}: {arg.reason}"
        for arg in run.ignored
        if arg.reason.startswith((NOT_SIMULATED, NOT_MODELLED, UNKNOWN))
    )
    layout = run.layout.with_(**dict(case.layout_set)) if case.layout_set else run.layout
    return Job(run.model, layout, missing, run.notes, job.explain)


def case_job(case: Case) -> Job:
    """The model and layout the case simulates (Megatron arguments resolved when it has them)."""
    if case.megatron_args:
        return _megatron_job(case)
    return Job(case.model, case.layout, (), (), lambda error: error)


def run_case(case: Case) -> CaseResult:
    """Simulate one case; a ConfigError (refused feature, out of memory, bad flags) becomes its message."""
    start = time.perf_counter()
    explain: Callable[[ConfigError], ConfigError] = lambda error: error
    try:
        job = case_job(case)
        explain = job.explain
        report = _simulate(case, job)
    except ConfigError as error:
        message = str(explain(error))
        if error.field != "memory":
            return CaseResult(case, None, message, wall_s=time.perf_counter() - start)
        # Out of memory: not a prediction (left out of the MAPE), but the step simulated anyway says whether
        # the throughput model or the memory model misses.
        report = _simulate(case, job, allow_oom=True)
        return CaseResult(case, None, message, report, job.not_simulated, job.notes, time.perf_counter() - start)
    predicted = report.tokens_per_s_per_gpu
    unfitted = _simulate(case, job, calibration=UNFITTED_CALIBRATION).tokens_per_s_per_gpu
    missed = abs(predicted / case.measured_tokens_per_s_per_gpu - 1) > MISS
    costs = _stage_costs(case, job) if missed else ""
    mechanisms = mechanisms_of(job.model, job.layout, load_cluster(case.cluster, case.gpus).gpu.name)
    wall_s = time.perf_counter() - start
    return CaseResult(case, predicted, "", report, job.not_simulated, job.notes, wall_s, unfitted, costs, mechanisms)


def _stage_costs(case: Case, job: Job) -> str:
    """The busiest stage's micro-batch, timed alone at the fitted calibration and at residual 1."""
    sizes = (case.global_batch, case.seq_len)
    workload, cluster, _ = prepare(job.model, job.layout, case.gpus, case.cluster, *sizes, None, True)
    fitted = busiest_stage(workload, cluster, DEFAULT_CALIBRATION)
    at_1 = busiest_stage(workload, cluster, UNFITTED_CALIBRATION)
    return (
        f"Where one micro-batch of the busiest stage goes (stage {fitted.stage}: its share of every kind of task "
        f"the stage runs, through every chunk it holds, each timed alone, experiments/common/stage_costs.py): "
        f"{fitted.phrase()}; at residual 1 "
        f"(stage {at_1.stage}): {at_1.phrase()}"
    )


def case_settings(case: Case, allow_oom: bool = False) -> dict[str, Any]:
    """The simulate() keywords of a case beside its model, layout and GPUs."""
    return {"cluster": case.cluster, "global_batch": case.global_batch, "seq_len": case.seq_len, "allow_oom": allow_oom}


def _simulate(case: Case, job: Job, allow_oom: bool = False, calibration: Calibration | None = None) -> Report:
    if calibration is not None:  # not a shared point: the reproductions simulate at the fitted calibration only
        settings = case_settings(case, allow_oom)
        return simulate_at(
            job.model, job.layout, case.gpus, calibration=calibration, short_runs=short_runs(), **settings
        )
    return simulate(job.model, job.layout, case.gpus, **case_settings(case, allow_oom))


def same_step(cases: Sequence[Case]) -> list[tuple[int, ...]]:
    """The indices of ``cases`` in groups that differ only in their global batch (the same model, layout,
    cluster, GPUs and sequence length: the steady shortcut's short runs are the same, shared inside one
    ``sharing()``, simulator/fast/steady.ShortRuns), in the order of each group's first case."""
    groups: dict[Any, list[int]] = {}
    for i, case in enumerate(cases):
        try:
            job = case_job(case)
            key: Any = (job.model, job.layout, case.cluster, case.gpus, case.seq_len)
        except ConfigError:  # bad flags: a group of its own (run_case names the error)
            key = ("case", i)
        groups.setdefault(key, []).append(i)
    return [tuple(group) for group in groups.values()]


def run_together(cases: Sequence[Case]) -> list[CaseResult]:
    """Simulate ``cases`` in order in one ``sharing()`` block (a group of ``same_step``)."""
    with sharing():
        return [run_case(case) for case in cases]


def run_cases(cases: list[Case], say: Callable[[str], None] | None = None, jobs: int | None = None) -> list[CaseResult]:
    """Run every case in ``jobs`` processes (default: one per CPU; the groups of ``same_step`` are independent),
    reporting progress through ``say`` (stderr by default; with several jobs in the order the groups are taken)
    and returning the results in the cases' order."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    jobs = default_jobs() if jobs is None else jobs
    groups = same_step(cases)
    # Several processes take the costliest groups first (experiments/common/unit_costs.py); one runs them in order.
    names = [[case.name for case in (cases[i] for i in group)] for group in groups]
    order = costliest_first(names, lambda group: group) if jobs > 1 else list(range(len(groups)))
    outcomes = in_order(run_together, [[cases[i] for i in groups[g]] for g in order], jobs)
    results: list[CaseResult | None] = [None] * len(cases)
    for g in order:
        for i in groups[g]:
            say(f"validate: [{i + 1}/{len(cases)}] {cases[i].name} ({cases[i].gpus} GPUs) ...")
        for i, result in zip(groups[g], next(outcomes)):
            outcome = f"{result.error:+.1%}" if result.ran else f"not run: {result.message}"
            say(f"validate: [{i + 1}/{len(cases)}] {cases[i].name}: {outcome} ({result.wall_s:.1f} s)")
            results[i] = result
    return results


def host_row(case: Case) -> Any:
    """``--host``'s row of one case (experiments/validation/host_bound.py; None: the case does not run)."""
    from experiments.validation.host_bound import host_bound

    try:
        job = case_job(case)
    except ConfigError:
        return None
    return host_bound(case, job, case_settings(case, allow_oom=True))


def _host_rows(results: list[CaseResult], jobs: int | None) -> dict[str, Any]:
    """``--host``: experiments/validation/host_bound.py's diagnostic of every case that ran, by name."""
    ran = [r.case for r in results if r.ran]
    rows = in_order(host_row, ran, default_jobs() if jobs is None else jobs)
    return {case.name: row for case, row in zip(ran, rows, strict=True)}


def write_outputs(results: list[CaseResult], out: Path) -> str:
    """Write validation.csv and validation.png into ``out``; return the markdown section."""
    from experiments.common.plotting import parity_plot

    out.mkdir(parents=True, exist_ok=True)
    write_csv(to_frame(results), out / "validation.csv", float_format="%.6g")
    parity_plot(
        out / "validation.png",
        title="moesim validate: published training runs",
        points=[
            (r.case.model.name, r.case.measured_tokens_per_s_per_gpu, r.predicted_tokens_per_s_per_gpu)
            for r in results
            if r.ran
        ],
        xlabel="measured tokens/s per GPU",
        ylabel="predicted tokens/s per GPU",
        band=MISS,
        open_points=[
            (r.case.model.name, r.case.measured_tokens_per_s_per_gpu, r.ignoring_memory)
            for r in results
            if r.ignoring_memory is not None
        ],
        open_label="out of memory, simulated anyway",
        ghost_points=[
            (r.case.model.name, r.case.measured_tokens_per_s_per_gpu, r.unfitted_tokens_per_s_per_gpu)
            for r in results
            if r.unfitted_tokens_per_s_per_gpu is not None
        ],
        ghost_label="small, hollow: at compute_residual 1",
    )
    return markdown(results)


def run(out: Path) -> str:
    """``moesim reproduce validation``: the whole corpus into ``out``; returns the markdown section."""
    return write_outputs(run_cases(load_cases()), out)


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The ``validate`` subcommand."""
    parser = commands.add_parser("validate", help="compare predictions with published training runs")
    parser.add_argument("--json", action="store_true", help="print one JSON object: cases and mape")
    parser.add_argument("--cases", default=str(CASES_DIR), help="a case file or a folder of them (default: corpus)")
    parser.add_argument("--case", action="append", default=[], metavar="NAME", help="run only this case; repeatable")
    parser.add_argument(
        "--out",
        default=None,
        help="output folder (default results/ for the whole corpus; a --case or --cases subset writes only with --out)",
    )
    parser.add_argument("--jobs", type=integer(1), default=None, help="local worker processes (default: one per CPU)")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="after the table, where one micro-batch of each miss's busiest stage goes (also in REPRODUCTION.md)",
    )
    parser.add_argument(
        "--host",
        action="store_true",
        help="after the table, each case's host launch time and the per-kernel host cost at which it would be exact "
        "(experiments/validation/host_bound.py; a diagnostic, slow: it bisects whole simulations)",
    )


def main(args: argparse.Namespace) -> None:
    """Run the cases, print the table (or JSON) and write the CSV, the plot and the REPRODUCTION.md section."""
    from experiments.common.results_md import update_section

    subset = bool(args.case) or Path(args.cases).resolve() != CASES_DIR.resolve()
    # the corpus's table in results/ is what `moesim run` bands its predictions with: a subset does not replace it
    out = check_output_dir("out", args.out or "results") if args.out or not subset else None  # before any case runs
    results = run_cases(load_cases(args.cases, args.case), jobs=args.jobs)
    if out is not None:
        update_section(out, "validation", write_outputs(results, out))
    else:
        print("moesim: a subset of the corpus: results/ left as it is (--out DIR writes its table)", file=sys.stderr)
    hosts = _host_rows(results, args.jobs) if args.host else {}
    if args.json:
        summary = to_json(results)
        if hosts:
            from experiments.validation.host_bound import host_json

            for row in summary["cases"]:
                if hosts.get(row["case"]) is not None:
                    row["host"] = host_json(hosts[row["case"]])
        print(json.dumps(summary))
    else:
        print(table(results))
    if hosts and not args.json:
        from experiments.validation.host_bound import host_table

        print("\n" + host_table(list(hosts.values()), {r.case.name: r.error for r in results if r.ran}))
    if args.breakdown and not args.json:
        for result in results:
            if result.stage_costs:
                print(f"\n{result.case.name} ({result.error:+.1%}): {result.stage_costs}")
