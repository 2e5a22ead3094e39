"""``moesim search --fix`` values checked against the search space before any work: a value the space never
takes would leave no layout, and the search would end in "no layout fits in memory" after counting them all."""

from __future__ import annotations

from typing import Any

from topologies.errors import ConfigError

JOB_SIZED = ("intra_size", "pp", "ep")  # dimensions whose values come from the job: positive integers


def space_choices(space: Any) -> dict[str, set[str]]:
    """The values (lower-case text, as ``SearchSpace.keeps`` compares them) of the dimensions a SearchSpace lists
    (``space``: not imported, experiments/search/space.py imports this module)."""
    listed: dict[str, set[Any]] = {
        "attention": {attention for attention, _ in space.modes},
        "ffn": {ffn for _, ffn in space.modes},
        "cp": set(space.cp),
        "etp": set(space.etp),
        "ep_max_nodes": set(space.ep_max_nodes),
        "micro_batch": set(space.micro_batches),
        "schedule": {s.name for s in space.schedules},
        "virtual_stages": {s.chunks for s in space.schedules},
        "ep_overlap": {s.ep_overlap for s in space.schedules} | {True for s in space.schedules if s.layerwise_with_ep},
        "token_dispatcher": set(space.dispatchers),  # none: the space keeps the base layout's
    }
    recompute = [choice.get("recompute") for tier in space.recompute_tiers for choice in tier]
    if None not in recompute:  # else (narrow) some choice keeps the base layout's recompute: any may be fixed
        listed["recompute"] = set(recompute)
    return {key: {str(value).lower() for value in values} for key, values in listed.items()}


def check_fixed(key: str, value: str, choices: set[str] | None) -> None:
    """Refuse a ``--fix`` value the space never takes: one of ``choices`` where the space lists them, a positive
    integer for a dimension that the job sizes."""
    if key in JOB_SIZED:
        if not (value.isdigit() and int(value) >= 1):
            raise ConfigError("fix", f"{key}={value!r}: {key} is a positive integer")
    elif choices is not None and value.lower() not in choices:
        takes = f"{key} takes {', '.join(sorted(choices))}" if choices else f"this space does not search {key}"
        raise ConfigError("fix", f"{key}={value!r} is not in the search space; {takes}")
