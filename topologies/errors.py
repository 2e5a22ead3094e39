"""Errors raised by moesim when a configuration value is invalid."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A bad configuration value; the message names the field and the rule."""

    def __init__(self, field: str, rule: str) -> None:
        """Store the offending field and the rule it broke."""
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule

    def __str__(self) -> str:
        """Return the one-line message `field: rule`."""
        return f"{self.field}: {self.rule}"


def short_repr(value: object, width: int = 80) -> str:
    """repr of a value cut to ``width`` characters: an error message never holds a huge value."""
    text = repr(value)
    return text if len(text) <= width else text[:width] + "..."


def check_positive(field: str, value: object) -> None:
    """Raise ConfigError unless value is a finite real number greater than zero."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(field, f"must be a number, got {short_repr(value)}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(field, f"must be a finite number > 0, got {short_repr(value)}")


def check_positive_int(field: str, value: object) -> None:
    """Raise ConfigError unless value is an int greater than zero."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be an integer, got {short_repr(value)}")
    if value <= 0:
        raise ConfigError(field, f"must be > 0, got {short_repr(value)}")


def lookup_preset(field: str, presets: Mapping[str, T], name: object) -> T:
    """``presets[name]`` (case-insensitive), or a ConfigError naming ``field`` that lists the choices."""
    key = name.lower() if isinstance(name, str) else name
    if key not in presets:
        raise ConfigError(field, f"unknown preset {short_repr(name)}; choose from {', '.join(sorted(presets))}")
    return presets[key]
