"""The op-level engine's cheaper paths against the ones they replace, on steps that exercise them.

- GPU turns (simulator/streams/turns.py) and the NIC + NVLink join of a cross-node collective (simulator.streams.tasks.both)
  against simpy.Resource(capacity=1) and ``first & second``: the same floats, fewer events (a released turn passes
  on at once, not at a release event's step; ``both`` takes a Condition's steps).
- SM-share re-timing at once (simulator/streams/sm_share.py) against Process.interrupt, as it was: the same floats,
  fewer events.
- A free GPU turn taken at once (Turns.take, the combined 1F1B's shared GPU) against one granted by an event: the
  same floats, fewer events.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest
import simpy

from simulator.engine.engine import Engine, EngineResult
from simulator.streams import tasks
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset


@pytest.fixture(autouse=True)
def _event_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """These paths are the event path's: tasks run as simpy processes, not laid out as closed tasks
    (simulator/streams/closed_task.py, compared with them in tests/scenarios/test_closed_task.py)."""
    monkeypatch.setattr(tasks, "CLOSED", False)


def _cross_node_overlap() -> tuple[StepWorkload, int]:
    """deepseekmoe, PP 2 x VP 2 interleaved with EP overlap (DualPipe-style F&B lanes), EP 16 over 2 nodes:
    tasks share each stage's NIC with PP sends and DP buckets, so they run at op level."""
    layout = layout_preset("megascale-moe").with_(
        pp=2, ep=16, ep_overlap=True, schedule="interleaved", virtual_stages=2
    )
    return StepWorkload(model_preset("deepseekmoe"), layout, 32, 8, global_batch=16, seq_len=4096), 32


def _two_streams() -> tuple[StepWorkload, int]:
    """deepseekmoe, PP 2 on 16 GPUs with MegaScale-MoE's comm stream: compute beside collectives."""
    layout = layout_preset("megascale-moe").with_(pp=2)
    return StepWorkload(model_preset("deepseekmoe"), layout, 16, 8, global_batch=8, seq_len=4096), 16


def _run(case) -> tuple[EngineResult, int]:
    workload, gpus = case
    engine = Engine(workload, cluster_preset("h800", gpus), memoize=False)
    result = engine.run()
    return result, next(engine.env._eid)  # events scheduled


def _records(result: EngineResult) -> list:
    return [[(task, begin, end) for task, begin, end in log.tasks] for log in result.stages]


class ResourceTurns:
    """GPU turns as they were: a simpy.Resource of capacity 1."""

    def __init__(self, env: simpy.Environment) -> None:
        self.resource = simpy.Resource(env, capacity=1)

    def request(self) -> simpy.Event:
        return self.resource.request()

    def release(self) -> None:
        self.resource.release(self.resource.users[0])  # the one holder


class InterruptSmShare(tasks.SmShare):
    """SM sharing as it was: compute waits on a timeout and is interrupted when a communication kernel
    starts or ends."""

    def __init__(self, env: simpy.Environment, sm_count: int) -> None:
        super().__init__(env, sm_count)
        self._waiting: set[simpy.Process] = set()

    def compute(self, work_s: float) -> Generator[simpy.Event, object, None]:
        env, process, remaining = self.env, self.env.active_process, work_s
        while True:
            rate, begin = self.rate, env.now
            self._waiting.add(process)
            try:
                yield env.timeout(remaining / rate)
                return
            except simpy.Interrupt:
                remaining = max(remaining - (env.now - begin) * rate, 0.0)
            finally:
                self._waiting.discard(process)

    def _notify(self) -> None:
        for process in self._waiting:
            process.interrupt()
        self._waiting.clear()


def test_turns_and_joins_give_simpys_resource_and_condition_times(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_events = _run(_cross_node_overlap())
    monkeypatch.setattr(tasks, "Turns", ResourceTurns)
    monkeypatch.setattr(tasks, "both", lambda env, first, second: first & second)
    reference, reference_events = _run(_cross_node_overlap())
    assert fast_events < reference_events
    assert fast.simulated_ops == reference.simulated_ops > 0
    assert fast.step_time_s == reference.step_time_s
    assert _records(fast) == _records(reference)
    assert fast.network_bytes == reference.network_bytes


@pytest.mark.parametrize("case", [_cross_node_overlap, _two_streams])
def test_sm_retiming_gives_interrupts_times_with_fewer_events(monkeypatch: pytest.MonkeyPatch, case) -> None:
    fast, fast_events = _run(case())
    monkeypatch.setattr(tasks, "SmShare", InterruptSmShare)
    reference, reference_events = _run(case())
    assert fast_events < reference_events
    assert fast.step_time_s == reference.step_time_s
    assert _records(fast) == _records(reference)
    assert [log.exposed_comm_s for log in fast.stages] == [log.exposed_comm_s for log in reference.stages]


def _shared_gpu() -> tuple[StepWorkload, int]:
    """deepseekmoe, PP 2 x VP 2 with Megatron-Core's EP overlap and plain all-to-alls (no fused GEMM + collective),
    EP 16 over 2 nodes: the combined 1F1B runs the unpermutes on the comm stream, so its kernels take turns."""
    layout = layout_preset("megascale-moe").with_(
        pp=2, ep=16, ep_overlap=True, schedule="interleaved", virtual_stages=2, intra_op_overlap=False
    )
    return StepWorkload(model_preset("deepseekmoe"), layout, 32, 8, global_batch=16, seq_len=4096), 32


class GrantedTurns(tasks.Turns):
    """Every turn granted through an event, as ``request`` does (no Turns.take shortcut)."""

    def take(self) -> simpy.Event:
        return self.request()


def test_a_free_turn_taken_at_once_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_events = _run(_shared_gpu())
    monkeypatch.setattr(tasks, "Turns", GrantedTurns)
    reference, reference_events = _run(_shared_gpu())
    assert fast.simulated_ops == reference.simulated_ops > 0
    assert fast.step_time_s == reference.step_time_s
    assert _records(fast) == _records(reference)
    assert fast_events < reference_events
