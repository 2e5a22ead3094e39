"""A GPU's compute turns: one kernel at a time, first come first served (DualPipe's F&B lanes, simulator/streams/tasks.py).

``Turns`` grants turns in exactly the order of ``simpy.Resource(capacity=1)`` (a free turn is granted when asked, as a
scheduled event), without its request and release objects. A released turn passes to the first waiter at once, where
Resource passes it when a release event is processed: the same waiter at the same simulated time, its grant one event
step earlier within that instant and one event fewer per handoff (tests/differential/test_oplevel_paths.py compares
the two; reproduce all's CSVs are bit-identical).
"""

from __future__ import annotations

from collections import deque

import simpy
from simpy.events import Event


class Turns:
    """The compute turns of one GPU, held by one kernel at a time."""

    __slots__ = ("busy", "env", "waiting")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.busy = False
        self.waiting: deque[Event] = deque()

    def request(self) -> Event:
        """An event that fires when the caller holds the GPU."""
        event = Event(self.env)
        self.waiting.append(event)
        self._grant()
        return event

    def take(self) -> Event | None:
        """``request``, but a GPU that is free with no one waiting is the caller's at once (None: nothing to wait
        for): the same first-come-first-served order with one event fewer (the combined 1F1B's shared GPU)."""
        if self.busy or self.waiting:
            return self.request()
        self.busy = True
        return None

    def release(self) -> None:
        """The holder ends its kernel; the first waiter gets the GPU now."""
        self.busy = False
        self._grant()

    def _grant(self) -> None:
        if self.waiting and not self.busy:
            self.busy = True
            self.waiting.popleft().succeed()
