"""SMs of one GPU shared between its communication kernels and the compute that overlaps them.

A communication kernel (an NCCL collective, a DeepEP dispatch or combine) occupies some of the GPU's SMs
for as long as it runs (simulator.costs.kernels.comm_kernel_sms); a compute kernel that runs beside it gets the
rest, so its progress rate is (SMs - held) / SMs of the idle-GPU rate (DeepSeek-V3 report Sec. 3.2.2:
20 of the H800's 132 SMs go to communication, the rest to the overlapped computation). Assumed: a
kernel's throughput is proportional to the SMs it gets (no wave-quantization change, memory-bound
kernels included). Rates change only when a communication kernel starts or ends.
"""

from __future__ import annotations

from collections.abc import Generator

import simpy


class _Run:
    """Compute kernels of one stream back to back, each not before its ready time, at the GPU's current rate.

    ``begins`` and ``ends`` are the plan at that rate; ``at`` is the kernel in progress when the rate last
    changed, with ``left_s`` of its idle-GPU work left at ``since``."""

    __slots__ = ("at", "begins", "ends", "kernels", "left_s", "rate", "since", "timeout")

    def __init__(self, kernels: list[tuple[float, float]], now: float, rate: float) -> None:
        self.kernels, self.rate = kernels, rate
        self.at, self.left_s, self.since = -1, 0.0, now
        self.timeout: simpy.Timeout | None = None
        if len(kernels) == 1:  # NOTE: one kernel, ready now (SmShare.compute): nothing to lay out
            self.begins, self.ends = [now], [now + kernels[0][1] / rate]
        else:
            self.begins, self.ends = [0.0] * len(kernels), [0.0] * len(kernels)
            self.plan(0, now)

    def plan(self, first: int, clock: float) -> None:
        """Lay out kernels ``first`` on at ``rate`` from ``clock`` (kernel ``at`` from ``since``)."""
        rate, kernels = self.rate, self.kernels
        for k in range(first, len(kernels)):
            if k == self.at:
                self.ends[k] = clock = self.since + self.left_s / rate
                continue
            ready_s, work_s = kernels[k]
            if ready_s > clock:  # the host issues it later: the GPU idles until then
                # NOTE: not ``clock = ready_s``: the per-op path waits with env.timeout(ready_s - now), whose
                # end is now + (ready_s - now), which can differ from ready_s in the last bit
                clock = clock + (ready_s - clock)
            self.begins[k] = clock
            self.ends[k] = clock = clock + work_s / rate

    def retime(self, now: float, rate: float) -> None:
        """The rate changes at ``now``: the kernel in progress keeps the work it has done, the rest re-plan."""
        ends, k, last = self.ends, 0, len(self.ends) - 1
        while k < last and not ends[k] > now:  # NOTE: the first kernel ending after now (or the last), as a loop
            k += 1
        if self.begins[k] <= now:  # in progress: the work done at the old rate is kept
            if k != self.at:
                self.at, self.left_s, self.since = k, self.kernels[k][1], self.begins[k]
            self.left_s = max(self.left_s - (now - self.since) * self.rate, 0.0)
            self.since = now
            self.rate = rate
            self.plan(k, now)
        else:
            self.rate = rate
            self.plan(k, self.ends[k - 1] if k else now)


class SmShare:
    """The SMs a GPU's in-flight communication kernels hold, and compute that progresses on the rest."""

    def __init__(self, env: simpy.Environment, sm_count: int) -> None:
        self.env, self.sm_count = env, sm_count
        self.held = 0
        # Compute progress per second, as a fraction of the idle GPU's (at least one SM is left); kept as held changes
        self.rate = max(sm_count, 1) / sm_count
        # compute waiting on its end, re-timed when the rate changes: a _Run, or compute()'s (start, work, rate, timeout)
        self._computing: dict[simpy.Process, _Run | tuple] = {}

    def hold(self, sms: int) -> None:
        """A communication kernel holding ``sms`` SMs starts."""
        self._held(sms)

    def release(self, sms: int) -> None:
        """A communication kernel holding ``sms`` SMs ends."""
        self._held(-sms)

    def _held(self, change: int) -> None:
        self.held += change
        self.rate = max(self.sm_count - self.held, 1) / self.sm_count
        self._notify()

    def compute(self, work_s: float) -> Generator[simpy.Event, object, None]:
        """Run ``work_s`` seconds of idle-GPU compute, slowed while communication kernels hold SMs."""
        env = self.env
        rate = self.rate
        timeout = env.timeout(work_s / rate)
        # NOTE: its _Run is built only if the rate changes before it ends (_notify)
        self._computing[env.active_process] = (env.now, work_s, rate, timeout)
        yield timeout  # (or the timeout _retime moved the process to)
        self._computing.pop(env.active_process, None)

    def _notify(self) -> None:
        # NOTE: re-timed at once, not in an urgent event step of their own as an Interruption would be: nothing
        # runs between the two at this instant that reads or moves the compute (its timeout lies ahead, or is
        # still to be processed after the urgent step), so the new ends are the same floats, one event fewer
        computing, self._computing = self._computing, {}
        for process, run in computing.items():
            if type(run) is tuple:  # one kernel of compute(): the _Run it would have had from its start
                start_s, work_s, rate, timeout = run
                run = _Run([(start_s, work_s)], start_s, rate)
                run.timeout = timeout
            self._retime(process, run)

    def _retime(self, process: simpy.Process, run: _Run) -> None:
        """Re-plan ``run`` at the current rate and move ``process`` to a timeout at its new end."""
        env = self.env
        run.retime(env.now, self.rate)
        last = len(run.ends) - 1  # its own work left over its rate, as an interrupted timeout would wait
        later = env.timeout(run.left_s / run.rate if run.at == last else run.ends[last] - env.now)
        # NOTE: what simpy's Interruption does before resuming a process (simpy/events.py, 4.1)
        run.timeout.callbacks.remove(process._resume)
        later.callbacks.append(process._resume)
        process._target = later
        run.timeout = later
        self._computing[process] = run
