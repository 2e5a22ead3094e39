"""One training step of a model under a layout on a number of GPUs: tasks, schedule and sync volumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from topologies.errors import ConfigError, check_positive_int
from workloads import dualpipe
from workloads.layers import (
    BYTES_BF16,
    embedding_recipe,
    head_recipe,
    layer_recipe,
)
from workloads.layouts import LayoutSpec
from workloads.models import ModelSpec
from workloads.moe import ep_degree, ext_layer_recipe, is_extended, validate_extensions
from workloads.ops import Op
from workloads.schedules import BACKWARD, BACKWARD_INPUT, FORWARD, FORWARD_BACKWARD, Task, stage_order
from workloads.tasks import LayerSteps, backward_ops, forward_ops

DEFAULT_GLOBAL_BATCH = 720  # sequences, MegaScale-MoE Sec. 6
DEFAULT_SEQ_LEN = 8192


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

    def __post_init__(self) -> None:
        validate(self.model, self.layout, self.num_gpus, self.gpus_per_node, self.global_batch, self.seq_len)

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
        return self.num_gpus // (self.layout.intra_size * self.layout.cp * self.layout.pp)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline (per data-parallel replica) per step."""
        return self.global_batch // (self.dp * self.layout.micro_batch)

    @property
    def layers_per_chunk(self) -> int:
        """Layers of a chunk; with uneven_pp, of the fullest stage."""
        return -(-self.model.num_layers // (self.pp * self.chunks))

    @property
    def expert_dp(self) -> int:
        """Replicas of each expert: GPUs per stage / (EP x ETP) (= dp for in-node EP)."""
        return self.num_gpus // (ep_degree(self.layout) * self.layout.etp * self.layout.pp)

    @cached_property
    def extended(self) -> bool:
        return is_extended(self.model, self.layout)

    @cached_property
    def tasks_use_nic(self) -> bool:
        """Whether any task op sends over the NIC (cross-node EP)."""
        return any(op.nic_bytes > 0 for key in self._all_task_keys() for op in self.task_ops(key))

    def chunk_layer_range(self, stage: int, chunk: int) -> range:
        """Global layer indices of model chunk ``chunk`` on ``stage`` (interleaved: block chunk x pp + stage)."""
        if self.chunks == 1:
            return self.stage_layers(stage)
        block = chunk * self.pp + stage
        return range(block * self.layers_per_chunk, (block + 1) * self.layers_per_chunk)

    def stage_layers(self, stage: int) -> range:
        """Global layer indices of a stage (1F1B) or of its first chunk; uneven_pp gives fewer to the last,
        first, second-to-last, ... stages."""
        per, extra = divmod(self.model.num_layers, self.pp * self.chunks)
        if extra == 0:
            return range(stage * per, (stage + 1) * per)
        short = [s for pair in zip(range(self.pp - 1, -1, -1), range(self.pp)) for s in pair]
        short = list(dict.fromkeys(short))[: self.pp - extra]
        counts = [per + (s not in short) for s in range(self.pp)]
        start = sum(counts[:stage])
        return range(start, start + counts[stage])

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    @property
    def pp_bytes_per_gpu(self) -> float:
        """Activation (or its gradient) each GPU sends to the next stage: [b, s/(n cp), h] in BF16."""
        local = self.layout.micro_batch * self.seq_len // (self.layout.intra_size * self.layout.cp)
        return local * self.model.hidden_size * BYTES_BF16

    # --- parameters per GPU ------------------------------------------------------------------------
    def layer_params_per_gpu(self) -> tuple[float, float]:
        """(parameters held, parameters whose gradients cross the NICs) per GPU for one layer.

        SP replicates attention weights inside the node; their gradients are reduced hierarchically
        (App. A.1), so the inter-node bytes equal TP's: 1/n of them per GPU.
        """
        m, n = self.model, self.layout.intra_size
        experts = m.num_experts * m.expert_params / n  # EP: E/n whole experts; TP: every expert / n
        attention = m.attention_params / n
        held = experts + (m.attention_params if self.layout.attention == "sp" else attention)
        small = m.hidden_size * (m.num_experts + 2)  # router and norms, replicated
        return held + small, experts + attention + small

    def stage_param_groups(self, stage: int) -> list[tuple[float, float, int]]:
        """(params held, params synced over the NICs, DP group size) per GPU of a stage, per sync group.

        Beyond-the-paper layouts: expert weights sync over expert_dp replicas, the rest over dp.
        """
        if not self.extended:
            held, synced = self.stage_params_per_gpu(stage)
            return [(held, synced, self.dp)]
        m, n, ep = self.model, self.layout.intra_size, ep_degree(self.layout)
        sp = self.layout.attention == "sp"
        if self.layout.schedule == "dualpipe":  # two parameter copies: blocks s and pp-1-s
            per = self.layers_per_chunk
            layers = [i for block in (stage, self.pp - 1 - stage) for i in range(block * per, (block + 1) * per)]
        else:
            layers = [i for chunk in range(self.chunks) for i in self.chunk_layer_range(stage, chunk)]
        dense_layers = sum(1 for i in layers if i < m.num_dense_layers)
        moe_layers = len(layers) - dense_layers
        local_dense = (m.attention_params + 3 * m.hidden_size * m.dense_ffn_size) if sp else 0
        attention = m.attention_params
        shared = m.shared_params
        small = m.hidden_size * (m.num_experts + 2)
        replicated = dense_layers * (local_dense + 2 * m.hidden_size) + moe_layers * ((attention + shared) * sp + small)
        split = dense_layers * (m.dense_layer_params - 2 * m.hidden_size) + moe_layers * (attention + shared)
        held_dense = replicated + (0 if sp else split / n)
        synced_dense = moe_layers * small + dense_layers * 2 * m.hidden_size + split / n
        experts = (
            moe_layers * m.num_experts * m.expert_params / (ep * self.layout.etp if self.layout.ffn == "ep" else n)
        )
        vocab = self.model.vocab_size * self.model.hidden_size / n
        blocks = (stage, self.pp - 1 - stage) if self.layout.schedule == "dualpipe" else (stage,)
        ends = (0 in blocks) + (self.pp - 1 in blocks)  # embedding with block 0, head with the last block
        if m.tied_embeddings and ends == 2:
            ends = 1
        held_dense += ends * vocab
        synced_dense += ends * vocab
        # CP ranks hold the same weights: the dense gradients reduce over DP x CP (Megatron-Core)
        return [(held_dense, synced_dense, self.dp * self.layout.cp), (experts, experts, self.expert_dp)]

    def stage_params_per_gpu(self, stage: int) -> tuple[float, float]:
        if self.extended:
            groups = self.stage_param_groups(stage)
            return sum(g[0] for g in groups), sum(g[1] for g in groups)
        held, synced = self.layer_params_per_gpu()
        layers = self.layers_per_chunk * self.chunks
        extra = 0.0
        vocab = self.model.vocab_size * self.model.hidden_size / self.layout.intra_size
        if stage == 0:
            extra += vocab
        if stage == self.pp - 1:
            extra += vocab
        if self.layout.schedule == "dualpipe":  # blocks s and pp-1-s: 2x parameters (DualPipe README)
            return 2 * (held * layers + extra), 2 * (synced * layers + extra)
        return held * layers + extra, synced * layers + extra

    # --- tasks -------------------------------------------------------------------------------------
    def stage_order(self, stage: int) -> list[Task]:
        return stage_order(self.layout.schedule, stage, self.pp, self.micro_batches, self.chunks)

    def task_key(self, stage: int, task: Task) -> tuple:
        """Tasks with equal keys have identical op lists: the direction, then per half its block's key."""
        if self.layout.schedule == "dualpipe":  # chunk 0 runs block s, chunk 1 block pp-1-s (DualPipe)

            def half(chunk: int) -> tuple:
                block = dualpipe.position(stage, chunk, self.pp)
                per = self.layers_per_chunk
                return self._block_key(block == 0, block == self.pp - 1, range(block * per, (block + 1) * per))

            if task.direction == FORWARD_BACKWARD:
                return (task.direction, *half(task.chunk), *half(task.paired[1]))
            return (task.direction, *half(task.chunk))
        first = stage == 0 and task.chunk == 0
        last = stage == self.pp - 1 and task.chunk == self.chunks - 1
        return (task.direction, *self._block_key(first, last, self.chunk_layer_range(stage, task.chunk)))

    def _block_key(self, first: bool, last: bool, layers: range) -> tuple:
        """What sets a block's op list: embedding/head flags and, for extended models, dense/MoE layer counts."""
        if not self.extended:
            return first, last
        dense = sum(1 for i in layers if i < self.model.num_dense_layers)
        return first, last, dense, len(layers) - dense

    def _all_task_keys(self) -> set[tuple]:
        return {
            self.task_key(s, Task(d, 0, c))
            for s in range(self.pp)
            for d in (FORWARD, BACKWARD)
            for c in range(self.chunks)
        }

    def task_ops(self, key: tuple) -> tuple[Op, ...]:
        """The op list of a task with the given key (built once, then cached)."""
        if key not in self._cache and dualpipe.is_dualpipe_kind(key[0]):
            self._cache[key] = self._split_task_ops(key)
        if key not in self._cache:
            direction, first, last = key[:3]
            layers = self._chunk_layers(first, last) if len(key) == 3 else self._ext_chunk_layers(*key[1:])
            if direction == FORWARD:
                ops = forward_ops(layers, self.layout)
            else:
                transformer_layers = sum(1 for layer, _ in layers if layer >= 0) - (1 if last else 0)
                recompute_below = max(transformer_layers - self.layout.recompute_kept_layers, 0)
                ops = backward_ops(layers, self.layout, recompute_below)
            self._cache[key] = tuple(ops)
        return self._cache[key]

    def task_lanes(self, key: tuple) -> tuple[int, ...] | None:
        """Lane of each op of an F&B task (0 forward, 1 backward); None for single-lane tasks."""
        if key[0] != FORWARD_BACKWARD:
            return None
        self.task_ops(key)
        return self._cache[("lanes", *key)]

    def _split_task_ops(self, key: tuple) -> tuple[Op, ...]:
        """Bi and W: a full backward split at its weight-gradient GEMMs; F&B: F and B paired."""
        if key[0] == FORWARD_BACKWARD:
            half = (len(key) - 1) // 2
            forward, backward = (FORWARD, *key[1 : 1 + half]), (BACKWARD, *key[1 + half :])
            ops, lanes = dualpipe.pair(self.task_ops(forward), self.task_ops(backward))
            self._cache[("lanes", *key)] = lanes
            return ops
        input_ops, weight_ops = dualpipe.split_backward(self.task_ops((BACKWARD, *key[1:])))
        return input_ops if key[0] == BACKWARD_INPUT else weight_ops

    @cached_property
    def _layer_steps(self):
        return layer_recipe(self.model, self.layout, self.seq_len)

    def _ext_chunk_layers(self, first: bool, last: bool, dense: int, moe: int) -> list[LayerSteps]:
        """Beyond-the-paper chunks: ``dense`` leading dense layers, then ``moe`` MoE layers."""
        recipes = [
            ext_layer_recipe(self.model, self.layout, self.seq_len, self.gpus_per_node, d) for d in (False, True)
        ]
        layers: list[LayerSteps] = [(i, recipes[i < dense]) for i in range(dense + moe)]
        local_seq = self.seq_len // self.layout.cp
        if first:
            layers.insert(0, (-1, embedding_recipe(self.model, self.layout, local_seq)))
        if last:
            layers.append((dense + moe, head_recipe(self.model, self.layout, local_seq)))
        return layers

    def _chunk_layers(self, first: bool, last: bool) -> list[LayerSteps]:
        steps = self._layer_steps
        layers: list[LayerSteps] = [(i, steps) for i in range(self.layers_per_chunk)]
        if first:
            layers.insert(0, (-1, embedding_recipe(self.model, self.layout, self.seq_len)))
        if last:
            layers.append((self.layers_per_chunk, head_recipe(self.model, self.layout, self.seq_len)))
        return layers


def validate(
    model: ModelSpec, layout: LayoutSpec, num_gpus: int, gpus_per_node: int, global_batch: int, seq_len: int
) -> None:
    """Raise ConfigError (naming the field) unless the layout can run the model on the cluster."""
    for name, value in (
        ("gpus", num_gpus),
        ("gpus_per_node", gpus_per_node),
        ("global_batch", global_batch),
        ("seq_len", seq_len),
    ):
        check_positive_int(name, value)
    n, cp = layout.intra_size, layout.cp
    if n > gpus_per_node or gpus_per_node % n:
        raise ConfigError(
            "layout.intra_size", f"TP/SP/EP degree {n} must divide the scale-up domain of {gpus_per_node} GPUs"
        )
    if cp > 1 and ((n * cp) % gpus_per_node if n * cp > gpus_per_node else gpus_per_node % (n * cp)):
        raise ConfigError("layout.cp", f"intra_size x cp = {n * cp} must divide or fill whole nodes of {gpus_per_node}")
    if cp > 1 and (seq_len % (2 * cp) or (layout.micro_batch * seq_len // cp) % n):
        raise ConfigError(
            "seq_len", f"must split into 2 x cp = {2 * cp} chunks of micro_batch x tokens divisible by {n}"
        )
    if num_gpus % (n * cp * layout.pp):
        label = "intra_size x pp" if cp == 1 else "intra_size x cp x pp"
        raise ConfigError("gpus", f"{num_gpus} is not a multiple of {label} = {n * cp * layout.pp}")
    if model.num_heads % n:
        raise ConfigError("model.num_heads", f"{model.num_heads} heads not divisible by TP/SP degree {n}")
    if layout.ffn == "ep" and model.num_experts % n:
        raise ConfigError("model.num_experts", f"{model.num_experts} experts not divisible by EP degree {n}")
    if layout.ffn == "tp" and model.expert_ffn_size % n:
        raise ConfigError("model.expert_ffn_size", f"not divisible by TP degree {n}")
    if (layout.micro_batch * seq_len) % n:
        raise ConfigError("seq_len", f"micro_batch x seq_len must be divisible by {n}")
    validate_extensions(model, layout, num_gpus, gpus_per_node)
    if layout.schedule == "dualpipe" and (layout.uneven_pp or layout.cp > 1):
        raise ConfigError("layout.schedule", "dualpipe is simulated with even pipeline stages and cp = 1 only")
    stages = layout.pp * layout.virtual_stages
    if layout.uneven_pp and layout.virtual_stages == 1 and model.num_layers >= stages:
        pass  # stage_layers spreads the remainder
    elif model.num_layers % stages:
        raise ConfigError("layout.pp", f"{model.num_layers} layers not divisible by pp x virtual_stages = {stages}")
    dp = num_gpus // (n * cp * layout.pp)
    if global_batch % (dp * layout.micro_batch):
        raise ConfigError(
            "global_batch", f"{global_batch} not divisible by dp x micro_batch = {dp * layout.micro_batch}"
        )
    micro_batches = global_batch // (dp * layout.micro_batch)
    if layout.schedule == "dualpipe" and (layout.pp % 2 or micro_batches % 2 or micro_batches < 2 * layout.pp):
        raise ConfigError(
            "layout.pp",
            f"DualPipe needs an even pp ({layout.pp}) and an even number of "
            f"micro-batches ({micro_batches}) of at least 2 x pp (deepseek-ai/DualPipe)",
        )
    if layout.schedule == "interleaved" and micro_batches % layout.pp:
        raise ConfigError("global_batch", f"interleaved 1F1B needs micro-batches ({micro_batches}) divisible by pp")
