"""A GPU's compute turns: one kernel at a time, first come first served (DualPipe's F&B lanes, simulator/streams/tasks.py).

``Turns`` grants turns in exactly the order of ``simpy.Resource(capacity=1)``, without its request and
release objects. With ``PROMPT`` off it also takes Resource's event steps (a free turn is granted when asked,
as a scheduled event; a released turn passes to the first waiter when a release event is processed); with
it on (the default) a free turn is held at once and a released one passes to the first waiter at once: the
same holders at the same simulated times, an event or two fewer per compute op (tests/differential/test_turns_prompt.py).
"""

from __future__ import annotations

from collections import deque

import simpy
from simpy.events import Event

# NOTE: who gets the GPU is decided by the same call either way (the first waiter, at a request or a release);
# PROMPT only moves, within that instant, when the holder resumes (earlier). False: simpy.Resource's steps.
PROMPT = True
GRANTED = object()  # request()'s answer when the caller holds the GPU at once: nothing to wait for


class Turns:
    """The compute turns of one GPU, held by one kernel at a time."""

    __slots__ = ("busy", "env", "waiting")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.busy = False
        self.waiting: deque[Event] = deque()

    def request(self) -> Event | object:
        """An event that fires when the caller holds the GPU, or GRANTED: it holds it now (PROMPT)."""
        if PROMPT and not self.busy and not self.waiting:
            self.busy = True
            return GRANTED
        event = Event(self.env)
        self.waiting.append(event)
        self._grant()
        return event

    def release(self) -> None:
        """The holder ends its kernel; the first waiter gets the GPU (PROMPT: now; else once a release event
        is processed)."""
        self.busy = False
        if self.waiting and PROMPT:
            self._grant()
        elif self.waiting:  # with no one waiting, simpy's release event changes nothing: skip it
            event = Event(self.env)
            event.callbacks.append(self._grant)
            event.succeed()

    def _grant(self, _event: Event | None = None) -> None:
        if self.waiting and not self.busy:
            self.busy = True
            self.waiting.popleft().succeed()
