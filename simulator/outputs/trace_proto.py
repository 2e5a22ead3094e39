"""The trace of simulator/outputs/trace.py in Perfetto's own protobuf format (``.pftrace``: TrackEvent packets).

The same events as the Chrome JSON (simulator/outputs/trace.py ``trace_events``; ``stream_trace`` writes this format
for a name ending in .pftrace or .pftrace.gz), converted one by one and written through the
``perfetto`` package's StreamingTraceProtoBuilder, so the file is never held in memory either: a stage is a
process track, each of its threads a child track in the JSON's order, a complete event a slice begin and
end, a counter a counter track, a PP send's arrow a flow between two instants. Event names and argument
names are interned once per trace (InternedData on one packet sequence), which is what makes it smaller than
the JSON (https://perfetto.dev/docs/reference/synthetic-track-event). Needs ``pip install 'moesim[perfetto]'``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO

from topologies.errors import ConfigError

SEQUENCE_ID = 1  # every packet on one trusted sequence: interned names stay valid to the end
SUFFIXES = (".pftrace", ".pftrace.gz")


def is_proto_path(path: str | Path) -> bool:
    """Whether ``path`` names a protobuf trace (else the Chrome JSON)."""
    return str(path).lower().endswith(SUFFIXES)


def protos() -> tuple[Any, Any]:
    """(StreamingTraceProtoBuilder, the perfetto_trace_pb2 module), or a ConfigError saying what to install."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder
    except ImportError:
        raise ConfigError(
            "trace",
            "a .pftrace needs the perfetto package: pip install 'moesim[perfetto]' (or write FILE.json[.gz])",
        ) from None
    return StreamingTraceProtoBuilder, perfetto_trace_pb2


def _ns(us: float) -> int:
    return round(us * 1000)


class _Converter:
    """Chrome trace events in, TracePackets out (``write``), with the tracks and interned names so far."""

    def __init__(self, builder: Any, pb: Any) -> None:
        self.builder, self.pb = builder, pb
        self.tracks: dict[tuple, int] = {}  # (pid,) process, (pid, tid) thread, (pid, counter name) -> uuid
        self.pending: dict[tuple, list[dict]] = {}  # events of a thread whose name has not come yet
        self.names: dict[str, int] = {}  # event name -> iid
        self.keys: dict[str, int] = {}  # argument name -> iid
        self.packets = 0

    def _packet(self) -> Any:
        packet = self.builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        if not self.packets:
            packet.sequence_flags = self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        return packet

    def _write(self, packet: Any) -> None:
        self.builder.write_packet(packet)
        self.packets += 1

    def _track(self, key: tuple, name: str, parent: int | None = None, rank: int = 0, counter: bool = False) -> int:
        uuid = self.tracks[key] = len(self.tracks) + 1
        packet = self._packet()
        descriptor = packet.track_descriptor
        descriptor.uuid, descriptor.name, descriptor.sibling_order_rank = uuid, name, rank
        descriptor.child_ordering = self.pb.TrackDescriptor.EXPLICIT
        if parent is not None:
            descriptor.parent_uuid = parent
        if counter:
            descriptor.counter.SetInParent()
        self._write(packet)
        return uuid

    def _iid(self, table: dict[str, int], interned: Any, text: str) -> int:
        """``text``'s interned id, adding it to ``interned`` (a packet's InternedData field) if new."""
        iid = table.get(text)
        if iid is None:
            iid = table[text] = len(table) + 1
            entry = interned.add()
            entry.iid, entry.name = iid, text
        return iid

    def _event(self, track: int, kind: Any, ts_us: float, name: str | None = None, args: dict | None = None) -> Any:
        packet = self._packet()
        packet.timestamp = _ns(ts_us)
        if self.packets:  # it may name interned strings (the first packet clears the state, after it all need it)
            packet.sequence_flags = self.pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        event = packet.track_event
        event.type, event.track_uuid = kind, track
        if name is not None:
            event.name_iid = self._iid(self.names, packet.interned_data.event_names, name)
        for key, value in (args or {}).items():
            annotation = event.debug_annotations.add()
            annotation.name_iid = self._iid(self.keys, packet.interned_data.debug_annotation_names, key)
            _annotate(annotation, value)
        return packet

    def convert(self, event: dict) -> None:
        """Write the packets of one Chrome trace event."""
        phase, pid = event["ph"], event["pid"]
        if phase == "M":
            if event["name"] == "process_name":
                self._track((pid,), event["args"]["name"], rank=pid)
            elif event["name"] == "thread_name":
                tid = event["tid"]
                self._track((pid, tid), event["args"]["name"], self.tracks[(pid,)], rank=tid)
                for waiting in self.pending.pop((pid, tid), ()):
                    self.convert(waiting)
            return  # sort indices: the ranks above
        if phase == "C":
            key = (pid, event["name"])
            track = self.tracks.get(key) or self._track(key, event["name"], self.tracks[(pid,)], counter=True)
            packet = self._event(track, self.pb.TrackEvent.TYPE_COUNTER, event["ts"])
            packet.track_event.double_counter_value = event["args"]["value"]
            self._write(packet)
            return
        track = self.tracks.get((pid, event["tid"]))
        if track is None:  # an instant marker before its thread's name
            self.pending.setdefault((pid, event["tid"]), []).append(event)
            return
        types = self.pb.TrackEvent
        if phase == "X":
            self._write(self._event(track, types.TYPE_SLICE_BEGIN, event["ts"], event["name"], event.get("args")))
            self._write(self._event(track, types.TYPE_SLICE_END, event["ts"] + event["dur"]))
        elif phase == "i":
            self._write(self._event(track, types.TYPE_INSTANT, event["ts"], event["name"], event.get("args")))
        elif phase in ("s", "f"):  # a PP send's arrow: from an instant on the sender's NIC to one on its receiver
            packet = self._event(track, types.TYPE_INSTANT, event["ts"], event["name"])
            ids = packet.track_event.flow_ids if phase == "s" else packet.track_event.terminating_flow_ids
            ids.append(event["id"])
            self._write(packet)
        else:
            raise ValueError(f"trace_proto: no conversion for Chrome trace phase {phase!r}")

    def finish(self) -> None:
        """Threads named by no thread_name event (none in trace_events' output) get a plain name."""
        for (pid, tid), events in list(self.pending.items()):
            self._track((pid, tid), f"thread {tid}", self.tracks[(pid,)], rank=tid)
            for event in events:
                self.convert(event)
        self.pending.clear()


def _annotate(annotation: Any, value: object) -> None:
    """Set a DebugAnnotation's value as json.dumps would write it (a str enum as its value)."""
    if isinstance(value, bool):
        annotation.bool_value = value
    elif isinstance(value, int):
        annotation.int_value = value
    elif isinstance(value, float):
        annotation.double_value = value
    elif isinstance(value, (list, tuple)):
        for item in value:
            _annotate(annotation.array_values.add(), item)
    elif isinstance(value, Enum):
        _annotate(annotation, value.value)
    else:
        annotation.string_value = str(value)


def write_proto(out: BinaryIO, events: Iterable[dict]) -> int:
    """Write Chrome trace ``events`` to ``out`` as Perfetto protobuf packets; returns how many were converted."""
    builder_type, pb = protos()
    converter = _Converter(builder_type(out), pb)
    count = 0
    for event in events:
        converter.convert(event)
        count += 1
    converter.finish()
    return count
