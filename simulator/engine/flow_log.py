"""Flow spans: when each flow moved through a network occupied each of its links (simulator/fast/nic_replay.py).

A flow occupies its links from the instant it is started (``FluidNetwork.transfer``) to the instant its
done event fires; zero-byte flows occupy nothing. ``LoggedNetwork`` stands in for a network where a caller
only starts transfers (``run_task``'s ``nic_network``), so the spans are read without touching the network.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable

import simpy

from simulator.streams.network import FluidNetwork

Span = tuple[float, float]  # [start_s, end_s)

# Spans that touch (one flow starting when another ends) may overlap by a few units in the last place once
# their ends are computed along different paths (t0 + offset against a network's own clock): an overlap
# counts only beyond this much of the instant (~450 ulps; far below the 1e-9 the tests hold runs to).
TOUCH_REL = 1e-13


class FlowLog:
    """[start, end) of every flow it was shown, per link, in the order they ended; also per owner (a task's
    own flows) and for flows of no owner (PP sends and DP buckets)."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.spans: dict[Hashable, list[Span]] = {}
        self.unowned: dict[Hashable, list[Span]] = {}
        self.owned: dict[Hashable, dict[Hashable, list[Span]]] = {}
        # Told (links, start_s, end_s) of each flow of no owner as it ends (it may raise to stop the run).
        self.on_unowned: Callable[[tuple[Hashable, ...], float, float], None] | None = None

    def watch(self, links: tuple[Hashable, ...], done: simpy.Event, owner: Hashable = None) -> simpy.Event:
        """Record the flow on ``links`` started now that ends when ``done`` fires; returns ``done``."""
        start_s = self.env.now

        def ended(_event: simpy.Event) -> None:
            if self.env.now > start_s:
                by_link = self.unowned if owner is None else self.owned.setdefault(owner, {})
                for link in links:
                    self.spans.setdefault(link, []).append((start_s, self.env.now))
                    by_link.setdefault(link, []).append((start_s, self.env.now))
                if owner is None and self.on_unowned is not None:
                    self.on_unowned(links, start_s, self.env.now)

        done.callbacks.append(ended)
        return done


class LoggedNetwork:
    """``network`` whose transfers ``log`` watches as ``owner``'s (only ``transfer`` is offered: all run_task
    calls)."""

    __slots__ = ("log", "network", "owner")

    def __init__(self, network: FluidNetwork, log: FlowLog, owner: Hashable = None) -> None:
        self.network, self.log, self.owner = network, log, owner

    def transfer(self, links: Iterable[Hashable], nbytes: float) -> simpy.Event:
        links = tuple(links)
        return self.log.watch(links, self.network.transfer(links, nbytes), self.owner)


def merged(spans: Iterable[Span]) -> tuple[Span, ...]:
    """The union of ``spans`` as disjoint spans in time order (touching ones joined)."""
    out: list[list[float]] = []
    for start_s, end_s in sorted(spans):
        if out and start_s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end_s)
        else:
            out.append([start_s, end_s])
    return tuple((start_s, end_s) for start_s, end_s in out)


class SpanIndex:
    """Spans of one link sorted by start, with the running latest end: whether any of them overlaps a
    given span by a positive length (beyond rounding), in O(log n)."""

    def __init__(self, spans: Iterable[Span]) -> None:
        ordered = sorted(spans)
        self.starts = [start_s for start_s, _ in ordered]
        self.latest_end: list[float] = []
        latest = float("-inf")
        for _, end_s in ordered:
            latest = max(latest, end_s)
            self.latest_end.append(latest)

    def overlaps(self, start_s: float, end_s: float) -> bool:
        """Some span [s, e) overlaps [start_s, end_s) by more than rounding: s < end_s and e > start_s, each
        by more than TOUCH_REL of the instant (the latest end of the spans starting before end_s)."""
        slack_s = TOUCH_REL * abs(end_s)
        before = bisect_left(self.starts, end_s - slack_s)
        return before > 0 and self.latest_end[before - 1] > start_s + slack_s
