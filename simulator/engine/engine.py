"""The simpy engine: one training step of a pipeline, assembled from a placement and a task timer.

The pipeline logic here (stage loop, PP sends, DP parameter gathers and gradient reductions, optimizer
step) is written once. A placement (simulator/engine/placement.py: folded, one representative per stage;
simulator/engine/unfolded.py: every GPU) says where tasks run and which links PP, DP and task traffic load; a
task timer (simulator/engine/timer.py: memoized, or every op at op level) turns a task into simulated time.
``Engine(..., placement="folded", memoize=True)`` is the fast default (tasks that use the NIC run at op level:
memoizing them would be exact only alone on it); ``memoize=False`` runs every task at op level, the differential
reference; ``placement="unfolded"`` is the independent check of folding (tests/differential/test_unfolded.py) and always runs
at op level. The engine knows nothing of how it is sped up from outside: the steady-state shortcut
(simulator/fast/steady.py) is a step runner that calls it, and reads what it needs through probes. The schedule (workloads/schedules/base.py) gives each stage's task order and what
each task receives and sends.

Observers (trace, link statistics, bench, the steady shortcut's ledger) are probes (simulator/engine/probes.py): the engine tells them of
each task, transfer, rate change and the step's end; with none, no event is built for them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import simpy

from simulator.costs.calibration import DEFAULT_CALIBRATION, Calibration
from simulator.costs.optimizer_step import newton_schulz_s, optimizer_step_s
from simulator.engine import dp_bytes
from simulator.engine.faults import Faults
from simulator.engine.gc_budget import fewer_collections
from simulator.engine.grad_sync import (
    ChunkSyncs,
    EarlyBuckets,
    ParamGather,
    buckets_during_last_backward,
    chunk_syncs,
    chunks_gathered,
    forward_ends_s,
    per_chunk_sync,
)
from simulator.engine.host_lead import host_end_s, lead_s
from simulator.engine.placement import DpBucket, FoldedPlacement, Placement
from simulator.engine.probes import Probe, Transfer, reads_tasks, start_probes, subscribed
from simulator.engine.ranks import Place
from simulator.engine.result import EngineResult, StageLog, phase_spans
from simulator.engine.sim_env import environment
from simulator.engine.timer import CostCache, MemoTimer, OpTimer
from simulator.engine.unfolded import UnfoldedPlacement
from simulator.streams.tasks import TaskTiming
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from topologies.hardware import GpuSpec
from workloads.graph.optimizer_work import optimizer_shard, stage_newton_schulz
from workloads.graph.step import StepWorkload
from workloads.schedules.pipeline_tasks import FORWARD, Task


class Engine:
    """Simulates one step of ``workload`` on ``cluster``, on a placement, with a task timer."""

    def __init__(
        self,
        workload: StepWorkload,
        cluster: ClusterSpec,
        calibration: Calibration = DEFAULT_CALIBRATION,
        *,
        placement: str | Placement = "folded",
        memoize: bool = True,
        faults: Faults | None = None,
        probes: Iterable[Probe] = (),
        timings: dict | None = None,
        costs: CostCache | None = None,
    ) -> None:
        """``memoize``: time each distinct task once where that is exact (``Placement.memoizable``), else every op;
        ``timings``: a memo of task timings to share with other engines of the same model, layout and cluster
        (the steady-state shortcut's runs, simulator/fast/steady.py); ``costs``: a cost cache to share, made with the
        cluster's NIC rate (its DP rings' NIC shares are the step's, ``nic_shares``)."""
        self.probes = subscribed(probes)  # observers of this run (simulator/engine/probes.py)
        if isinstance(placement, str):
            placement = make_placement(placement, environment(), workload, cluster, faults or Faults())
        elif faults is not None:
            raise ConfigError("faults", "give faults to the Placement object, not to the engine")
        self.workload, self.cluster, self.cal, self.placement = workload, cluster, calibration, placement
        self.gpu = cluster.gpu
        self.env = placement.env
        self.network = placement.network
        self.stage_faults = placement.stage_faults
        self._costs = costs = costs or CostCache(workload, cluster.gpu, calibration, cluster.nic_effective_Bps)
        # task_timing works in every engine (experiments read it); tasks replay it only where exact.
        self._memo = MemoTimer(self.env, costs, placement.stage_faults)
        if timings is not None:
            self._memo.memo = timings
        self.memoize = memoize and placement.memoizable
        # Tasks on the folded placement's NIC are timed alone with it (task_timing); elsewhere on NVLink alone
        self._nic_alone = memoize and isinstance(placement, FoldedPlacement) and workload.tasks_use_nic
        intervals = reads_tasks(self.probes)  # op intervals recorded only for a probe told of tasks
        self.timer: MemoTimer | OpTimer = self._memo if self.memoize else OpTimer(placement, costs, intervals=intervals)
        self._logs = {place: StageLog() for place in placement.places}
        # Replica 0, rank 0 stands for its stage in the EngineResult, so build_report works on either placement.
        self.stages = [self._logs[Place(0, stage, 0)] for stage in range(workload.pp)]
        self._arrivals: dict[tuple, simpy.Event] = {}
        self._sent_at: dict[tuple, float] = {}
        self._numbers = {place: number for number, place in enumerate(placement.places)}  # PP arrivals' keys
        self._pp_bytes, self._pp_split = workload.pp_bytes_per_gpu, workload.pp_split
        self._per_chunk = per_chunk_sync(workload)  # the interleaved schedule's per-chunk grad sync
        self._buckets_per_step = workload.layers_per_chunk * workload.chunks  # DP buckets: one per layer

    @property
    def simulated_ops(self) -> int:
        """Ops simulated so far: memoized timings plus op-level runs."""
        return self._memo.simulated_ops + (self.timer.simulated_ops if self.timer is not self._memo else 0)

    def task_timing(self, key: tuple, stage: int | None = None) -> TaskTiming:
        """Time a task alone, at op level, in a private environment (exact: see simulator/engine/timer.py). Where the
        step's tasks put bytes on the folded placement's NIC (cross-node EP), with an idle NIC beside its NVLink: on
        NVLink alone a cross-node all-to-all would move at NVLink speed. Experiments read it
        (simulator/engine/timing.py); the step's tasks never do."""
        nic = self._nic_alone and stage is not None
        return self._memo.task_timing(key, stage, self.cluster.nic_effective_Bps if nic else 0.0)

    # --- pipeline ----------------------------------------------------------------------------------
    # NOTE: a PP arrival is keyed (direction, micro-batch, chunk, the receiving place's number in
    # ``placement.places``): ints, hashed in C, where a Place's hash is Python code (a frozen dataclass)
    def _arrival(self, key: tuple) -> simpy.Event:
        arrival = self._arrivals.get(key)  # NOTE: one lookup
        if arrival is None:
            arrival = self._arrivals[key] = self.env.event()
        return arrival

    def _send(self, src: Place, dst: Place, key: tuple) -> None:
        """The PP send ``key`` from ``src`` to ``dst``: it leaves one NIC latency from now and its arrival fires when
        its bytes land.

        NOTE: two callbacks, not a process: no process start and end events and no generator (a fifth of an
        op-level step's events). The latency timeout is scheduled as the task ends, not an event step later as
        the process would have started: the same instant, and the same step results (tests/scenarios/test_pipeline.py)."""
        nbytes, env, placement, split = self._pp_bytes, self.env, self.placement, self._pp_split

        def leave(_event: simpy.Event) -> None:
            start = env.now
            landed = placement.transfer(placement.pp_links(src, dst), nbytes / split)
            landed.callbacks.append(lambda _e: land(start) if split == 1 else gather(start))

        def gather(start: float) -> None:  # a split send's all-gather on the receivers' NVLink ring (SC21 Sec. 4.1)
            gathered = placement.transfer(placement.tp_ring_links(dst), nbytes * (split - 1) / split)
            gathered.callbacks.append(lambda _e: land(start))

        def land(start: float) -> None:
            for probe in self.probes:
                probe.on_transfer(Transfer("pp", src.stage, dst.stage, start, env.now, nbytes, key[:-1] + (dst.stage,)))
            self._arrival(key).succeed()

        env.timeout(self.cluster.nic_latency_s).callbacks.append(leave)

    def _stage(
        self,
        place: Place,
        gather: ParamGather | None,
        syncs: ChunkSyncs | None = None,
        early: EarlyBuckets | None = None,
    ):
        """Run ``place``'s tasks in order; ``gather``: its DP weight gather (grad_sync.ParamGather); ``syncs``: the
        model chunks whose gradient reduction starts after a task (the interleaved schedule's per-chunk grad sync,
        ``chunk_syncs``); ``early``: the task during which the gradient buckets start as they fill
        (``buckets_during_last_backward``)."""
        env, log, probes, run = self.env, self._logs[place], self.probes, self.timer.run
        stage, schedule, sent_at = place.stage, self.workload.schedule, self._sent_at
        number = self._numbers[place]
        # the place of every stage this one exchanges data with (its own included), and its number
        peers = [(peer, self._numbers[peer]) for peer in map(place.at_stage, range(self.workload.pp))]
        tasks, exposed = log.tasks, log.exposed_comm_s
        first_forward = True
        held_s = 0.0  # a chunk's first forward held for its weights (after it ends): told with the next task
        runs_ahead, host_end, lead = self.workload.host_runs_ahead, None, 0.0  # the host's lead (host_lead.py)
        for task in self.workload.stage_order(stage):
            pp_wait_s, dp_wait_s, held_s = 0.0, held_s, 0.0  # this task's waits (told to the probes)
            for flow in schedule.inputs(stage, task):
                key = (flow[0], flow[1], flow[2], number)
                arrival = self._arrival(key)
                if not arrival.triggered:
                    wait_start = env.now
                    yield arrival
                    sent = sent_at.get(key, wait_start)
                    wait_s = env.now - max(wait_start, sent)
                    log.pp_wait_s += wait_s
                    pp_wait_s += wait_s
            if first_forward and gather is not None:
                if not gather.started:  # not aligned: the first forward's pre-hook starts the gather
                    self._start_gather(place, gather)
                if not gather.gate.triggered:
                    wait_start = env.now
                    yield gather.gate
                    log.dp_exposed_s += env.now - wait_start
                    dp_wait_s += env.now - wait_start
            first_forward = False
            for probe in probes:
                probe.on_inputs(place, stage, task, pp_wait_s, dp_wait_s)
            begin = env.now
            if early is not None and task == early.task:
                early.process = env.process(self._buckets(place, early.transfers, early))
            if runs_ahead:
                costs = self._costs.get(self.workload.task_key(stage, task), stage=stage)
                lead = lead_s(begin, host_end, costs)
                host_end = host_end_s(begin, lead, costs)
            timing = yield from run(place, task, lead)
            end = env.now
            if runs_ahead and host_end is None:  # a task with a host sync: the host is free after its last one
                host_end = begin + timing.host_free_s
            if early is not None and task == early.task:
                early.done.succeed()
            tasks.append((task, begin, end))
            log.busy_s += end - begin
            log.compute_busy_s += timing.compute_busy_s
            log.model_flops += timing.model_flops
            for group, seconds in timing.exposed_comm_s.items():
                exposed[group] = exposed.get(group, 0.0) + seconds
            for probe in probes:
                probe.on_task(place, stage, task, begin, end, timing)
            if syncs is not None and task in syncs.after:
                for chunk in syncs.after[task]:
                    self._reduce_chunk(place, chunk, syncs.transfers)
            if gather is not None and task.direction is FORWARD and task.chunk not in gather.forwarded:
                gather.forwarded.add(task.chunk)
                yield from self._forward_waits(gather, task.chunk, timing.compute_busy_s)
                held_s = env.now - end
                log.dp_exposed_s += held_s
                log.params_gathered_s = max(log.params_gathered_s, env.now)  # no steady period begins before it
            for flow in schedule.outputs(stage, task):
                peer, peer_number = peers[flow.stage]
                key = (flow[0], flow[1], flow[2], peer_number)
                sent_at[key] = env.now
                if flow.stage == stage:  # DualPipeV's turn from chunk 0 to chunk 1 stays in the GPU's memory
                    self._arrival(key).succeed()
                else:
                    self._send(place, peer, key)
        log.pipeline_end_s = env.now

    # --- data parallelism ----------------------------------------------------------------------------
    def nic_shares(self, stage: int) -> tuple[float, float]:
        """The dense and the expert DP ring's share of their bytes on one NIC of ``stage`` (dp_bytes.ring_nic_share)."""
        return self._costs.ring_shares(stage)

    def dp_wire_bytes(self, stage: int) -> tuple[float, float]:
        """(gradient wire bytes, parameter wire bytes) each GPU of ``stage`` sends per step in its DP ring."""
        return dp_bytes.dp_wire_bytes(self.workload, self.cal, stage, self.nic_shares(stage))

    def dp_grad_transfers(self, stage: int) -> int:
        """How many DP gradient transfers a GPU of ``stage`` makes per step (dp_bytes.grad_transfers)."""
        shares = self.nic_shares(stage)
        return dp_bytes.grad_transfers(self.workload, self.cal, stage, shares, self._per_chunk, self._buckets_per_step)

    def _dp_bucket(self, place: Place, kind: str, index: int, nbytes: float, outer_bytes: float) -> simpy.Event:
        """One DP bucket: its ring inside the DP group (or instance), and with several instances (workloads/specs/
        hybrid_dp.py) its ring across them, after it (gradients: the shard's reduction) or before it (Hybrid-FSDP's
        weights: the shard's gather)."""
        inner = DpBucket(kind, index), self.placement.dp_links(place), nbytes
        if outer_bytes <= 0:
            return self._dp_send(place, *inner)
        outer = DpBucket(kind, index, outer=True), self.placement.dp_outer_links(place), outer_bytes
        first, second = (outer, inner) if kind == "dp-params" else (inner, outer)

        def both():
            yield self._dp_send(place, *first)
            yield self._dp_send(place, *second)

        return self.env.process(both())

    def _start_gather(self, place: Place, gather: ParamGather) -> None:
        gather.started = True
        self.env.process(self._param_gather(place, gather))

    def _param_gather(self, place: Place, gather: ParamGather):
        """All-gather parameters bucket by bucket, chunk after chunk; with DP overlap the first bucket opens the
        stage."""
        _, params = self.dp_wire_bytes(place.stage)
        _, outer = dp_bytes.dp_outer_wire_bytes(self.workload, self.cal, place.stage)
        gate, chunks, buckets = gather.gate, gather.chunks, gather.buckets
        for bucket in range(buckets):
            yield self._dp_bucket(place, "dp-params", bucket, params / buckets, outer / buckets)
            if bucket == 0 and self.workload.layout.dp_overlap and not gate.triggered:
                gate.succeed()
            for chunk in chunks_gathered(bucket, buckets, len(chunks)):
                chunks[chunk].succeed(self.env.now)
        if not gate.triggered:
            gate.succeed()
        log = self._logs[place]
        log.params_gathered_s = max(log.params_gathered_s, self.env.now)

    def _forward_waits(self, gather: ParamGather, chunk: int, forward_s: float):
        """Hold ``chunk``'s first forward (just run, its compute ``forward_s`` long: a wait for EP peers inside it is
        not the layers' work) until its last bucket has landed and that bucket's layers have run
        (grad_sync.forward_ends_s)."""
        landed = gather.chunks[chunk]
        if not landed.triggered:
            yield landed
        until = forward_ends_s(landed.value, forward_s, gather.buckets / len(gather.chunks))
        if until > self.env.now:
            yield self.env.timeout(until - self.env.now)

    def _reduce_chunk(self, place: Place, chunk: int, transfers: list[simpy.Event]) -> None:
        """Start the DP reduction of one model chunk's gradients (simulator/engine/grad_sync.py), all its buckets
        at once as Megatron-Core's start_grad_sync issues them."""
        groups = self.workload.chunk_grad_groups(place.stage, chunk)
        grad = dp_bytes.grad_wire_bytes(self.workload.layout, groups, self.nic_shares(place.stage))
        outer, _ = dp_bytes.dp_outer_wire_bytes(self.workload, self.cal, place.stage, (chunk,))
        if grad <= 0 and outer <= 0:
            return
        transfers.append(self._dp_bucket(place, "dp-grads", chunk, grad, outer))

    def _buckets(self, place: Place, transfers: list[simpy.Event], early: EarlyBuckets | None = None):
        """Reduce gradients bucket by bucket (one per layer): all at once now, or (``early``: its task has just
        begun) each as that task's share of layers before it is done, the task's time taken alone (exact where
        tasks are memoized; the buckets left when the task ends start then)."""
        grad, _ = self.dp_wire_bytes(place.stage)
        outer, _ = dp_bytes.dp_outer_wire_bytes(self.workload, self.cal, place.stage)
        buckets = self._buckets_per_step
        if grad <= 0 and outer <= 0:
            return
        env, duration_s = self.env, 0.0
        if early is not None:
            duration_s = self._expected_s(place, early.task)
        begin = env.now
        for bucket in range(buckets):
            ready = begin + (bucket + 1) * duration_s / buckets
            if early is not None and ready > env.now and not early.done.triggered:
                yield env.timeout(ready - env.now) | early.done
            transfers.append(self._dp_bucket(place, "dp-grads", bucket, grad / buckets, outer / buckets))

    def _expected_s(self, place: Place, task: Task) -> float:
        """How long ``task`` will take: the last task of its kind on this place took (the same ops: exact where
        tasks are memoized), else its time alone (the same in both placements: an idle NIC where tasks use it)."""
        for done, begin, end in reversed(self._logs[place].tasks):
            if done.direction == task.direction and done.chunk == task.chunk and done.paired == task.paired:
                return end - begin
        nic_Bps = self.cluster.nic_effective_Bps if self.workload.tasks_use_nic else 0.0
        return self._memo.task_timing(self.workload.task_key(place.stage, task), place.stage, nic_Bps).duration_s

    def _grad_sync(self, place: Place, syncs: ChunkSyncs | None = None, early: EarlyBuckets | None = None):
        """Reduce gradients (chunk by chunk, those left for the step's end: ``syncs``; bucket by bucket, those
        started during the last backward: ``early``, or all now), then the optimizer step."""
        log, stage = self._logs[place], place.stage
        end = log.tasks[-1][2]
        if syncs is not None:
            for chunk in syncs.at_end:
                self._reduce_chunk(place, chunk, syncs.transfers)
            transfers = syncs.transfers
        elif early is not None:
            yield early.process
            transfers = early.transfers
        else:
            transfers = []
            yield from self._buckets(place, transfers)
        yield self.env.all_of(transfers)
        log.dp_exposed_s += self.env.now - end
        yield self.env.timeout(optimizer_s(self.workload, stage, self.gpu, self.cal))
        log.end_s = self.env.now

    def _dp_send(self, place: Place, bucket: DpBucket, links: tuple, nbytes: float) -> simpy.Event:
        """One DP transfer (``bucket``: "dp-params" or "dp-grads", bucket or chunk index, inside the DP instance or
        across them), told to the probes when it ends."""
        transfer = self.placement.dp_transfer(place, bucket, links, nbytes)
        if self.probes:
            stage, start = place.stage, self.env.now

            def log(_event: simpy.Event) -> None:
                for probe in self.probes:
                    probe.on_transfer(Transfer(bucket.kind, stage, stage, start, self.env.now, nbytes, (bucket.index,)))

            transfer.callbacks.append(log)
        return transfer

    def _stage_with_sync(self, place: Place):
        gather = None
        if self.workload.dp > 1:
            gather = ParamGather.of(self.env, self.workload.stage_order(place.stage), self._buckets_per_step)
            if self.workload.layout.align_param_gather:
                self._start_gather(place, gather)
        syncs = chunk_syncs(self.workload, place.stage) if self.workload.dp > 1 and self._per_chunk else None
        during = buckets_during_last_backward(self.workload, place.stage) if syncs is None else None
        early = EarlyBuckets(during, self.env.event()) if during is not None else None
        yield from self._stage(place, gather, syncs, early)
        yield from self._grad_sync(place, syncs, early)

    def run(self) -> EngineResult:
        """Run the step."""
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        start_probes(self.probes, self, self.placement.networks)
        for place in self.placement.places:
            self.env.process(self._stage_with_sync(place))
        with fewer_collections():
            self.env.run()
        # Every place ends with its optimizer step; one that did not waits for an event nothing will fire (a
        # barrier a member never joined): say so rather than report a step that stopped short.
        stuck = [place for place, log in self._logs.items() if log.end_s <= 0.0]
        if stuck:
            raise RuntimeError(
                f"engine: {len(stuck)} place(s) never finished the step (first: {stuck[0]}): a transfer or "
                "collective waited for a member that never joined; this is a simulator bug, please report it"
            )
        step_time_s = max(log.end_s for log in self._logs.values())
        result = EngineResult(
            step_time_s,
            self.stages,
            self.simulated_ops,
            time.perf_counter() - wall_start,
            self.placement.bytes_sent(),
            phase_spans(log.tasks for log in self.stages),
            self.workload,
            sim_cpu_s=time.process_time() - cpu_start,
        )
        for probe in self.probes:
            probe.on_run(result)
        return result


def optimizer_s(workload: StepWorkload, stage: int, gpu: GpuSpec, cal: Calibration) -> float:
    """The optimizer step of one GPU of ``stage`` after its gradients are reduced (memory-bound: the passes of
    simulator/costs/optimizer_step.py)."""
    # ZeRO-1 and up: each GPU updates its shard only; the trained parameters only (a frozen base has no step)
    shard, adam = optimizer_shard(workload, stage)  # under Muon, Adam's the embedding's and output layer's
    held = sum(g.trained for g in workload.stage_param_groups(stage))
    step_s = optimizer_step_s(workload.layout, shard, held, gpu, cal, adam)
    return step_s + newton_schulz_s(stage_newton_schulz(workload, stage), gpu, cal)


PLACEMENTS: dict[str, type[Placement]] = {"folded": FoldedPlacement, "unfolded": UnfoldedPlacement}


def make_placement(
    kind: str, env: simpy.Environment, workload: StepWorkload, cluster: ClusterSpec, faults: Faults
) -> Placement:
    """The placement called ``kind``: "folded" (one representative per stage) or "unfolded" (every GPU)."""
    if kind not in PLACEMENTS:
        raise ConfigError("engine", f"placement must be one of {', '.join(PLACEMENTS)}, got {kind!r}")
    return PLACEMENTS[kind](env, workload, cluster, faults)
