"""The trace-event count made before simulating (simulator/outputs/trace_size.py) against the events actually written."""

from __future__ import annotations

from collections import Counter

import pytest

from simulator.engine.engine import Engine
from simulator.outputs.trace_files import simulate_with_trace
from simulator.outputs.trace_size import trace_size
from topologies.errors import ConfigError
from workloads.specs.layouts import layout_preset

BASE = layout_preset("megascale-moe")
SMALL = {"global_batch": 16, "seq_len": 1024}
CASES = {
    "1f1b": (BASE.with_(pp=4), 32, SMALL, None, None),
    "1f1b, some stages and micro-batches": (BASE.with_(pp=4), 32, SMALL, [0, 2], 3),
    "interleaved": (BASE.with_(pp=2, schedule="interleaved", virtual_stages=2), 32, SMALL, None, None),
    "dualpipe": (BASE.with_(pp=4, schedule="dualpipe"), 32, SMALL, None, None),
    "zb1p": (BASE.with_(pp=4, schedule="zb1p"), 32, SMALL, None, 5),
    "dualpipev": (
        BASE.with_(pp=4, schedule="dualpipev", uneven_pp=True),
        32,
        SMALL,
        [1, 3],
        None,
    ),  # 28 layers, 8 blocks
    "cross-node EP, DP 2": (BASE.with_(pp=2, ep=16), 64, {"global_batch": 8, "seq_len": 1024}, None, None),
}


def _written(trace: dict) -> Counter:
    """Events by what decides their number: thread metadata (lanes), NIC counters, everything else."""
    return Counter(
        "lanes" if e["ph"] == "M" and e["name"].startswith("thread") else "counters" if e["ph"] == "C" else "fixed"
        for e in trace["traceEvents"]
    )


@pytest.mark.parametrize("case", CASES)
def test_count_before_simulating_matches_the_trace(case: str) -> None:
    """Every event the workload fixes is counted exactly; lanes never exceed the bound; counters start at
    one point per NIC link of a drawn stage."""
    layout, gpus, sizes, stages, micro_batches = CASES[case]
    run = simulate_with_trace("deepseekmoe", layout, gpus, stages=stages, micro_batches=micro_batches, **sizes)
    size = trace_size(Engine(run.workload, run.cluster), stages, micro_batches)
    written = _written(run.trace)
    assert written["fixed"] == size.exact
    assert written["lanes"] <= size.lane_events_max
    assert written["counters"] >= size.counter_events_min


def test_counters_are_counted_as_they_accrue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cross-node EP loads the NIC per op, so most of its counter points come from timing: a limit between
    the count made before simulating and the full trace is refused during the run, and the full count
    (fixed events + the lane bound + every counter point) is allowed."""
    layout, gpus, sizes, _, _ = CASES["cross-node EP, DP 2"]
    run = simulate_with_trace("deepseekmoe", layout, gpus, **sizes)
    size = trace_size(Engine(run.workload, run.cluster))
    written = _written(run.trace)
    allowed = size.exact + size.lane_events_max + written["counters"]
    assert written["counters"] > 10 * size.counter_events_min  # timing adds most of them
    monkeypatch.setenv("MOESIM_MAX_TRACE_EVENTS", str(allowed))
    simulate_with_trace("deepseekmoe", layout, gpus, **sizes)
    monkeypatch.setenv("MOESIM_MAX_TRACE_EVENTS", str(allowed - 1))
    with pytest.raises(ConfigError, match="MOESIM_MAX_TRACE_EVENTS"):
        simulate_with_trace("deepseekmoe", layout, gpus, **sizes)
    monkeypatch.setenv("MOESIM_MAX_TRACE_EVENTS", str(size.before_run - 1))
    with pytest.raises(ConfigError, match="MOESIM_MAX_TRACE_EVENTS"):
        simulate_with_trace("deepseekmoe", layout, gpus, **sizes)
