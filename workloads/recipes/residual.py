"""The elementwise kernels around a transformer layer's branches: the residual adds and the gradient sums that
autograd runs where one tensor feeds two branches, and Megatron-Core's query copy and Q/K/V gradient concat.

Each is one memory-bound kernel over a BF16 activation. Read 2, write 1 for an add or a sum (a PyTorch
autograd InputBuffer sums the second gradient that reaches a tensor into the first); read 1, write 1 for a copy.
"""

from __future__ import annotations

from workloads.ops import BYTES_BF16, BYTES_FP32, GEMM, MEMORY, Gemm, GraphPart, Module, Step
from workloads.specs.models import ModelSpec

ADD_PASSES = 3  # an add or a gradient sum: two operands read, the result written
MASK_BYTES = 1  # a dropout mask's element: torch.native_dropout returns a bool mask


def residual_step(name: str, act_bytes: float, backward: bool = True, dropout: float = 0.0) -> Step:
    """A residual add, out = residual + dropout(branch output) (Megatron-Core's bias-dropout-add,
    megatron/core/fusions/fused_bias_dropout.py lines 11-58 and 69-73 (jit_fuser) at NVIDIA/Megatron-LM@d98e8a64,
    one fused kernel; transformer_layer.py lines 754 and 1105 apply it after the attention and after the MLP), on
    ``act_bytes`` of activation.

    Without dropout (p = 0: PyTorch's dropout returns its input) its backward hands the output gradient to both
    operands unchanged. With ``backward`` the kernel charged in backward is the sum autograd runs where the
    residual's input also fed the branch (read 2, write 1); without, the caller charges that sum where it runs
    (``input_grad_sums``). With hidden ``dropout`` > 0 the fused forward also writes the dropout's mask, a bool per
    element (torch.native_dropout), and the branch's gradient is the output gradient times the mask: one more
    backward kernel reading both and writing the gradient (native_dropout_backward)."""
    mask_bytes = act_bytes / BYTES_BF16 * MASK_BYTES if dropout > 0 else 0.0
    forward = ADD_PASSES * act_bytes + mask_bytes
    masked = ((2 * act_bytes + mask_bytes),) if dropout > 0 else ()  # the gradient read and written, the mask read
    summed = (ADD_PASSES * act_bytes,) if backward else ()
    backward_bytes = (*summed, *masked)
    return Step(name, MEMORY, mem_bytes=forward, bwd_kernels=len(backward_bytes), bwd_mem_bytes=sum(backward_bytes))


def input_grad_sums(name: str, act_bytes: float, consumers: int, module: Module, graph: GraphPart) -> list[Step]:
    """Backward only: the gradient sums of a tensor of ``act_bytes`` that ``consumers`` branches read, one
    kernel per branch after the first, none in forward. The MLP's input (the attention block's output) feeds the
    pre-MLP norm and the MLP's residual add (transformer_layer.py lines 885-893 and 1105). The MoE layer's input (the pre-MLP norm's output) feeds
    the router's gate GEMM and the token dispatcher, and the shared experts where the model has them
    (megatron/core/transformer/moe/moe_layer.py lines 444-452 route, 454-505 preprocess and dispatch, 507-533
    shared_experts_compute at d98e8a64; RouterGatingLinearFunction.backward returns its own grad_input,
    moe_utils.py lines 1406-1440)."""
    sums = consumers - 1
    if sums <= 0:
        return []
    return [
        Step(
            name,
            MEMORY,
            backward_only=True,
            bwd_mem_bytes=sums * ADD_PASSES * act_bytes,
            bwd_kernels=sums,
            module=module,
            graph=graph,
        )
    ]


def megatron_qkv_copies(model: ModelSpec, tokens: int, shards: int) -> list[Step]:
    """Megatron-Core's SelfAttention.get_query_key_value_tensors on ``tokens`` positions of 1/``shards`` of the
    heads, with grouped queries (more query heads than key-value heads): the fused QKV output is viewed as
    [s, b, groups, (q per group + 2) x head dim] and split along the last dim (TE's SplitAlongDim: views), then
    the query reshaped to [s, b, heads, head dim] (megatron/core/transformer/attention.py lines 1873-1918 at
    d98e8a64). The query view's group stride is (q per group + 2) x head dim, not q per group x head dim, so
    the reshape cannot be a view: one copy of the query (read and written once). Its backward is a view.

    In backward, the query, key and value gradients come from different kernels (the q / k norms' and the
    attention's), so TE's SplitAlongDim.backward finds them in separate storage and concatenates them into
    the QKV gradient (torch.cat: every Q/K/V element read and written once; NVIDIA/TransformerEngine@d0067d0d
    transformer_engine/pytorch/utils.py lines 444-533, its no-op only when the gradients already sit side
    by side in one buffer). Charged as one backward-only step. None without grouped queries (the reshape is then
    a view; the concat is still charged)."""
    q_elements = tokens * model.q_width / shards
    qkv_elements = tokens * model.qkv_width / shards
    steps = []
    if model.q_per_kv > 1:
        steps.append(Step("q_reshape_copy", MEMORY, mem_bytes=2 * q_elements * BYTES_BF16, bwd_kernels=0))
    steps.append(Step("qkv_grad_cat", MEMORY, backward_only=True, bwd_mem_bytes=2 * qkv_elements * BYTES_BF16))
    return steps


# Megatron-Core's SinkhornKnopp at d98e8a64 (megatron/core/transformer/hyper_connection.py): forward, the row max and
# the exp, then per iteration a sum, a clamp and a division for the rows and again for the columns; backward recomputes
# the forward and runs autograd's backward of each (assumed: two kernels per forward one).
SINKHORN_FWD_KERNELS_PER_ITERATION = 6
SINKHORN_BWD_PER_FWD = 3


def hyper_connection_steps(name: str, model: ModelSpec, tokens: int, fused: bool) -> tuple[list[Step], Step]:
    """mHC around one block (attention or FFN) on ``tokens`` positions: the steps before it (the mapping projection
    of the flattened n-stream state with its RMS norm, the Sinkhorn-Knopp projection of the n x n mixing matrix, the
    aggregation of the n streams into the block's input) and the step that replaces its residual add (H_res times
    the streams plus H_post times the block's output). Megatron-Core's HyperConnectionModule at d98e8a64:
    _projection_and_get_norm and _compute_h (torch.compile), SinkhornKnopp, aggregate, and
    fused_h_res_h_post_bda's bmm, expansion and bias-dropout-add; ``fused``: one kernel for the mappings with the
    Sinkhorn iterations and the aggregation, one for the merge (Megatron-Bridge's use_fused_mhc). The n-stream
    state is BF16; the mixing weights FP32. Every step is of Module.MHC (--recompute-modules mhc re-runs them)."""
    n, h, mhc = model.residual_streams, model.hidden_size, Module.MHC
    streams = tokens * n * h * BYTES_BF16
    single = tokens * h * BYTES_BF16
    mixes = tokens * (n * n + 2 * n) * BYTES_FP32
    projection = Step(f"{name}_mhc_proj", GEMM, gemm=Gemm(tokens, n * n + 2 * n, n * h), bf16_only=True, module=mhc)
    if fused:
        pre_bytes, pre_bwd = streams + single + 2 * mixes, 2 * streams + single
        pre = Step(f"{name}_mhc_pre", MEMORY, mem_bytes=pre_bytes, bwd_mem_bytes=pre_bwd, module=mhc)
        merge_bwd = 3 * streams + single
        merge = Step(f"{name}_mhc_merge", MEMORY, mem_bytes=2 * streams + single, bwd_mem_bytes=merge_bwd, module=mhc)
        return [projection, pre], merge
    matrix = tokens * n * n * BYTES_FP32
    kernels = 2 + SINKHORN_FWD_KERNELS_PER_ITERATION * model.sinkhorn_iterations
    sinkhorn_bytes = 2 * matrix * kernels
    backward = {"bwd_mem_bytes": SINKHORN_BWD_PER_FWD * sinkhorn_bytes, "bwd_kernels": SINKHORN_BWD_PER_FWD * kernels}
    pre = [
        Step(f"{name}_mhc_norm", MEMORY, mem_bytes=streams, bwd_mem_bytes=2 * streams, module=mhc),
        projection,
        Step(f"{name}_mhc_weights", MEMORY, mem_bytes=2 * mixes, module=mhc),
        Step(f"{name}_mhc_sinkhorn", MEMORY, mem_bytes=sinkhorn_bytes, kernels=kernels, module=mhc, **backward),
        Step(
            f"{name}_mhc_aggregate", MEMORY, mem_bytes=streams + single, bwd_mem_bytes=2 * streams + single, module=mhc
        ),
    ]
    merge_bytes = 2 * streams + (single + streams) + 3 * streams  # bmm, expansion, add of the two (read 2, write 1)
    merge = Step(
        f"{name}_mhc_merge",
        MEMORY,
        mem_bytes=merge_bytes,
        kernels=3,
        bwd_mem_bytes=merge_bytes,
        bwd_kernels=3,
        module=mhc,
    )
    return pre, merge
