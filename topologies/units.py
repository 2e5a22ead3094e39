"""Bandwidths as users write them: ``400Gb/s`` (a NIC datasheet, gigabits), ``50GB/s`` (gigabytes), ``400Gbps``,
``3.2Tb/s``. moesim's flags and sweep fields named ``*_gbps`` take GB/s (gigabytes per second); a bare number keeps
that meaning, and one that looks like a NIC's gigabit rate gets a warning. Outputs spell GB/s."""

from __future__ import annotations

import math
import re

from topologies.errors import ConfigError, short_repr

_BANDWIDTH = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kMGT])(B|b)(?:/s|ps)\s*$")
_PREFIX = {"k": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}  # to giga
# A bare value at or above this many GB/s per GPU reads like a NIC datasheet's gigabits: today's fastest NICs
# carry 800 Gb/s = 100 GB/s per GPU (NVIDIA ConnectX-8 SuperNIC), so 200 "GB/s" is most likely 200 Gb/s.
GIGABIT_LOOKING_GBPS = 200.0


def bandwidth_GBps(field: str, text: object) -> tuple[float, str]:
    """``text`` in GB/s, and a warning ("" if none): ``400Gb/s`` -> 50.0; ``50GB/s`` -> 50.0; ``400`` -> 400.0 with
    a warning that it may mean 400 Gb/s. ConfigError(field) for anything else."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = repr(float(text))
    try:  # a bare number: GB/s (its sign and bounds are the physical check's, topologies/bounds.py)
        bare = float(text) if isinstance(text, str) else None
    except ValueError:
        bare = None
    if bare is not None:
        if not math.isfinite(bare):
            raise ConfigError(field, f"must be a finite number, got {short_repr(text)}")
        warning = ""
        if bare >= GIGABIT_LOOKING_GBPS:
            warning = (
                f"{field} {bare:g} is read as {bare:g} GB/s (gigabytes); if you mean a NIC's {bare:g} Gb/s, "
                f"write {bare:g}Gb/s ({bare / 8:g} GB/s)"
            )
        return bare, warning
    match = _BANDWIDTH.match(text) if isinstance(text, str) else None
    if match is None:
        raise ConfigError(field, f"must be a bandwidth such as 50GB/s, 400Gb/s or 50 (GB/s), got {short_repr(text)}")
    value, prefix, unit = float(match.group(1)), match.group(2), match.group(3)
    giga = value * _PREFIX[prefix]
    return (giga / 8 if unit == "b" else giga), ""
