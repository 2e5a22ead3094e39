"""One point of a sweep and how it runs, shared by ``moesim compare``, ``sweep`` and ``search``.

A point is a model, a layout, a cluster and a GPU count, plus what is changed on top of them. Every key a
user may vary has one home, found by one classifier: a simulate() keyword, a ClusterSpec field or a
LayoutSpec field (or an alias that stands for several LayoutSpec fields). ``run_point`` turns a point
into one flat row; a point that cannot run (ConfigError) is a row with its error, so one bad point of a
grid never stops the others.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from simulator.report.clusters import load_cluster
from simulator.report.simulate import BOUND_KEYWORDS, lower_bound_s, simulate
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import load_layout
from workloads.specs.fieldtypes import check_value, field_types
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

SIMULATE, CLUSTER, LAYOUT = "simulate", "cluster", "layout"
DEFAULT_CLUSTER = "h800"
# simulate() keywords that are not settings: the point itself (model, layout, gpus, cluster), objects
# (calibration, faults) and memoize, which changes how fast the simulator runs, not what it predicts.
NOT_SETTINGS = ("model", "layout", "gpus", "cluster", "calibration", "faults", "memoize")
SCALAR_KINDS = ("int", "float", "bool", "str")


def _zipf_fields(exponent: Any) -> dict[str, Any]:
    """LayoutSpec fields of a Zipf exponent: routing="zipf" with it, or uniform routing for 0."""
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        raise ConfigError("zipf", f"expected a number >= 0, got {exponent!r}")
    return {"routing": "zipf", "zipf_exponent": float(exponent)} if exponent else {"routing": "uniform"}


# Keys that stand for several LayoutSpec fields: Zipf exponent s -> routing="zipf" with that exponent
# (s = 0 is uniform routing, so it is simulated as the paper's routing="uniform").
ALIASES: dict[str, Callable[[Any], dict[str, Any]]] = {"zipf": _zipf_fields}
ALIAS_KINDS = {"zipf": "float"}


def simulate_kinds() -> dict[str, str]:
    """simulate() keywords a point may set and their scalar types (from the annotations; ``X | None`` -> X)."""
    return dict(_simulate_kinds())


@cache
def _simulate_kinds() -> tuple[tuple[str, str], ...]:
    """``simulate_kinds`` as pairs, read once: every key of every point is classified through it (765 search points
    were built in 0.43 CPU-s reading the signature per key, 0.10 reading it once)."""
    pairs = []
    for name, parameter in inspect.signature(simulate).parameters.items():
        kind = str(parameter.annotation).replace(" | None", "")
        if name not in NOT_SETTINGS and kind in SCALAR_KINDS:
            pairs.append((name, kind))
    return tuple(pairs)


def kinds(target: str) -> dict[str, str]:
    """The keys a target (SIMULATE, CLUSTER or LAYOUT) accepts and their types."""
    if target == SIMULATE:
        return simulate_kinds()
    if target == CLUSTER:
        return {k: v for k, v in field_types(ClusterSpec).items() if k not in ("gpu", "num_gpus")}
    return {k: v for k, v in field_types(LayoutSpec).items() if k != "name"}


def target_of(key: str) -> str:
    """Where ``key`` is accepted: a simulate() keyword, a ClusterSpec field or a LayoutSpec field (or alias)."""
    for target in (SIMULATE, CLUSTER, LAYOUT):
        if key in kinds(target):
            return target
    if key in ALIASES:
        return LAYOUT
    raise ConfigError(
        key,
        f"not a simulate() keyword ({', '.join(simulate_kinds())}), ClusterSpec field or LayoutSpec field",
    )


def kind_of(key: str) -> str:
    """The type of ``key``'s values (int, float, bool, str or a tuple type)."""
    return ALIAS_KINDS[key] if key in ALIASES else kinds(target_of(key))[key]


def check_setting(key: str, value: Any, field_name: str = "") -> Any:
    """``value`` checked against the type of ``key``; a wrong type is a ConfigError naming the field."""
    if key in ALIASES:
        ALIASES[key](value)  # raises ConfigError for a bad value
        return value
    return check_value(field_name or key, kind_of(key), value)


@dataclass(frozen=True)
class Point:
    """One configuration to simulate: presets (names, .yaml files or specs) and the changes on top of them."""

    model: str | ModelSpec
    layout: str | LayoutSpec
    gpus: int
    cluster: str | ClusterSpec = DEFAULT_CLUSTER
    simulate_kwargs: Mapping[str, Any] = field(default_factory=dict)  # global_batch, seq_len, micro_batch, ...
    layout_overrides: Mapping[str, Any] = field(default_factory=dict)
    cluster_overrides: Mapping[str, Any] = field(default_factory=dict)


def make_point(
    model: str | ModelSpec,
    layout: str | LayoutSpec,
    gpus: int,
    settings: Mapping[str, Any],
    *,
    cluster: str | ClusterSpec = DEFAULT_CLUSTER,
    **simulate_kwargs: Any,
) -> Point:
    """A point whose settings each go where ``target_of`` says (aliases expanded); settings win over the
    simulate() keywords given beside them (a swept global_batch overrides the default one)."""
    by_target: dict[str, dict[str, Any]] = {SIMULATE: dict(simulate_kwargs), CLUSTER: {}, LAYOUT: {}}
    for key, value in settings.items():
        if key in ALIASES:
            by_target[LAYOUT].update(ALIASES[key](value))
        else:
            by_target[target_of(key)][key] = value
    return Point(model, layout, gpus, cluster, by_target[SIMULATE], by_target[LAYOUT], by_target[CLUSTER])


def _resolved(point: Point) -> tuple[LayoutSpec, ClusterSpec]:
    """The point's layout and cluster with its overrides applied."""
    layout = load_layout(point.layout)
    if point.layout_overrides:
        layout = layout.with_(**point.layout_overrides)
    cluster = load_cluster(point.cluster, point.gpus)  # a preset or a cluster YAML file
    if point.cluster_overrides:
        cluster = cluster.with_(**point.cluster_overrides)
    return layout, cluster


def run_point(point: Point) -> dict[str, Any]:
    """The point's report as one flat row with ``error`` "", or ``{"error": ...}`` if it cannot run."""
    try:
        layout, cluster = _resolved(point)
        report = simulate(point.model, layout, cluster=cluster, **point.simulate_kwargs)
    except ConfigError as error:
        return {"error": str(error)}
    return {**report.to_row(), "error": ""}


def bound_point(point: Point) -> float | None:
    """A lower bound on the step time ``run_point`` reports (simulator/report/bounds.py), or None where the point
    has no bound (it cannot run, or sets what the bound does not take: its row says which)."""
    kwargs = dict(point.simulate_kwargs)
    if set(kwargs) - {"calibration", *BOUND_KEYWORDS}:
        return None  # e.g. op level or another engine: simulate it
    try:
        layout, cluster = _resolved(point)
        return lower_bound_s(point.model, layout, cluster=cluster, **kwargs)
    except ConfigError:
        return None
