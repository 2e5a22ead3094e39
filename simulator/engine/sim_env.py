"""The engine's simpy environment: simpy's own event order, with fewer Python calls per event.

A step of the op-level engine is mostly simpy's machinery (sampled on the Qwen3-235B bench step: the event
loop, ``now``'s property, ``schedule`` and the events' ``__init__`` were ~30% of its CPU). ``Env`` is a
``simpy.Environment`` whose clock is also a plain attribute (``now``: read without a property call), whose
``timeout`` and ``event`` build their events without the two calls of ``Timeout.__init__`` and
``Environment.schedule``, and whose ``run`` steps inline. Every event gets the heap entry simpy gives it
(time, priority, the same event id from the same counter), and is processed with simpy's rules (callbacks in
order, a failed undefused event crashes the run), so a run takes the same event steps in the same order and
gives the same floats (tests/differential/test_sim_env.py runs scenarios on both and compares their logs).
"""

from __future__ import annotations

from heapq import heappop, heappush

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, PENDING, Event, Timeout

# False: the engine runs on plain simpy.Environment (tests/differential/test_sim_env.py compares whole steps on both).
FAST = True


class Env(simpy.Environment):
    """simpy.Environment with ``now`` an attribute, leaner ``timeout``/``event`` and an inlined ``run``."""

    now = 0.0  # NOTE: shadows simpy's property; each instance keeps its own copy equal to _now

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self.now = initial_time
        # NOTE: simpy binds its event classes to the instance only for its own class: bind the ones kept here
        self.process, self.all_of, self.any_of = self.process, self.all_of, self.any_of

    def timeout(self, delay: float = 0, value: object = None) -> Timeout:
        """simpy's Timeout(self, delay, value), scheduled as it schedules itself."""
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        event = Timeout.__new__(Timeout)
        event.env, event.callbacks, event._value, event._delay, event._ok = self, [], value, delay, True
        heappush(self._queue, (self._now + delay, NORMAL, next(self._eid), event))
        return event

    def event(self) -> Event:
        """simpy's Event(self)."""
        event = Event.__new__(Event)
        event.env, event.callbacks = self, []
        return event

    def step(self) -> None:
        """simpy's step, keeping ``now`` with ``_now``."""
        try:
            self._now, _, _, event = heappop(self._queue)
        except IndexError:
            raise EmptySchedule from None
        self.now = self._now
        callbacks, event.callbacks = event.callbacks, None
        try:
            for callback in callbacks:
                callback(event)
        except StopSimulation:
            event.callbacks = callbacks[callbacks.index(callback) + 1 :]
            self.schedule(event, -1)
            raise
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc

    def run(self, until: float | Event | None = None) -> object:
        """simpy's run; without ``until``, its loop of steps inlined (until no event is left)."""
        if until is not None:
            return super().run(until)
        queue = self._queue
        while queue:
            self._now, _, _, event = heappop(queue)
            self.now = self._now
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
        return None


def environment() -> simpy.Environment:
    """A new environment for a simulation: Env, or simpy's own with FAST off."""
    return Env() if FAST else simpy.Environment()


assert Event._value is PENDING  # NOTE: event() relies on simpy's class-level PENDING (simpy 4)
