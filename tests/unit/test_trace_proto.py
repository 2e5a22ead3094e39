"""The Perfetto protobuf trace (simulator/outputs/trace_proto.py) against the Chrome JSON of the same run: decoded
packet by packet, every slice, instant, counter value and flow arrow is the JSON's, on the same named track."""

from __future__ import annotations

import builtins
import gzip
import json

import pytest

from experiments.cli.main import main
from simulator.outputs.trace import chrome_trace
from simulator.outputs.trace_files import simulate_with_trace, stream_trace
from simulator.outputs.trace_proto import is_proto_path
from topologies.errors import ConfigError

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
TE = pb.TrackEvent


def _value(annotation) -> object:
    kind = annotation.WhichOneof("value")
    if kind is None:  # an array
        return [_value(item) for item in annotation.array_values]
    return getattr(annotation, kind)


def _decode(data: bytes) -> tuple[list, dict]:
    """(events, flows) of a .pftrace: events (track path, kind, begin ns, end ns, name, args) in file order, flows
    id -> (sending track, its ns, receiving track, its ns)."""
    trace = pb.Trace.FromString(data)
    names, keys, tracks, open_slices = {}, {}, {}, {}
    events, starts, ends = [], {}, {}
    for packet in trace.packet:
        names.update((e.iid, e.name) for e in packet.interned_data.event_names)
        keys.update((e.iid, e.name) for e in packet.interned_data.debug_annotation_names)
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            tracks[d.uuid] = (*tracks[d.parent_uuid], d.name) if d.HasField("parent_uuid") else (d.name,)
            continue
        event, ns = packet.track_event, packet.timestamp
        path = tracks[event.track_uuid]
        args = {keys[a.name_iid]: _value(a) for a in event.debug_annotations}
        name = names.get(event.name_iid)
        if event.type == TE.TYPE_SLICE_BEGIN:
            open_slices.setdefault(path, []).append(len(events))
            events.append([path, "X", ns, None, name, args])
        elif event.type == TE.TYPE_SLICE_END:
            events[open_slices[path].pop()][3] = ns
        elif event.type == TE.TYPE_COUNTER:
            events.append([path, "C", ns, None, None, {"value": event.double_counter_value}])
        elif event.flow_ids or event.terminating_flow_ids:
            for flow in event.flow_ids:
                starts[flow] = (path, ns)
            for flow in event.terminating_flow_ids:
                ends[flow] = (path, ns)
        else:
            events.append([path, "i", ns, None, name, args])
    assert not any(open_slices.values())  # every begin has its end
    return [tuple(e) for e in events], {flow: (*starts[flow], *ends[flow]) for flow in starts}


def _expected(trace: dict) -> tuple[list, dict]:
    """The same (events, flows) read from the Chrome JSON (through json, as a viewer reads it)."""
    events = json.loads(json.dumps(trace["traceEvents"]))
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    out, starts, ends = [], {}, {}
    for e in events:
        ns = round(e["ts"] * 1000) if "ts" in e else None
        if e["ph"] == "X":
            path = (processes[e["pid"]], threads[(e["pid"], e["tid"])])
            out.append((path, "X", ns, round((e["ts"] + e["dur"]) * 1000), e["name"], e["args"]))
        elif e["ph"] == "i":
            out.append(((processes[e["pid"]], threads[(e["pid"], e["tid"])]), "i", ns, None, e["name"], e["args"]))
        elif e["ph"] == "C":
            out.append(((processes[e["pid"]], e["name"]), "C", ns, None, None, e["args"]))
        elif e["ph"] in ("s", "f"):
            (starts if e["ph"] == "s" else ends)[e["id"]] = ((processes[e["pid"]], threads[(e["pid"], e["tid"])]), ns)
    return out, {flow: (*starts[flow], *ends[flow]) for flow in starts}


def _sorted(events: list) -> list:
    return sorted(events, key=lambda e: (e[0], e[1], e[2], e[3] or 0, e[4] or "", json.dumps(e[5], sort_keys=True)))


@pytest.mark.parametrize("kwargs", [{"global_batch": 30, "stages": [0, 1]}, {"global_batch": 30, "stages": [3]}])
def test_proto_trace_holds_the_json_trace(tmp_path, kwargs) -> None:
    """Every event of the Chrome JSON is in the .pftrace on the track of the same process and thread name,
    with its nanosecond times, name and arguments; the flows join the same two instants. Gzipped, the same."""
    stages = kwargs.pop("stages")
    run = simulate_with_trace("paper-352b", "megascale-moe", 240, stages=stages, build=False, **kwargs)
    built = chrome_trace(run.timeline, stages=stages, all_ops=True)
    count, size = stream_trace(tmp_path / "t.pftrace", run.timeline, stages=stages, all_ops=True)
    data = (tmp_path / "t.pftrace").read_bytes()
    assert (count, size) == (len(built["traceEvents"]), len(data))
    events, flows = _decode(data)
    want_events, want_flows = _expected(built)
    assert _sorted(events) == _sorted(want_events)
    assert flows == want_flows and (len(flows) > 0) == (len(stages) > 1)  # PP arrows only between kept neighbours
    assert {e[1] for e in events} >= {"X", "C"}
    stream_trace(tmp_path / "t.pftrace.gz", run.timeline, stages=stages, all_ops=True)
    assert gzip.decompress((tmp_path / "t.pftrace.gz").read_bytes()) == data


def test_proto_trace_is_smaller_than_the_json(tmp_path) -> None:
    """Interned names make the protobuf file well under the JSON's size for the same events."""
    run = simulate_with_trace("paper-352b", "megascale-moe", 240, global_batch=30, stages=[0, 7], build=False)
    _, json_bytes = stream_trace(tmp_path / "t.json", run.timeline, stages=[0, 7])
    _, proto_bytes = stream_trace(tmp_path / "t.pftrace", run.timeline, stages=[0, 7])
    assert proto_bytes < 0.7 * json_bytes


def test_cli_writes_a_proto_trace(tmp_path, capsys) -> None:
    path = tmp_path / "step.pftrace"
    assert is_proto_path(path) and is_proto_path("A.PFTRACE.GZ") and not is_proto_path("a.json.gz")
    args = ["run", "--gpus", "240", "--global-batch", "30", "--trace-stages", "0,1", "--trace", str(path)]
    assert main(args) == 0
    assert f"wrote {path}" in capsys.readouterr().err
    events, flows = _decode(path.read_bytes())
    assert events and flows
    assert main(["run", "--gpus", "240", "--global-batch", "30", "--trace", str(tmp_path / "t.proto")]) == 2


def test_without_perfetto_the_error_says_what_to_install(tmp_path, monkeypatch, capsys) -> None:
    real_import = builtins.__import__

    def no_perfetto(name, *args, **kwargs):
        if name.startswith("perfetto"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    run = simulate_with_trace("paper-352b", "megascale-moe", 240, global_batch=30, stages=[0], build=False)
    monkeypatch.setattr(builtins, "__import__", no_perfetto)
    with pytest.raises(ConfigError, match=r"pip install 'moesim\[perfetto\]'"):
        stream_trace(tmp_path / "t.pftrace", run.timeline, stages=[0])
    assert not (tmp_path / "t.pftrace").exists()
    assert main(["run", "--gpus", "240", "--global-batch", "30", "--trace", str(tmp_path / "t.pftrace")]) == 2
    assert "moesim[perfetto]" in capsys.readouterr().err  # said before any simulation
