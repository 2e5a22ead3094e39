"""Documented bounds on what one run may ask for, each with an environment variable that raises it.

A bound keeps a mistyped value (``--global-batch 7200000``, a YAML bomb, a 10^6-point sweep grid) from
running for hours or filling memory: it is refused in one line, naming the setting that raises it, before
any work starts. Set ``MOESIM_MAX_<NAME>`` (e.g. ``MOESIM_MAX_MICRO_BATCHES=100000``) to raise one.
"""

from __future__ import annotations

import math
import os

from topologies.errors import ConfigError

DEFAULTS: dict[str, float] = {
    "micro_batches": 16_384,  # micro-batches per pipeline per step (simulation cost grows with them)
    "trace_events": 5_000_000,  # Chrome trace events (~250 bytes each: ~1.2 GB of JSON)
    # Input files (workloads/inputs/bounded_read.py): each limit is the largest real file of its kind times a
    # margin of about 50 or more, so a real file never meets it and a wrong one (a log, a checkpoint, a device)
    # is refused before it is read. At 1 MiB: 0.3-0.9 s CPU and < 60 MB to read and parse a config.json, case or
    # arguments file; 2.3 s and 110 MB for a YAML list at the 100,000-node limit (measured on this 2-core machine).
    "yaml_bytes": 1 << 20,  # a model / layout / cluster / sweep YAML file (examples/: under 1 KB)
    "json_bytes": 1 << 20,  # a Hugging Face config.json (deepseek-ai/DeepSeek-V3's: 1.7 KB); device-anchor results
    "args_bytes": 1 << 20,  # Megatron-LM arguments or a script (Megatron-LM examples/deepseek_v3/train_deepseekv3.sh
    # at 83f0eba8: 19 KB, the largest of its MoE examples seen; examples/megatron here: 2.2 KB at most)
    "case_bytes": 1 << 20,  # a validation case (experiments/validation/cases: 13 KB at most)
    "yaml_nodes": 100_000,  # YAML nodes after expanding aliases (a billion-laughs file has 10^9)
    "yaml_depth": 64,  # nesting of YAML mappings and lists
    "sweep_points": 100_000,  # points of one sweep grid
    "fault_factor": 1e6,  # a straggler's slowdown, a link's bandwidth divisor (several multiply)
    "layers": 100_000,  # a model's layers (per-layer lists are built from it)
    "capacity_factor": 1e3,  # MoE capacity factor (above E / top_k every buffer already holds every token)
}


def limit(name: str) -> float:
    """The bound ``name``: ``MOESIM_MAX_<NAME>`` if set (a positive number), else its default."""
    variable = f"MOESIM_MAX_{name.upper()}"
    text = os.environ.get(variable)
    if text is None:
        return DEFAULTS[name]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(variable, f"must be a positive number, got {text[:40]!r}")
    return value


def check_limit(field: str, name: str, value: float, what: str) -> None:
    """Raise ConfigError(field) if ``value`` exceeds the bound ``name``; the message says how to raise it."""
    bound = limit(name)
    if not value <= bound:  # NaN too
        raise ConfigError(
            field,
            f"{what} {_number(value)} exceeds the limit of {_number(bound)}; set MOESIM_MAX_{name.upper()} to raise it",
        )


def _number(value: float) -> str:
    """A count as an integer (with thousands separators), anything else as %g."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:g}"
