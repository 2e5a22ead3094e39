"""Bound-based pruning for ``moesim search``: simulate the points most likely to rank first, skip those that
provably cannot.

Every point gets a lower bound on its step time: its schedule's pipeline replayed with every task timed alone and
every PP input arriving as it is sent, plus each stage's optimizer step (simulator/report/bounds.py, ``bound_point``;
on the 237 layouts of DeepSeek-V3's 512-GPU space that the sum of each stage's tasks let through, 0.4% to 5% under
the simulated step, median 2.4%, where that sum, which leaves out the pipeline's fill and drain, was 9% to 50%
under, median 26%), computed on the same workers as the search. Points then run in ascending bound order, and a
point whose bound exceeds the ``top``-th best step time simulated so far is skipped: its own step would be
longer still, so it cannot be among the ``top`` fastest. The threshold only falls, so skipping is safe
whichever worker finishes first: the ``top`` fastest rows are those of the exhaustive search, exactly, for any
number of jobs or workers (tests/unit/test_search.py). Points with the same tokens per step (one model, batch and
sequence length: a search) rank by step time as by tokens/s.
"""

from __future__ import annotations

import heapq

from experiments.common.parallel import Workers
from experiments.search.points import bound_point
from experiments.search.sweep import Specs, load_specs, to_point
from experiments.search.sweep_table import Params, point_id
from topologies.errors import ConfigError


def bound_of(params: Params, specs: Specs | None = None) -> float | None:
    """The lower bound on a sweep point's step time, or None where it has none (the point runs)."""
    try:
        return bound_point(to_point(params, specs))
    except ConfigError:
        return None


def bounds(
    points: list[Params], jobs: int = 1, scheduler: str | object | None = None, workers: Workers | None = None
) -> list[float | None]:
    """``bound_of`` each point, in order, in batches: on ``workers``, else on the dask cluster ``scheduler``, on
    ``jobs`` local processes or here; the specs they name loaded here and put on the workers once."""
    if workers is None:
        with Workers(jobs, scheduler) as started:
            return bounds(points, workers=started)
    return workers.map(bound_of, points, workers.share(load_specs(points)))


class BoundPruner:
    """Skips a point whose bound exceeds the ``top``-th best step time seen (an experiments.search.sweep.Pruner)."""

    def __init__(self, points: list[Params], lower_bounds: list[float | None], top: int) -> None:
        self.top = top
        self.bound_s = {point_id(p): b for p, b in zip(points, lower_bounds)}
        self._best: list[float] = []  # the top fastest step times so far, negated (a max-heap)
        self.skipped = 0

    @property
    def threshold_s(self) -> float:
        """The step time a point must beat to rank: the top-th best so far (infinite until top have run)."""
        return -self._best[0] if len(self._best) >= self.top else float("inf")

    def cannot_rank(self, done: set[str]) -> int:
        """Points (by id) not in ``done`` whose bound exceeds the threshold: skipped, or to be, as it only falls."""
        threshold_s = self.threshold_s
        return sum(1 for key, b in self.bound_s.items() if b is not None and b > threshold_s and key not in done)

    def skip(self, point: Params) -> bool:
        bound = self.bound_s.get(point_id(point))
        return bound is not None and bound > self.threshold_s

    def seen(self, row: dict[str, object]) -> None:
        if row.get("error"):
            return
        step_s = float(row["step_time_s"])  # type: ignore[arg-type]
        if len(self._best) < self.top:
            heapq.heappush(self._best, -step_s)
        elif step_s < -self._best[0]:
            heapq.heapreplace(self._best, -step_s)


def by_bound(points: list[Params], lower_bounds: list[float | None]) -> list[Params]:
    """The points most promising first: ascending bound (none: first, they always run), then point id."""
    keyed = [(-1.0 if b is None else b, point_id(p), p) for p, b in zip(points, lower_bounds)]
    return [p for _, _, p in sorted(keyed, key=lambda k: (k[0], k[1]))]
