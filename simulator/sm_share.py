"""SMs of one GPU shared between its communication kernels and the compute that overlaps them.

A communication kernel (an NCCL collective, a DeepEP dispatch or combine) occupies some of the GPU's SMs
for as long as it runs (simulator.costs.comm_kernel_sms); a compute kernel that runs beside it gets the
rest, so its progress rate is (SMs - held) / SMs of the idle-GPU rate (DeepSeek-V3 report Sec. 3.2.2:
20 of the H800's 132 SMs go to communication, the rest to the overlapped computation). Assumed: a
kernel's throughput is proportional to the SMs it gets (no wave-quantization change, memory-bound
kernels included). Rates change only when a communication kernel starts or ends.
"""

from __future__ import annotations

from collections.abc import Generator

import simpy
from simpy.core import URGENT
from simpy.events import Event


class SmShare:
    """The SMs a GPU's in-flight communication kernels hold, and compute that progresses on the rest."""

    def __init__(self, env: simpy.Environment, sm_count: int) -> None:
        self.env, self.sm_count = env, sm_count
        self.held = 0
        # Compute waiting on its end, re-timed when the rate changes: process -> [work left, since, rate, end]
        self._computing: dict[simpy.Process, list] = {}

    def hold(self, sms: int) -> None:
        """A communication kernel holding ``sms`` SMs starts."""
        self.held += sms
        self._notify()

    def release(self, sms: int) -> None:
        """A communication kernel holding ``sms`` SMs ends."""
        self.held -= sms
        self._notify()

    def rate(self) -> float:
        """Compute progress per second, as a fraction of the idle GPU's (at least one SM is left)."""
        return max(self.sm_count - self.held, 1) / self.sm_count

    def compute(self, work_s: float) -> Generator[simpy.Event, object, None]:
        """Run ``work_s`` seconds of idle-GPU compute, slowed while communication kernels hold SMs.

        NOTE: one plain timeout per rate. When a communication kernel starts or ends, an urgent event at that
        instant re-times the waiting process onto a new timeout, as ``Process.interrupt`` would have the
        process do itself (same event steps, so the same times), without throwing an exception into it."""
        env = self.env
        rate = self.rate()
        end = env.timeout(work_s / rate)
        process = env.active_process
        self._computing[process] = [work_s, env.now, rate, end]
        yield end  # the process resumes on the last timeout it was moved to
        self._computing.pop(process, None)

    def _notify(self) -> None:
        for process, work in self._computing.items():
            retime = Event(self.env)
            retime._ok, retime._value = True, None  # triggered now, urgently: an Interruption's event step
            retime.callbacks.append(lambda _e, process=process, work=work: self._retime(process, work))
            self.env.schedule(retime, URGENT)
        self._computing.clear()

    def _retime(self, process: simpy.Process, work: list) -> None:
        """Move ``process`` from its compute's timeout to one for the work left at the current rate."""
        env = self.env
        left_s, since, rate, end = work
        left_s = max(left_s - (env.now - since) * rate, 0.0)
        rate = self.rate()
        later = env.timeout(left_s / rate)
        # NOTE: what simpy's Interruption does before resuming a process (simpy/events.py, 4.1)
        end.callbacks.remove(process._resume)
        later.callbacks.append(process._resume)
        process._target = later
        self._computing[process] = [left_s, env.now, rate, later]
