"""A simulated step with its timeline (``simulate_with_trace``) and the trace written to a file: Chrome JSON,
gzipped or not, or Perfetto's protobuf (simulator/outputs/trace_proto.py), atomically and event by event."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from simulator.engine.result import EngineResult
from simulator.outputs.trace import Timeline, chrome_trace, draw_all_ops, trace_events, trace_meta
from simulator.outputs.trace_proto import is_proto_path, write_proto
from simulator.outputs.trace_size import TraceSizeCheck, kept_stages
from simulator.outputs.unnamed_files import open_unnamed, replace_with
from simulator.report.simulate import Report, simulate
from topologies.cluster import ClusterSpec
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec


class TracedRun(NamedTuple):
    """A simulated step with everything needed to draw it."""

    report: Report
    result: EngineResult
    trace: dict | None
    workload: StepWorkload
    cluster: ClusterSpec
    timeline: Timeline


def simulate_with_trace(
    model: ModelSpec | str,
    layout: LayoutSpec | str,
    gpus: int | None = None,
    *,
    stages: Iterable[int] | None = None,
    micro_batches: int | None = None,
    trace: bool = True,
    all_ops: bool | None = None,
    build: bool = True,
    **simulate_keywords: Any,
) -> TracedRun:
    """Simulate one step like ``simulate`` (same keywords), recording a Timeline; with ``trace``, refuse a
    trace over the event limit as the run goes and (``build``) return its Chrome trace, of some ``stages``
    and the first ``micro_batches`` only if given (``all_ops``: see chrome_trace). ``build=False`` leaves
    the trace to ``stream_trace``, which writes it without holding its events."""
    timeline = Timeline()
    probes = (timeline, TraceSizeCheck(stages, micro_batches, timeline)) if trace else (timeline,)
    report = simulate(model, layout, gpus, probes=probes, **simulate_keywords)
    events = None
    if trace and build:
        events = chrome_trace(timeline, stages=stages, micro_batches=micro_batches, all_ops=all_ops)
    return TracedRun(report, timeline.result, events, timeline.workload, timeline.cluster, timeline)


def write_trace(path: str | Path, trace: dict) -> int:
    """Write a trace object as compact JSON, gzipped if ``path`` ends in .gz (Perfetto opens both); returns
    the file size in bytes."""
    return _write_atomically(Path(path), lambda out: out.write(_json(trace)))


def stream_trace(
    path: str | Path,
    timeline: Timeline,
    *,
    stages: Iterable[int] | None = None,
    micro_batches: int | None = None,
    all_ops: bool | None = None,
) -> tuple[int, int]:
    """Write ``chrome_trace``'s JSON (the same bytes) event by event, never holding the events: returns
    (events, file bytes). Gzipped if ``path`` ends in .gz; a name ending in .pftrace[.gz] gets the same events
    in Perfetto's protobuf format (simulator/outputs/trace_proto.py)."""
    keep = kept_stages(timeline.workload, stages)
    all_ops = draw_all_ops(timeline, keep, micro_batches, all_ops)
    count = 0

    def write(out) -> None:
        nonlocal count
        if is_proto_path(path):
            count = write_proto(out, trace_events(timeline, keep, micro_batches, all_ops))
            return
        out.write(b'{"traceEvents":[')
        for event in trace_events(timeline, keep, micro_batches, all_ops):
            out.write((b"," if count else b"") + _json(event))
            count += 1
        out.write(b"]," + _json(trace_meta(timeline, all_ops))[1:])

    size = _write_atomically(Path(path), write)
    return count, size


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _write_atomically(final: Path, write) -> int:
    """Run ``write`` on a temporary file beside ``final`` (through gzip if it ends in .gz, mtime 0: the same
    trace, the same bytes), then rename it: never a truncated trace under the final name. Where the platform
    has unnamed files (simulator/outputs/unnamed_files.py) a kill while it is written leaves nothing behind.
    Returns its size."""
    final.parent.mkdir(parents=True, exist_ok=True)
    descriptor = open_unnamed(final.parent)
    temporary = final.with_name(f".{final.name}.tmp")
    try:
        if descriptor is None:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            named = True
        else:
            named = False
        with open(descriptor, "wb", closefd=False) as raw:
            if final.suffix.lower() == ".gz":
                with gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw, mtime=0) as packed:
                    write(packed)
            else:
                write(raw)
        size = os.fstat(descriptor).st_size
        if named:
            os.replace(temporary, final)
        else:
            replace_with(descriptor, final)
    finally:
        if descriptor is not None:
            os.close(descriptor)
        temporary.unlink(missing_ok=True)
    return size
