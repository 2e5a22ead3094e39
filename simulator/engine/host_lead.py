"""The host's lead from one pipeline task into the next (issue 40: the host as a resource across tasks).

One CPU thread per GPU issues a stage's tasks in program order. Where it does not wait for the GPU between tasks
(``StepWorkload.host_runs_ahead``: Megatron-Core's interleaved schedule, or no pipeline), it begins issuing a task as
soon as it has issued the one before, so the task's kernels before its first host sync are issued ``lead`` before
the task starts (OpCosts.ahead: the GPU need not wait for them), or after it when the host is behind (lead < 0: the
GPU waits). In a task with a host sync the host waits at each sync for the GPU and issues the ops after it from the
sync's completion, so it is free for the next task once it has issued the ops after the task's last sync
(``TaskTiming.host_free_s``: the last sync's end plus their issue time, OpCosts.host_free_s), which may come before
the task ends (the GPU still runs them: Megatron-Core's alltoall dispatcher syncs on the tokens per expert in each
MoE layer's dispatch, and the host then issues the layer's expert part and the next task's first layers while the
GPU runs that expert part) or after it (a lead < 0). The lead is at most the issue time of the next task's ops before
its first sync (more is the same timing), so the host is never more than one task's kernels ahead, well within
CUDA's launch queue.
"""

from __future__ import annotations

from simulator.streams.op_costs import OpCosts


def lead_s(begin_s: float, host_end_s: float | None, costs: OpCosts) -> float:
    """The host's lead at a task beginning at ``begin_s`` (None: the host began with the task)."""
    if host_end_s is None:
        return 0.0
    return min(begin_s - host_end_s, costs.host_ahead_s)


def host_end_s(begin_s: float, lead: float, costs: OpCosts) -> float | None:
    """When the host finished issuing a task that began at ``begin_s`` with ``lead`` (None: it has a host sync, and
    its run says: ``TaskTiming.host_free_s``)."""
    if costs.has_host_sync:
        return None
    return begin_s - lead + costs.host_ahead_s
