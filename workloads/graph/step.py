"""One training step of a model under a layout on a number of GPUs: tasks, schedule and sync volumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import NamedTuple

from workloads.graph import combined_1f1b, fsdp
from workloads.graph import dualpipe_pairs as dualpipe
from workloads.graph.op_lists import LayerSteps, backward_ops, forward_ops
from workloads.ops import BYTES_BF16, Op
from workloads.recipes.embedding import embedding_recipe
from workloads.recipes.layers import head_recipe, layer_recipe, mtp_projection_recipe, te_layers
from workloads.schedules.base import BACKWARD, BACKWARD_INPUT, FORWARD, FORWARD_BACKWARD_DELAYED, PAIRED, Schedule, Task
from workloads.schedules.pipeline_tasks import Block, TaskKey
from workloads.schedules.registry import make_schedule
from workloads.specs import hybrid_dp
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import LayerKind, LayerParams, ModelSpec
from workloads.specs.module_precision import DECODER_PREFIX, MTP_PREFIX, module_overrides, with_module_precisions
from workloads.specs.peft import frozen_base, lora_expert_params, lora_params_per_layer
from workloads.specs.validation import check_step, data_parallel, schedule_options

DEFAULT_GLOBAL_BATCH = 720  # sequences, MegaScale-MoE Sec. 6
DEFAULT_SEQ_LEN = 8192


class ParamGroup(NamedTuple):
    """Parameters per GPU of one stage that share a data-parallel sync group."""

    held: float  # parameters the GPU holds
    synced: float  # of them, parameters whose gradients cross the NICs (SP's replicas reduce in-node first)
    dp: int  # GPUs the group's gradients are reduced over (and its ZeRO shards spread over)
    trained: float  # of them, parameters with gradients and optimizer states (a frozen base's none: LoRA's adapters)


@lru_cache(maxsize=64)
def bf16_layout(layout: LayoutSpec) -> LayoutSpec:
    """The layout a BF16 layer of an FP8 / FP4 run is built under: BF16 GEMMs, so no quantization kernels, weights
    gathered in BF16; the router pads for nothing (Megatron's get_fp8_context / get_fp4_context return a null
    context for it)."""
    return layout.with_(gemm_dtype="bf16", fp8_recipe="", fp8_param_gather=False, router_quant_padding=False)


def block_layer_counts(num_layers: int, blocks: int) -> list[int]:
    """Layers per pipeline block; a remainder leaves one layer fewer on the last, first, second-to-last,
    second, ... blocks (where the LM head and the embedding sit)."""
    per, extra = divmod(num_layers, blocks)
    if extra == 0:
        return [per] * blocks
    ends_first = dict.fromkeys(b for pair in zip(range(blocks - 1, -1, -1), range(blocks)) for b in pair)
    short = set(list(ends_first)[: blocks - extra])
    return [per + (b not in short) for b in range(blocks)]


@dataclass(frozen=True)
class StepWorkload:
    """Everything one training step must do, per GPU, with no notion of time."""

    model: ModelSpec
    layout: LayoutSpec
    num_gpus: int
    gpus_per_node: int
    global_batch: int = DEFAULT_GLOBAL_BATCH
    seq_len: int = DEFAULT_SEQ_LEN
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    _lanes: dict = field(default_factory=dict, repr=False, compare=False)
    _task_keys: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_step(self.model, self.layout, self.num_gpus, self.gpus_per_node, self.global_batch, self.seq_len)
        fsdp.check_unit_schedule(self.layout, max(self.dp * self.layout.cp, self.expert_dp))
        hybrid_dp.check_step(self.layout, self.dp, self.layout.cp, self.expert_dp)

    # --- sizes -----------------------------------------------------------------------------------
    @property
    def pp(self) -> int:
        return self.layout.pp

    @property
    def chunks(self) -> int:
        return self.layout.virtual_stages

    @property
    def dp(self) -> int:
        """Data-parallel replicas: GPUs / (intra_size x cp x pp)."""
        return data_parallel(self.layout, self.num_gpus)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline (per data-parallel replica) per step."""
        return self.global_batch // (self.dp * self.layout.micro_batch)

    @property
    def expert_dp(self) -> int:
        """Replicas of each expert: GPUs per stage / (EP x ETP) (= dp for in-node EP)."""
        return self.num_gpus // (self.layout.ep_degree * self.layout.etp * self.layout.pp)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    @property
    def pp_bytes_per_gpu(self) -> float:
        """Activation (or its gradient) each GPU sends to the next stage: [b, s/(n cp), h] in BF16 ([b, s, h]
        under TP without sequence parallelism: Megatron-Core p2p_communication sends the whole tensor)."""
        local = self.layout.micro_batch * self.seq_len // (self.layout.sequence_shards * self.layout.cp)
        return local * self.model.hidden_size * BYTES_BF16

    @property
    def pp_split(self) -> int:
        """TP ranks each PP send is split over (LayoutSpec.pp_scatter_gather: n without sequence parallelism), else 1."""
        layout = self.layout
        return layout.intra_size if layout.pp_scatter_gather and not layout.sequence_parallel else 1

    # --- pipeline ------------------------------------------------------------------------------------
    @cached_property
    def schedule(self) -> Schedule:
        return make_schedule(
            self.layout.schedule, self.pp, self.micro_batches, self.chunks, **schedule_options(self.layout)
        )

    @cached_property
    def block_ranges(self) -> tuple[range, ...]:
        """Global layer indices of each pipeline block (layouts without uneven_pp split evenly)."""
        counts = self.layout.block_layers or block_layer_counts(self.model.num_layers, self.schedule.blocks)
        starts = [sum(counts[:b]) for b in range(len(counts))]
        return tuple(range(start, start + count) for start, count in zip(starts, counts))

    @cached_property
    def layers_per_chunk(self) -> int:
        """Layers of the fullest block."""
        return max(len(r) for r in self.block_ranges)

    def stage_order(self, stage: int) -> list[Task]:
        return self.schedule.order(stage)

    def stage_layers(self, stage: int) -> list[int]:
        """Global layer indices of every block ``stage`` holds."""
        return [i for block in self.schedule.stage_blocks(stage) for i in self.block_ranges[block]]

    # --- parameters per GPU ------------------------------------------------------------------------
    @cached_property
    def _layer_parts(self) -> dict[tuple[bool, str], LayerParams]:
        """The weights of each kind of layer (dense or MoE; a hybrid model's blocks), computed once per workload."""
        kinds = {(kind.dense, kind.block) for kind in map(self.model.layer_kind, range(self.model.num_layers))}
        kinds |= {(True, ""), (False, "")}
        return {kind: self.model.layer_parts(*kind) for kind in kinds}

    def stage_param_groups(self, stage: int, chunks: tuple[int, ...] | None = None) -> list[ParamGroup]:
        """Parameters per GPU of a stage (of its ``chunks`` only, if given): dense weights sync over DP x CP,
        expert weights over expert_dp.

        SP replicates attention (and dense FFN) weights inside the node; their gradients are reduced
        hierarchically (MegaScale-MoE App. A.1), so the inter-node bytes equal TP's: 1/n of them per GPU.
        """
        m, n, layout = self.model, self.layout.intra_size, self.layout
        if chunks is None:
            blocks = self.schedule.stage_blocks(stage)
        else:
            blocks = tuple(self.schedule.block_of(stage, chunk) for chunk in chunks)
        kinds = [m.layer_kind(i) for block in blocks for i in self.block_ranges[block]]
        parts = [self._layer_parts[kind.dense, kind.block] for kind in kinds]
        mtp = m.mtp_weight_sets if self.schedule.blocks - 1 in blocks else 0  # MTP modules sit with the head
        parts += [self._layer_parts[m.num_experts == 0, ""]] * mtp
        # TP shards these n ways; SP replicates them. MTP: its 2h -> h projection is column-parallel.
        split = sum(p.attention + p.dense_ffn + p.shared for p in parts) + mtp * 2 * m.hidden_size**2
        small = sum(p.replicated for p in parts) + mtp * 2 * m.hidden_size  # replicated everywhere
        experts = sum(p.experts for p in parts) / (layout.ep_degree * layout.etp if layout.ffn == "ep" else n)
        sp = layout.attention == "sp"
        held_dense = small + (split if sp else split / n)
        synced_dense = small + split / n
        held_dense += self._embedding_params(blocks)
        synced_dense += self._embedding_params(blocks)
        dp = self.dp * self.layout.cp  # CP ranks hold the same weights: the dense gradients reduce over DP x CP
        if frozen_base(layout):  # the base frozen: only the adapters (split as their linears) train and sync
            rank, modules = layout.lora_rank, layout.lora_modules
            adapters = sum(lora_params_per_layer(m, rank, modules, kind.dense) for kind in kinds) / n
            routed = sum(lora_expert_params(m, rank, modules) for kind in kinds if not kind.dense)
            routed /= layout.etp if layout.ffn == "ep" else n  # one set per EP rank, split as its experts' weights
            return [
                ParamGroup(held_dense + adapters, adapters, dp, adapters),
                ParamGroup(experts + routed, routed, self.expert_dp, routed),
            ]
        return [
            ParamGroup(held_dense, synced_dense, dp, held_dense),
            ParamGroup(experts, experts, self.expert_dp, experts),
        ]

    def embedding_params(self, stage: int) -> float:
        """Input embedding and output head weights per GPU of a stage (vocab-parallel over n): on block 0 and
        on the last block, one matrix if they are tied and on the same stage."""
        return self._embedding_params(self.schedule.stage_blocks(stage))

    def _embedding_params(self, blocks: tuple[int, ...]) -> float:
        ends = (0 in blocks) + (self.schedule.blocks - 1 in blocks)
        if self.model.tied_embeddings and ends == 2:
            ends = 1
        return ends * (self.model.vocab_size * self.model.hidden_size / self.layout.intra_size)

    def step_sync_groups(self, stage: int) -> list[tuple[float, float, int]]:
        """Per DP group of a stage, (parameters whose gradients the step's one reduce-scatter reduces, parameters
        its one all-gather gathers, the GPUs it runs over: the group, or its instance, workloads/specs/hybrid_dp.py):
        all of them, less the units' under ZeRO-2 (gradients) and ZeRO-3 (weights), which go unit by unit inside the
        tasks (workloads/graph/fsdp.py); under ZeRO-0 the gradients' all-reduce, counted as two reduce-scatters'
        worth, and no gather."""
        groups = self.stage_param_groups(stage)
        if self.layout.zero_stage == 0:  # DDP all-reduces the gradients (a ring reduce-scatter and all-gather of
            # them: twice the bytes) and gathers no weights (megatron/core/distributed/param_and_grad_buffer.py
            # start_grad_sync at NVIDIA/Megatron-LM d98e8a64dd: all_reduce without use_distributed_optimizer)
            return [(2 * g.synced, 0.0, g.dp) for g in groups]
        inner = [hybrid_dp.inner(g.dp, self.layout) for g in groups]
        if self.unit_comm is None:
            return [(g.synced, g.synced, size) for g, size in zip(groups, inner)]
        units = [0.0, 0.0]
        for layer in self.stage_layers(stage):
            for part, count in enumerate(fsdp.unit_params(self.model, self.layout, self.model.layer_kind(layer))):
                units[part] += count
        gathered = fsdp.gathers_per_unit(self.layout)
        return [
            (g.synced - u, g.synced - u if gathered else g.synced, size) for g, u, size in zip(groups, units, inner)
        ]

    def outer_sync_groups(self, stage: int, chunks: tuple[int, ...] | None = None) -> list[tuple[float, float, int]]:
        """Per DP group of a stage (of its ``chunks`` only, if given), what crosses the instances once a step
        (workloads/specs/hybrid_dp.py): (gradients, as reduce-scatters' worth of the instance's shard; weights the
        shard's all-gather gathers, Hybrid-FSDP's; the instances). Empty with one instance."""
        layout, instances = self.layout, self.layout.dp_instances
        if instances == 1:
            return []
        gathered = layout.outer_dp_sharding == "optim"
        factor = hybrid_dp.outer_grad_factor(layout)
        out = []
        for g in self.stage_param_groups(stage, chunks):
            shard = g.synced / hybrid_dp.inner(g.dp, layout)
            out.append((factor * shard, shard if gathered else 0.0, instances))
        return out

    def chunk_grad_groups(self, stage: int, chunk: int) -> list[tuple[float, int]]:
        """Per DP group, (parameters whose gradients one model chunk of ``stage`` reduces on its own, the GPUs it
        reduces over): Megatron-Core's per-chunk grad sync of the interleaved schedule (ZeRO-0 and ZeRO-1: under
        ZeRO-0 the all-reduce, counted as two reduce-scatters' worth, as in step_sync_groups; over the instance)."""
        factor = 2 if self.layout.zero_stage == 0 else 1
        groups = self.stage_param_groups(stage, (chunk,))
        return [(factor * g.synced, hybrid_dp.inner(g.dp, self.layout)) for g in groups]

    @cached_property
    def unit_comm(self) -> fsdp.UnitComm | None:
        """The per-unit (transformer layer) all-gathers and reduce-scatters of ZeRO-2 / ZeRO-3 / FSDP, or None."""
        layout = self.layout
        experts = layout.ep_degree * layout.etp if layout.ffn == "ep" else layout.intra_size
        dp = hybrid_dp.inner(self.dp, layout)  # units gather and scatter inside the DP instance
        in_node = fsdp.dp_group_in_node(self.pp, dp, layout.intra_size, layout.cp, experts, self.gpus_per_node)
        expert_dp = hybrid_dp.inner(self.expert_dp, layout)
        return fsdp.unit_comm(self.model, layout, dp * layout.cp, expert_dp, not in_node)

    def stage_params_per_gpu(self, stage: int) -> tuple[float, float]:
        """(parameters held, parameters synced over the NICs) per GPU of a stage, over its groups."""
        groups = self.stage_param_groups(stage)
        return sum(g.held for g in groups), sum(g.synced for g in groups)

    # --- tasks -------------------------------------------------------------------------------------
    @cached_property
    def _block_keys(self) -> tuple[Block, ...]:
        last = self.schedule.blocks - 1
        return tuple(
            Block(b == 0, b == last, tuple(self.layer_kind(i) for i in layers))
            for b, layers in enumerate(self.block_ranges)
        )

    def layer_kind(self, layer: int) -> LayerKind:
        """The model's kind of layer ``layer``, marked BF16 where the layout keeps it out of FP8 / FP4
        (megatron/core/fp8_utils.py is_first_last_bf16_layer: global layer indices)."""
        kind, layout = self.model.layer_kind(layer), self.layout
        if layout.gemm_dtype != "fp8":
            return kind
        if layer < layout.bf16_first_layers or layer >= self.model.num_layers - layout.bf16_last_layers:
            return kind._replace(bf16=True)
        return kind._replace(precisions=module_overrides(layout.module_precisions, DECODER_PREFIX.format(layer)))

    def mtp_kind(self) -> LayerKind:
        """The kind of a multi-token-prediction module's transformer layer, with its --te-precision-config-file
        overrides (named under mtp.)."""
        kind = self.model.mtp_layer_kind()
        if self.layout.gemm_dtype != "fp8":
            return kind
        return kind._replace(precisions=module_overrides(self.layout.module_precisions, MTP_PREFIX))

    def block_key(self, block: int) -> Block:
        """What sets block ``block``'s op list."""
        return self._block_keys[block]

    def task_key(self, stage: int, task: Task) -> TaskKey:
        """Tasks with equal keys have identical op lists: the phase and, per half, its block's key."""
        chunks = self.schedule.task_chunks(task)
        # NOTE: memoized per (stage, phase, chunks): the engine asks for every task of the step
        memo = (stage, task.direction, chunks)
        key = self._task_keys.get(memo)
        if key is None:
            blocks = tuple(self._block_keys[self.schedule.block_of(stage, c)] for c in chunks)
            key = self._task_keys[memo] = TaskKey(task.direction, blocks)
        return key

    @property
    def host_runs_ahead(self) -> bool:
        """Whether the host issues a stage's next task before the GPU reaches it: Megatron-Core's layers (a Megatron
        token dispatcher, workloads/recipes/layers.py te_layers) without a host wait at each pipeline exchange
        (Schedule.host_waits_at_exchange; none without pipeline stages, which exchange nothing)."""
        return te_layers(self.layout) and (self.pp == 1 or not self.schedule.host_waits_at_exchange)

    @cached_property
    def tasks_use_nic(self) -> bool:
        """Whether any task op sends over the NIC (cross-node EP, CP across nodes, ZeRO-2 / 3 per-unit sync)."""
        if self.unit_comm is not None and self.unit_comm.across_nodes:  # ZeRO-2's only in backward tasks
            return True
        blocks = {self.block_key(b) for b in range(self.schedule.blocks)}
        return any(op.nic_bytes > 0 for block in blocks for op in self.task_ops(TaskKey(FORWARD, (block,))))

    def task_ops(self, key: TaskKey) -> tuple[Op, ...]:
        """The op list of a task with the given key (built once, then cached)."""
        if key not in self._cache:
            self._cache[key] = self._build_ops(key)
        return self._cache[key]

    def task_lanes(self, key: TaskKey) -> tuple[int, ...] | None:
        """Lane of each op of an F&B task (0 forward, 1 backward); None for single-lane tasks."""
        if key.phase not in PAIRED:
            return None
        self.task_ops(key)
        return self._lanes[key]

    def _build_ops(self, key: TaskKey) -> tuple[Op, ...]:
        phase, blocks = key.phase, key.blocks
        if phase == FORWARD:
            return self._with_units(forward_ops(self._layers(blocks[0]), self.layout), blocks[0], False)
        if phase == BACKWARD:
            recompute_below = max(len(blocks[0].layers) - self.layout.recompute_kept_layers, 0)
            ops = backward_ops(self._layers(blocks[0]), self.layout, recompute_below)
            return self._with_units(ops, blocks[0], True)
        if phase in PAIRED and self.schedule.combined_1f1b:  # Megatron-Core's: one op list, layer by layer
            forward, backward = (
                self.task_ops(TaskKey(FORWARD, blocks[:1])),
                self.task_ops(TaskKey(BACKWARD, blocks[1:])),
            )
            self._lanes[key] = None
            return combined_1f1b.pair(forward, backward, delay_wgrad=phase == FORWARD_BACKWARD_DELAYED)
        if phase in PAIRED:  # DualPipe's: a forward and a full backward on two lanes
            backward = self.task_ops(TaskKey(BACKWARD, blocks[1:]))
            ops, self._lanes[key] = dualpipe.pair(self.task_ops(TaskKey(FORWARD, blocks[:1])), backward)
            return ops
        input_ops, weight_ops = dualpipe.split_backward(self.task_ops(TaskKey(BACKWARD, blocks)))
        return input_ops if phase == BACKWARD_INPUT else weight_ops

    def _with_units(self, ops: list[Op], block: Block, backward: bool) -> tuple[Op, ...]:
        """A chunk's forward or backward with its units' FSDP all-gathers and reduce-scatters, if any."""
        if self.unit_comm is None:
            return tuple(ops)
        units = {i: fsdp.unit_params(self.model, self.layout, kind) for i, kind in enumerate(block.layers)}
        return fsdp.with_unit_comm(ops, units, self.unit_comm, backward)

    def _recipe(self, kind: LayerKind) -> list:
        """The forward recipe of a layer of ``kind`` (built once per kind)."""
        if kind not in self._cache:
            layout = bf16_layout(self.layout) if kind.bf16 else self.layout
            recipe = layer_recipe(
                self.model,
                layout,
                self.seq_len,
                self.gpus_per_node,
                kind.dense,
                kind.window,
                kind.block,
                kind.compress,
                kind.indexer,
            )
            self._cache[kind] = with_module_precisions(recipe, kind.precisions)
        return self._cache[kind]

    def _layers(self, block: Block) -> list[LayerSteps]:
        """A block's layers in order: embedding (-1), its layers, then on the last block the head and the
        multi-token prediction modules (DeepSeek-V3 Sec. 2.2: each a projection, one layer and the head)."""
        layers: list[LayerSteps] = [(i, self._recipe(kind)) for i, kind in enumerate(block.layers)]
        local_seq = self.seq_len // self.layout.cp
        if block.first:
            layers.insert(0, (-1, embedding_recipe(self.model, self.layout, local_seq)))
        if block.last:
            head = head_recipe(self.model, self.layout, local_seq)
            layers.append((len(block.layers), head))
            mtp_kind = self.mtp_kind()
            for _ in range(self.model.mtp_layers):
                layers.append((len(layers), mtp_projection_recipe(self.model, self.layout, local_seq)))
                layers.append((len(layers), self._recipe(mtp_kind)))
                layers.append((len(layers), head))
        return layers
