"""Releases of the Megatron-Bridge performance summary that print the same settings and tokens/s more than
PAIR_GAP apart (issue 39): both are kept as cases, each with its own release's recipe, and reported as a pair
beside the MAPE, with the simulated ratio, so a reader sees which release the simulator sides with."""

from __future__ import annotations

from typing import Any, NamedTuple

from experiments.validation.case_result import CaseResult
from experiments.validation.corpus import PAIR_GAP


class ReleasePair(NamedTuple):
    """Two cases whose releases disagree at the same printed settings."""

    first: CaseResult
    second: CaseResult

    @property
    def measured_ratio(self) -> float:
        """The second's measured tokens/s over the first's."""
        return self.second.case.measured_tokens_per_s_per_gpu / self.first.case.measured_tokens_per_s_per_gpu

    @property
    def predicted_ratio(self) -> float | None:
        """The same ratio as simulated; None when either did not run."""
        if not (self.first.ran and self.second.ran):
            return None
        return self.second.predicted_tokens_per_s_per_gpu / self.first.predicted_tokens_per_s_per_gpu


def release_pairs(results: list[CaseResult]) -> list[ReleasePair]:
    """Each marked pair once, in the order of its first case."""
    by_name = {r.case.name: r for r in results}
    found = []
    for r in results:
        other = by_name.get(r.case.release_pair)
        if other is not None and r.case.name < other.case.name:
            found.append(ReleasePair(r, other))
    return found


def _release(result: CaseResult) -> str:
    return result.case.source.get("release", result.case.source_label)


def _line(pair: ReleasePair) -> str:
    a, b = pair.first, pair.second
    simulated = pair.predicted_ratio
    return (
        f"{a.case.name} ({_release(a)}, {a.case.measured_tokens_per_s_per_gpu:,.0f} tokens/s/GPU) and "
        f"{b.case.name} ({_release(b)}, {b.case.measured_tokens_per_s_per_gpu:,.0f}): measured "
        f"{pair.measured_ratio:.2f}x, simulated " + (f"{simulated:.2f}x" if simulated is not None else "n/a")
    )


def release_pairs_markdown(results: list[CaseResult]) -> list[str]:
    """The REPRODUCTION.md lines: each pair with both cases' notes."""
    lines = ["", f"Releases that print the same settings more than {PAIR_GAP:.0%} apart (both kept as cases):", ""]
    found = [f"- {_line(p)}. {p.first.case.release_pair_note}" for p in release_pairs(results)]
    return lines + (found or ["- none"])


def release_pairs_lines(results: list[CaseResult]) -> list[str]:
    """The printed table's lines, one per pair."""
    return [f"release pair: {_line(p)}" for p in release_pairs(results)]


def release_pairs_json(results: list[CaseResult]) -> list[dict[str, Any]]:
    """The ``--json`` entries."""
    return [
        {
            "cases": [p.first.case.name, p.second.case.name],
            "releases": [_release(p.first), _release(p.second)],
            "measured_ratio": p.measured_ratio,
            "predicted_ratio": p.predicted_ratio,
        }
        for p in release_pairs(results)
    ]
