"""Type checks for spec dataclass fields, shared by the specs' __post_init__ and the YAML loaders."""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import fields
from functools import lru_cache
from typing import Any

from topologies.errors import ConfigError, short_repr

TYPE_NAMES = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}


def is_bool(value: Any) -> bool:
    """Whether ``value`` is a bool or a numpy bool (which is no ``numbers.Integral``, and no ``bool``)."""
    # NOTE: numpy is looked up, not imported: a numpy bool exists only where numpy is loaded already, and
    # `moesim run` does not otherwise load numpy (issue #38: start-up loads only what a command uses).
    numpy = sys.modules.get("numpy")
    return isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_))


def field_types(cls: type) -> dict[str, str]:
    """Map each dataclass field of ``cls`` to its annotation string (int, float, bool or str)."""
    return dict(_field_kinds(cls))


@lru_cache(maxsize=64)
def _field_kinds(cls: type) -> tuple[tuple[str, str], ...]:
    """``field_types`` as pairs, once per class: every spec built checks each of its fields (a search builds tens of
    thousands of layouts)."""
    return tuple((f.name, str(f.type)) for f in fields(cls))


# NOTE: the exact types of the plain values most fields hold, accepted without the ABC checks below (an isinstance
# against numbers.Integral costs more than the rest of a field's check); what they accept, those accept too
_PLAIN = {"int": (int,), "float": (float, int), "bool": (bool,), "str": (str,)}


def check_value(field: str, kind: str, value: Any) -> Any:
    """Return value (an int widened to float for float fields) or raise ConfigError naming field."""
    plain = _PLAIN.get(kind)
    if plain is not None and type(value) in plain:  # NOTE: most fields, first: a spec checks each of its ~100 fields
        if kind == "float":
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(field, f"must be a finite number, got {short_repr(value)}")
        return value
    if kind.startswith("tuple[") and kind.endswith(", ...]"):  # a YAML list of one item type
        item_kind = kind[len("tuple[") : -len(", ...]")]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(
                field, f"must be a list of {TYPE_NAMES[item_kind].split(' ', 1)[1]}s, got {short_repr(value)}"
            )
        return tuple(check_value(f"{field}[{i}]", item_kind, item) for i, item in enumerate(value))
    ok = {
        "int": isinstance(value, numbers.Integral) and not is_bool(value),
        "float": isinstance(value, numbers.Real) and not is_bool(value),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
    }.get(kind, True)
    if not ok:
        raise ConfigError(field, f"must be {TYPE_NAMES[kind]}, got {short_repr(value)}")
    if kind == "int":
        value = int(value)  # numpy integers become Python ints
    if kind == "float":
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(field, f"must be a finite number, got {short_repr(value)}")
    return value


@lru_cache(maxsize=64)
def field_names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of ``cls`` by name, once per class (``dataclasses.fields`` builds its tuple each call)."""
    return tuple(name for name, _kind in _field_kinds(cls))


def check_types(prefix: str, spec: Any) -> None:
    """Raise ConfigError unless every field of the dataclass instance ``spec`` has its declared type."""
    for name, kind in _field_kinds(type(spec)):
        value = getattr(spec, name)
        plain = _PLAIN.get(kind)
        if plain is not None and type(value) in plain and kind != "float":  # NOTE: check_value's first case, inline
            continue
        checked = check_value(f"{prefix}.{name}", kind, value)
        if type(checked) is not type(value) and kind in ("int", "tuple[int, ...]"):  # a numpy integer: store the int
            object.__setattr__(spec, name, checked)
