"""The validation corpus's results as a reader sees them: the MAPE per group, the JSON object, the CSV frame, the
markdown section of results/REPRODUCTION.md and the printed table, with each miss's likely causes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from experiments.validation.case_result import MISS, CaseResult
from experiments.validation.corpus import CORPUS, Case
from experiments.validation.derates import dense_and_moe, effective_derate, implied_derate
from experiments.validation.memory_check import memory_json, memory_lines, memory_markdown, memory_rows
from experiments.validation.pairs import pairs, pairs_markdown, pairs_table
from experiments.validation.release_pairs import release_pairs_json, release_pairs_lines, release_pairs_markdown
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.report.simulate import Report

if TYPE_CHECKING:  # NOTE: pandas loads when a table is written, not at start-up
    import pandas as pd


# what each group beside the headline's corpus holds (a case's ``group``)
GROUP_TEXT = {
    "matched": "published runs that change one or two settings of another case",
    "automodel": "NeMo AutoModel's PyTorch-native jobs, simulated as their Megatron-Core equivalent",
}


def _counted(results: Iterable[CaseResult], group: str) -> list[CaseResult]:
    """The cases of ``group`` that count: ran and not fitted."""
    return [r for r in results if r.counts_in(group)]


def mape(results: Iterable[CaseResult], group: str = CORPUS) -> float:
    """Mean absolute percentage error (a fraction) over the cases of ``group`` that count: ran and not fitted."""
    errors = [abs(result.error) for result in _counted(results, group)]
    return sum(errors) / len(errors) if errors else math.nan


def external(results: Iterable[CaseResult]) -> list[CaseResult]:
    """The cases not from the fitted paper: the headline (docs/accuracy.md); the paper's rows are reported beside."""
    return [r for r in results if not r.case.from_fitted_paper]


def paper_rows(results: Iterable[CaseResult]) -> list[CaseResult]:
    return [r for r in results if r.case.from_fitted_paper]


def _nan_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else value


def other_groups(results: Iterable[CaseResult]) -> list[str]:
    """The case groups beside the corpus (matched runs), in the order first met."""
    return list(dict.fromkeys(r.case.group for r in results if r.case.group != CORPUS))


def to_json(results: list[CaseResult]) -> dict[str, Any]:
    """The ``--json`` object: one entry per case and the MAPE (null when no case counts)."""
    rows = []
    for result in results:
        row = {
            "case": result.case.name,
            "measured_tokens_per_s_per_gpu": result.case.measured_tokens_per_s_per_gpu,
            "predicted_tokens_per_s_per_gpu": result.predicted_tokens_per_s_per_gpu,
            "error": result.error,
        }
        if not result.ran:
            row["message"] = result.message
        if result.report is not None:
            row["memory_verdict"] = result.report.memory_verdict.split(":")[0]
        row["implied_derate"] = implied_derate(result)
        rows.append(row)
    value = mape(results)
    groups = {group: mape(results, group) for group in other_groups(results)}
    dense, moe = dense_and_moe(results)
    return {
        "cases": rows,
        "mape": None if math.isnan(value) else value,
        "mape_external": _nan_none(mape(external(results))),
        "mape_paper": _nan_none(mape(paper_rows(results))),
        "effective_derate": effective_derate(),
        "derate_dense": dense,
        "derate_moe": moe,
        "group_mape": {group: None if math.isnan(v) else v for group, v in groups.items()},
        "pairs": [
            {
                "case": p.case,
                "baseline": p.baseline,
                "measured_speedup": p.measured_speedup,
                "predicted_speedup": p.predicted_speedup,
                "error": p.error,
            }
            for p in pairs(results)
        ],
        "release_pairs": release_pairs_json(results),
        "memory": memory_json(memory_rows(results)),
        "not_run": [r.case.name for r in results if not r.ran],
        "fitted": [r.case.name for r in results if r.case.fitted],
    }


def to_frame(results: list[CaseResult]) -> pd.DataFrame:
    """One CSV row per case: measured, predicted, error, the publisher's TFLOP/s and where the step goes."""
    rows = []
    for result in results:
        case, report = result.case, result.report
        flops = case.measured_model_tflops_per_gpu
        row = {
            "case": case.name,
            "model": case.model.name,
            "source": case.source_label,
            "cluster": case.cluster,
            "gpus": case.gpus,
            "global_batch": case.global_batch,
            "seq_len": case.seq_len,
            "measured_tokens_per_s_per_gpu": case.measured_tokens_per_s_per_gpu,
            "predicted_tokens_per_s_per_gpu": result.predicted_tokens_per_s_per_gpu,
            "error": result.error,
            "predicted_at_residual_1": result.unfitted_tokens_per_s_per_gpu,
            "error_at_residual_1": result.unfitted_error,
            "implied_derate": implied_derate(result),
            **(result.mechanisms._asdict() if result.mechanisms else {}),
            "measured_model_tflops_per_gpu": flops,
            # Megatron-LM's FLOP count (simulator/report/megatron_flops.py) over the simulated step
            "predicted_model_tflops_per_gpu": report.model_tflops_per_gpu if result.ran else None,
            "predicted_ignoring_memory": result.ignoring_memory,
            "flops_per_token_vs_published": result.flops_per_token_ratio,
            "in_mape": result.in_mape,
            "fitted": case.fitted,
            "message": result.message,
            "not_simulated": "; ".join(result.not_simulated),
            "sim_wall_s": result.wall_s,
        }
        if report is not None:
            row.update(
                {k: v for k, v in report.to_row().items() if k.startswith("exposed_")},
                step_time_s=report.step_time_s,
                pp=report.pp,
                dp=report.dp,
                micro_batches=report.micro_batches,
                bubble_fraction=report.bubble_fraction,
                mfu=report.mfu,
                peak_memory_gib=report.peak_memory_gib,
            )
        rows.append(row)
    import pandas as pd

    return pd.DataFrame(rows)


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.1%}"


def _where_time_goes(report: Report) -> str:
    """The simulated step in one phrase: time, bubble and the exposed communication over 1% of the step."""
    comm = ", ".join(
        f"{kind.upper()} {seconds * 1e3:.0f} ms"
        for kind, seconds in report.exposed_comm_s.items()
        if seconds > 0.01 * report.step_time_s
    )
    return (
        f"simulated step {report.step_time_s:.2f} s, bubble {report.bubble_fraction:.0%}, "
        f"exposed communication {comm or 'under 1% of the step'}"
    )


def _causes(r: CaseResult) -> str:
    """What the simulation of a missed (or out-of-memory) case shows, and what of its recipe is not simulated."""
    parts = [_where_time_goes(r.report)] + ([r.stage_costs] if r.stage_costs else [])
    ratio = r.flops_per_token_ratio
    if ratio is not None and abs(ratio - 1) > 0.05:
        parts.append(
            f"Megatron-LM's FLOP count of the simulated model is {ratio - 1:+.0%} off the publisher's FLOPs per "
            "token (its TFLOP/s over its tokens/s): the model or the count differs"
        )
    if r.not_simulated:
        parts.append("recipe flags not simulated: " + "; ".join(f"`{text}`" for text in r.not_simulated))
    if r.notes:
        parts.append("simulated differently: " + "; ".join(r.notes))
    if r.case.gaps:
        parts.append("known gaps: " + "; ".join(r.case.gaps))
    if r.case.notes:
        parts.append("notes: " + "; ".join(r.case.notes))
    return ". ".join(parts) + "."


def _derate_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def headline(results: list[CaseResult]) -> str:
    """The accuracy in one sentence, external cases first, the fitted paper's rows beside them (docs/accuracy.md)."""
    dense, moe = dense_and_moe(results)
    cal = DEFAULT_CALIBRATION
    return (
        f"External MAPE (cases not from the fitted paper) {_mape_text(external(results))}; the fitted paper's own "
        f"rows {_mape_text(paper_rows(results))}. Effective derate {effective_derate():.3f} (compute_residual "
        f"{cal.compute_residual:.4f} x sustained clock {cal.sustained_clock_fraction:.3f}); the derate the dense "
        f"cases imply {_derate_text(dense)}, the MoE cases {_derate_text(moe)}."
    )


def _mape_text(results: list[CaseResult], group: str = CORPUS) -> str:
    value, counted = mape(results, group), len(_counted(results, group))
    return f"{'n/a' if math.isnan(value) else f'{value:.1%}'} over {counted} case{'s' * (counted != 1)}"


def _marker(case: Case) -> str:
    """What a table row adds to a case's name: fitted, or the group it belongs to beside the corpus."""
    return " (fitted)" * case.fitted + (f" ({case.group})" if case.group != CORPUS else "")


def markdown(results: list[CaseResult]) -> str:
    """The REPRODUCTION.md section: the table, the cases that did not run, disagreeing releases, misses."""
    not_run = [r for r in results if not r.ran]
    fitted = [r.case.name for r in results if r.case.fitted]
    by_source: dict[str, list[CaseResult]] = {}
    for r in results:
        by_source.setdefault(r.case.source_label.split()[0], []).append(r)
    lines = [
        "## Validation: published training runs (`moesim validate`)",
        "",
        headline(results),
        "",
        (
            f"{len(results)} cases (experiments/validation/cases/); {len(results) - len(not_run)} ran, "
            f"{len(not_run)} could not run. MAPE of tokens/s per GPU: {_mape_text(results)} ("
            + ", ".join(f"{source} {_mape_text(group)}" for source, group in by_source.items())
            + ")"
            + (f"; fitted, so left out: {', '.join(fitted)}." if fitted else ".")
            + "".join(
                f" The {group} runs ({GROUP_TEXT.get(group, 'a group of their own')}) have their"
                f" own: {_mape_text(results, group)}, not in the headline."
                for group in other_groups(results)
            )
            + " Error = predicted / measured - 1. At residual 1: the error with the one fitted constant"
            f" (compute_residual, {DEFAULT_CALIBRATION.compute_residual:.4f}) set to 1, the published kernel speeds"
            f" at the sustained clock ({DEFAULT_CALIBRATION.sustained_clock_fraction:.3f}) alone; how far each case"
            " leans on the fit."
        ),
        "",
        "| case | source | GPUs | measured tok/s/GPU | predicted | error | at residual 1 | measured TFLOP/s/GPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        case = r.case
        predicted = f"{r.predicted_tokens_per_s_per_gpu:,.0f}" if r.ran else "not run"
        tflops = f"{case.measured_model_tflops_per_gpu:,.0f}" if case.measured_model_tflops_per_gpu else ""
        lines.append(
            f"| {case.name}{_marker(case)} | {case.source_label} | {case.gpus:,} "
            f"| {case.measured_tokens_per_s_per_gpu:,.0f} | {predicted} | {_pct(r.error)} | {_pct(r.unfitted_error)} "
            f"| {tflops} |"
        )
    lines += pairs_markdown(pairs(results))
    if not_run:
        lines += ["", f"Could not run ({len(not_run)}, left out of the MAPE):", ""]
        for r in not_run:
            line = f"- {r.case.name}: `{r.message}`"
            if r.ignoring_memory is not None:
                error = r.ignoring_memory / r.case.measured_tokens_per_s_per_gpu - 1
                line += f". Simulated anyway (allow_oom): {r.ignoring_memory:,.0f} tokens/s per GPU ({error:+.0%}); "
                line += _causes(r)
            lines.append(line)
    disagreeing = [(r.case, other) for r in results for other in r.case.disagreeing_releases()]
    lines += ["", "Releases of the same row that differ from the newest (the case's value) by more than 10%:", ""]
    lines += [
        f"- {case.name}: {other['release']} gives {other['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU "
        f"({other['tokens_per_s_per_gpu'] / case.measured_tokens_per_s_per_gpu - 1:+.0%})"
        for case, other in disagreeing
    ] or ["- none (each case file lists the other releases it was checked against)"]
    lines += release_pairs_markdown(results)
    lines += _memory_lines(results)
    lines += memory_markdown(memory_rows(results))
    misses = [r for r in results if r.ran and abs(r.error) > MISS]
    lines += ["", f"Misses over {MISS:.0%} ({len(misses)}) and their likely causes:", ""]
    lines += [
        f"- {r.case.name}: predicted {'high' if r.error > 0 else 'low'} by {abs(r.error):.0%}; {_causes(r)}"
        for r in misses
    ] or ["- none"]
    return "\n".join(lines)


def _memory_lines(results: list[CaseResult]) -> list[str]:
    """How many cases fit, and which may not (simulator/memory/verdict.py): a published run is never refused."""
    verdicts = {r.case.name: r.report.memory_verdict.split(":")[0] for r in results if r.report is not None}
    tight = [name for name, verdict in verdicts.items() if verdict == "may not fit"]
    fits = sum(verdict == "fits" for verdict in verdicts.values())
    return [
        "",
        f"Memory (simulator/memory/verdict.py): {fits} of the {len(verdicts)} cases simulated fit within 80% of HBM; "
        + (
            f"{len(tight)} may not fit (simulated, with a warning): {', '.join(tight)}."
            if tight
            else "none may not fit."
        ),
    ]


def table(results: list[CaseResult]) -> str:
    """The printed table: one row per case, then the MAPE and the cases that did not run."""
    width = max(len(r.case.name) for r in results)
    lines = [f"{'case':<{width}}  {'measured':>10}  {'predicted':>10}  {'error':>7}  {'at residual 1':>13}"]
    for r in results:
        predicted = f"{r.predicted_tokens_per_s_per_gpu:10.0f}" if r.ran else f"{'-':>10}"
        tail = "  (fitted, not in MAPE)" if r.case.fitted else ("" if r.ran else f"  not run: {r.message}")
        if r.case.group != CORPUS:
            tail = f"  ({r.case.group}){tail}"
        lines.append(
            f"{r.case.name:<{width}}  {r.case.measured_tokens_per_s_per_gpu:10.0f}  {predicted}  "
            f"{_pct(r.error):>7}  {_pct(r.unfitted_error):>13}{tail}"
        )
    lines.append(headline(results))
    lines.append(f"MAPE {_mape_text(results)} (tokens/s per GPU, every case of the corpus)")
    lines += [
        f"{group} runs: MAPE {_mape_text(results, group)} (not in the MAPE above)" for group in other_groups(results)
    ]
    unfitted = [abs(r.unfitted_error) for r in results if r.in_mape and r.unfitted_error is not None]
    if unfitted:
        lines.append(
            f"compute_residual {DEFAULT_CALIBRATION.compute_residual:.4f} (the one fitted constant, "
            f"{DEFAULT_CALIBRATION.fitted_on[0].split(': ', 1)[1]}); at 1, the published kernel speeds at the "
            f"sustained clock alone: "
            f"MAPE {sum(unfitted) / len(unfitted):.1%}"
        )
    lines += release_pairs_lines(results)
    not_run = [r.case.name for r in results if not r.ran]
    if not_run:
        lines.append(f"not run ({len(not_run)}): {', '.join(not_run)}")
    lines += memory_lines(memory_rows(results))
    matched = pairs_table(pairs(results))
    return "\n".join(lines) + (f"\n\n{matched}" if matched else "")
