"""Type checks of ``simulate``'s arguments: every wrong type is a ConfigError naming the argument; numpy integers
stand for ints (GPU counts and sizes often come out of numpy arrays)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

from simulator.costs.calibration import Calibration
from simulator.engine.faults import Faults
from simulator.engine.probes import Probe
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError, short_repr
from workloads.specs.fieldtypes import is_bool
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

ENGINES = ("folded", "unfolded")
T = TypeVar("T")


def as_int(field: str, value: object, optional: bool = False) -> int | None:
    """``value`` as a Python int (numpy integers too); None passes if ``optional``; else ConfigError(field)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(field, f"must be an integer, got {short_repr(value)}")
    return int(value)


def as_bool(field: str, value: object) -> bool:
    """``value`` if it is a bool (numpy bools too); a string such as "no" is a ConfigError(field)."""
    if not is_bool(value):
        raise ConfigError(field, f"must be True or False, got {short_repr(value)}")
    return bool(value)


def _spec(field: str, value: object, cls: type, optional: bool = False) -> None:
    """``value`` must be a ``cls``, a preset name or a file path (or None if ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, (cls, str, Path)):
        raise ConfigError(field, f"must be a {cls.__name__}, a preset name or a file path, got {short_repr(value)}")


def check_simulate_args(
    model: object,
    layout: object,
    gpus: object,
    cluster: object,
    global_batch: object,
    seq_len: object,
    micro_batch: object,
    calibration: object,
    memoize: object,
    allow_oom: object,
    faults: object,
    probes: object,
    engine: object,
) -> dict[str, object]:
    """The checked, normalised keyword arguments of ``simulate`` (ConfigError naming the first wrong one)."""
    _spec("model", model, ModelSpec)
    _spec("layout", layout, LayoutSpec)
    _spec("cluster", cluster, ClusterSpec, optional=True)
    if not isinstance(calibration, Calibration):
        raise ConfigError("calibration", f"must be a Calibration, got {short_repr(calibration)}")
    if faults is not None and not isinstance(faults, Faults):
        raise ConfigError(
            "faults", f"must be a Faults (e.g. Faults.parse(['17:1.2'])) or None, got {short_repr(faults)}"
        )
    if isinstance(probes, (str, bytes)) or not isinstance(probes, Iterable):
        raise ConfigError("probes", f"must be an iterable of Probe, got {short_repr(probes)}")
    probes = tuple(probes)
    for probe in probes:
        if not isinstance(probe, Probe):
            raise ConfigError("probes", f"must be an iterable of Probe, got an item {short_repr(probe)}")
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ConfigError("engine", f"must be one of {', '.join(ENGINES)}, got {short_repr(engine)}")
    return {
        "gpus": as_int("gpus", gpus, optional=True),
        "global_batch": as_int("global_batch", global_batch),
        "seq_len": as_int("seq_len", seq_len),
        "micro_batch": as_int("micro_batch", micro_batch, optional=True),
        "memoize": as_bool("memoize", memoize),
        "allow_oom": as_bool("allow_oom", allow_oom),
        "probes": probes,
    }


def check_finite(report: T) -> T:
    """``report`` (a Report) if every number in it is finite; else ConfigError naming the field, so the JSON stays
    valid (no NaN or Infinity) and the cause is said instead of printed as a number."""
    for name, value in _numbers(asdict(report)):
        if not math.isfinite(value):
            raise ConfigError(
                name,
                f"the simulated step gives {value} (not a finite number): an input is too large or too small "
                "for the step to be computed (a batch, a factor or a bandwidth near the float limits?)",
            )
    return report


def _numbers(data: dict, prefix: str = "") -> Iterator[tuple[str, float]]:
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _numbers(value, f"{prefix}{key}.")
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            yield f"{prefix}{key}", float(value)
