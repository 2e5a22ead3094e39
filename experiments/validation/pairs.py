"""Matched runs: a published run and its baseline differ in one or two settings, so the ratio of their measured
throughputs isolates what those settings do (EP overlap, the dispatcher, the precision recipe), which a
single run's error cannot: a miss common to both runs cancels in the ratio, a miss in the mechanism does not.

A case names its baseline (``baseline: {case, change}``, experiments/validation/corpus.py); ``moesim validate``
prints each pair's measured and simulated speedup (the case's tokens/s over its baseline's) and the error of
the simulated one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # validate imports this module
    from experiments.validation.case_result import CaseResult


@dataclass(frozen=True)
class Pair:
    """One matched run against its baseline: measured and simulated speedup (case over baseline tokens/s)."""

    case: str
    baseline: str
    change: str
    measured_speedup: float
    predicted_speedup: float | None  # None where either run could not be simulated

    @property
    def error(self) -> float | None:
        """Signed fraction of the measured speedup: 0.05 = the simulated change gains 5% too much."""
        return None if self.predicted_speedup is None else self.predicted_speedup / self.measured_speedup - 1


def pairs(results: Iterable[CaseResult]) -> list[Pair]:
    """The pairs among ``results`` whose baseline ran in the same set, in the cases' order."""
    results = list(results)
    by_name = {r.case.name: r for r in results}
    out = []
    for r in results:
        base = by_name.get(r.case.baseline)
        if base is None:
            continue
        measured = r.case.measured_tokens_per_s_per_gpu / base.case.measured_tokens_per_s_per_gpu
        predicted = (
            r.predicted_tokens_per_s_per_gpu / base.predicted_tokens_per_s_per_gpu if r.ran and base.ran else None
        )
        out.append(Pair(r.case.name, base.case.name, r.case.change, measured, predicted))
    return out


def _speedup(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def pairs_table(found: list[Pair]) -> str:
    """The printed lines: one per pair (case over baseline, measured and simulated speedup, error)."""
    if not found:
        return ""
    width = max(len(f"{p.case} / {p.baseline}") for p in found)
    lines = [f"{'matched run / its baseline':<{width}}  {'measured':>8}  {'simulated':>9}  {'error':>7}"]
    for p in found:
        name = f"{p.case} / {p.baseline}"
        lines.append(
            f"{name:<{width}}  {_speedup(p.measured_speedup):>8}  {_speedup(p.predicted_speedup):>9}  "
            f"{_pct(p.error):>7}"
        )
    return "\n".join(lines)


def pairs_markdown(found: list[Pair]) -> list[str]:
    """The REPRODUCTION.md lines: a table with each pair's change."""
    if not found:
        return []
    lines = [
        "",
        (
            "Matched runs: each case against the published run it changes (speedup = its tokens/s over the"
            " baseline's; error = simulated speedup / measured - 1). A miss common to both runs cancels in the"
            " ratio; what remains is the simulated mechanism's:"
        ),
        "",
        "| case | baseline | change | measured speedup | simulated | error |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {p.case} | {p.baseline} | {p.change} | {_speedup(p.measured_speedup)} | "
        f"{_speedup(p.predicted_speedup)} | {_pct(p.error)} |"
        for p in found
    ]
    return lines
