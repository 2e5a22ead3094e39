"""Simulations shared between reproductions: within ``sharing()``, one Report per distinct point.

Table 3, Table 5, weak scaling, the scale-up baseline and the validation corpus simulate some of the same
points (e.g. the 352B model under MegaScale-MoE on 240 H800s is a Table 3 row, Table 5's last step and the
calibration case); ``moesim reproduce all`` simulates each once. The key is the resolved specs, so a preset
name and the spec it names are one point. Points that differ only in their global batch (a validation case at
two batch sizes) share the steady shortcut's short runs (``short_runs``; simulator/fast/steady.ShortRuns), at
any calibration. Outside ``sharing()`` every call simulates (no state kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from simulator.fast.steady import ShortRuns
from simulator.report import simulate as _report
from simulator.report.simulate import Report, resolve
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.graph.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec


@dataclass(frozen=True)
class Settings:
    """The simulate() keywords a reproduction sets, with simulate()'s defaults."""

    global_batch: int = DEFAULT_GLOBAL_BATCH
    seq_len: int = DEFAULT_SEQ_LEN
    micro_batch: int | None = None
    allow_oom: bool = False


@dataclass(frozen=True)
class SimKey:
    """One point: what simulate() is given, presets resolved to specs."""

    model: ModelSpec
    layout: LayoutSpec
    cluster: ClusterSpec
    settings: Settings


@dataclass
class Shared:
    """What a ``sharing()`` block keeps: each point's Report (or ConfigError), and the steady shortcut's short runs."""

    reports: dict[SimKey, Report | ConfigError] = field(default_factory=dict)
    runs: ShortRuns = field(default_factory=ShortRuns)


_shared: Shared | None = None  # None: not sharing


@contextmanager
def sharing() -> Iterator[None]:
    """Share simulations inside this block (nested blocks share the outer one's); forgotten after it."""
    global _shared
    outer = _shared
    _shared = Shared() if outer is None else outer
    try:
        yield
    finally:
        _shared = outer


def short_runs() -> ShortRuns | None:
    """The steady shortcut's short runs shared inside ``sharing()`` (for simulate()'s ``short_runs``); None outside."""
    return None if _shared is None else _shared.runs


def simulate(
    model: ModelSpec | str,
    layout: LayoutSpec | str,
    gpus: int | None = None,
    *,
    cluster: ClusterSpec | str | None = None,
    **settings: Any,
) -> Report:
    """simulator.report.simulate.simulate with the keywords of ``Settings``; inside ``sharing()`` a point simulated
    before gives its Report (or raises its ConfigError) again. A shared Report's sim_wall_s is that of the one
    simulation."""
    given = Settings(**settings)  # an unknown keyword is a TypeError, as simulate() gives
    if _shared is None:
        return _report.simulate(model, layout, gpus, cluster=cluster, **asdict(given))
    key = SimKey(*resolve(model, layout, cluster, gpus), given)
    reports = _shared.reports
    if key not in reports:
        try:
            reports[key] = _report.simulate(
                key.model, key.layout, cluster=key.cluster, short_runs=_shared.runs, **asdict(given)
            )
        except ConfigError as error:
            reports[key] = error
    found = reports[key]
    if isinstance(found, ConfigError):
        raise found
    return found
