"""Simulations shared between reproductions: within ``sharing()``, one Report per distinct point.

Table 3, Table 5, weak scaling, the scale-up baseline and the validation corpus simulate some of the same
points (e.g. the 352B model under MegaScale-MoE on 240 H800s is a Table 3 row, Table 5's last step and the
calibration case); ``moesim reproduce all`` simulates each once. The key is the resolved specs, so a preset
name and the spec it names are one point. Outside ``sharing()`` every call simulates (no state kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

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


_shared: dict[SimKey, Report | ConfigError] | None = None  # None: not sharing


@contextmanager
def sharing() -> Iterator[None]:
    """Share simulations inside this block (nested blocks share the outer one's); forgotten after it."""
    global _shared
    outer = _shared
    _shared = {} if outer is None else outer
    try:
        yield
    finally:
        _shared = outer


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
    if key not in _shared:
        try:
            _shared[key] = _report.simulate(key.model, key.layout, cluster=key.cluster, **asdict(given))
        except ConfigError as error:
            _shared[key] = error
    found = _shared[key]
    if isinstance(found, ConfigError):
        raise found
    return found
