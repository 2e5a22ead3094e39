"""Differential tests of what makes ``moesim search`` fast: task timings reused across points (simulator/engine/timer.py
``TIMINGS``) and bound-based pruning (experiments/search/bound.py) change no result, on one process or two (on a
dask cluster: tests/differential/test_distributed.py ``test_a_search_on_dask_ranks_the_rows_found_here``)."""

from __future__ import annotations

from functools import cache

import pytest

from experiments.search.bound import BoundPruner, bounds, by_bound
from experiments.search.search import candidates, rank
from experiments.search.space import SearchSpace
from experiments.search.sweep import sweep_row
from simulator.engine.timer import TIMINGS

JOB = {"global_batch": 16, "seq_len": 2048}
# The exhaustive search's job: half the micro-batches, so each of its 86 points (every schedule of the wide
# space) simulates in about half the time; the bounds still skip 60 of them.
SMALL_JOB = {**JOB, "global_batch": 8}
WALL = ("sim_wall_s",)  # how long a row took to simulate: the one column that may differ


def without_wall(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in WALL}


def some_points() -> list[dict]:
    """Layouts of every schedule of the wide space (mixtral-8x7b on 16 GPUs), a few of each."""
    points, _ = candidates("mixtral-8x7b", 16, **JOB)
    by_schedule: dict[tuple, list[dict]] = {}
    for p in points:
        by_schedule.setdefault((p["schedule"], p["virtual_stages"], p["ep_overlap"]), []).append(p)
    return [p for group in by_schedule.values() for p in group[:3]]


def test_shared_timings_change_no_row(monkeypatch) -> None:
    """Points simulated with task timings reused across them give the rows they give without, exactly (and
    some timings were indeed reused: points of one layout differ only in schedule or micro-batch)."""
    points = some_points()
    assert {"1f1b", "interleaved", "zb1p", "dualpipev"} <= {p["schedule"] for p in points}
    monkeypatch.setattr(TIMINGS, "max_entries", 0)
    TIMINGS.clear()
    alone = [without_wall(sweep_row(p)) for p in points]
    assert TIMINGS.hits == 0 and len(TIMINGS) == 0
    monkeypatch.setattr(TIMINGS, "max_entries", 1024)
    shared = [without_wall(sweep_row(p)) for p in points]
    assert TIMINGS.hits > 0 and 0 < len(TIMINGS) <= 1024
    assert shared == alone
    TIMINGS.clear()


def test_pruner_threshold_by_hand() -> None:
    """The threshold is the top-th best step seen (infinite before); a point is skipped only above it."""
    points = [{"gpus": 8, "pp": pp} for pp in (1, 2, 3, 4)]
    pruner = BoundPruner(points, [1.0, 2.0, None, 5.0], top=2)
    assert pruner.threshold_s == float("inf") and not pruner.skip(points[3])
    for step in ("3.0", "4.5", "4.0"):
        pruner.seen({"error": "", "step_time_s": step})
    pruner.seen({"error": "gpus: no", "step_time_s": ""})
    assert pruner.threshold_s == 4.0  # the best two are 3.0 and 4.0
    assert pruner.skip(points[3]) and not pruner.skip(points[1])
    assert not pruner.skip(points[2])  # no bound: always runs
    assert by_bound(points, [1.0, 2.0, None, 5.0]) == [points[2], points[0], points[1], points[3]]


@cache
def exhaustive() -> tuple[list[dict], list[dict]]:
    """A small wide-space search (every schedule, in-node and cross-node EP), and its top 3 simulating all."""
    space = SearchSpace.wide().fix(["micro_batch=1", "cp=1", "attention=sp"])
    points, _ = candidates("mixtral-8x7b", 16, space=space, **SMALL_JOB)
    return points, [without_wall(r) for r in rank(points, jobs=1, top=3, progress=lambda _: None, prune=False)]


@pytest.mark.xdist_group("exhaustive_search")  # one worker: exhaustive() is simulated once for both
@pytest.mark.parametrize("jobs", [1, 2])
def test_pruned_search_ranks_as_the_exhaustive_one(jobs: int) -> None:
    """Skipping the points whose bound cannot rank gives the same top rows, on one process or two, while
    simulating fewer points."""
    points, every = exhaustive()
    lines: list[str] = []
    pruned = rank(points, jobs=jobs, top=3, progress=lines.append)
    assert [without_wall(r) for r in pruned] == every
    ran = [line for line in lines if line.startswith("[")]
    assert 3 <= len(ran) < len(points)
    assert f"{len(points) - len(ran)} skipped" in lines[-1]
    assert all(b is not None for b in bounds(points[:4], jobs=jobs))
