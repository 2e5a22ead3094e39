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


class SmShare:
    """The SMs a GPU's in-flight communication kernels hold, and compute that progresses on the rest."""

    def __init__(self, env: simpy.Environment, sm_count: int) -> None:
        self.env, self.sm_count = env, sm_count
        self.held = 0
        self._computing: set[simpy.Process] = set()  # compute waiting on its end, woken when the rate changes

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

        NOTE: one plain timeout per rate, interrupted when a communication kernel starts or ends (cheaper
        than waiting on a condition of two events for every compute op)."""
        env = self.env
        process = env.active_process
        remaining = work_s
        while True:
            rate, begin = self.rate(), env.now
            self._computing.add(process)
            try:
                yield env.timeout(remaining / rate)
                return
            except simpy.Interrupt:
                remaining = max(remaining - (env.now - begin) * rate, 0.0)
            finally:
                self._computing.discard(process)

    def _notify(self) -> None:
        for process in self._computing:
            process.interrupt()
        self._computing.clear()
