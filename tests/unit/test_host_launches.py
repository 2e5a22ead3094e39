"""Kernels the host launches (simulator.streams.op_costs.launch_times_s): Qwen3's QK-norm and RoPE kernels with their bytes
(workloads/recipes/layers.py qk_steps) and one GEMM launch per local expert under TE's GroupedLinear (layout
expert_gemm "multi_stream") or SequentialMLP, against one grouped kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.kernels import compute_time_s
from simulator.streams.op_costs import launch_times_s
from tests.toys import toy_calibration, toy_gpu
from topologies.hardware import GPU_PRESETS, HostCpu
from workloads.graph.op_lists import backward_ops, forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_model
from workloads.ops import GEMM, Role
from workloads.recipes.layers import attention_recipe, layer_recipe, te_layers
from workloads.recipes.moe import ffn_recipe
from workloads.specs.layouts import LayoutSpec, layout_preset
from workloads.specs.models import ModelSpec

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
QWEN3 = load_model(MODELS / "qwen3-30b-a3b.json")
CAL = toy_calibration(host_launch_s=10e-6)
SEQ = 4096


def _qkv_to_attention(steps) -> list[str]:
    """The names of the steps from the QKV projection to FlashAttention, both included."""
    names = [s.name for s in steps]
    return names[names.index("qkv_proj") : names.index("flash_attn") + 1]


def _steps(steps, *names: str):
    return [next(s for s in steps if s.name == name) for name in names]


def test_qwen3_config_declares_qk_norm_and_rope() -> None:
    """Qwen3-MoE norms q and k per head and rotates them (rope_theta); Llama 3.1 only rotates; M1 does neither."""
    llama = load_model(MODELS / "llama-3.1-70b.json")
    assert (QWEN3.qk_layernorm, QWEN3.rope, llama.qk_layernorm, llama.rope) == (True, True, False, True)
    assert (QWEN3.q_width, QWEN3.num_kv_heads * QWEN3.head_dim) == (4096, 512)


def test_qk_norm_and_rope_bytes_by_hand() -> None:
    """TP 1, 4,096 tokens: q 4,096 x 4,096 and k 4,096 x 512 elements, 18,874,368 in all. QK-norm reads and
    writes them once in BF16 (2 x 2 B): 75,497,472 B in 2 kernels; RoPE the same plus the FP32 angle table of
    q and of k (2 x 4,096 x 128 x 4 B = 4,194,304 B): 79,691,776 B in 2 kernels; both between the QKV
    projection and FlashAttention."""
    steps = attention_recipe(QWEN3, LayoutSpec("t", attention="tp", intra_size=1), SEQ)
    norm, rope = _steps(steps, "qk_norm", "rope")
    assert (norm.mem_bytes, norm.kernels, rope.mem_bytes, rope.kernels) == (75_497_472, 2, 79_691_776, 2)
    assert _qkv_to_attention(steps) == ["qkv_proj", "qk_norm", "rope", "flash_attn"]


def test_qk_bytes_follow_the_heads_and_positions_of_a_gpu() -> None:
    """TP 2 halves the heads of all 4,096 positions: 37,748,736 B of norm, + 4,194,304 B of angles for RoPE.
    Ulysses SP 2 runs them after the QKV all-to-all (so it still fuses into the QKV GEMM), on half the heads
    of every position: the same bytes as TP 2."""
    tp = attention_recipe(QWEN3, LayoutSpec("t", attention="tp", intra_size=2), SEQ)
    sp = attention_recipe(QWEN3, LayoutSpec("s", attention="sp", intra_size=2), SEQ)
    assert [s.mem_bytes for s in _steps(tp, "qk_norm", "rope")] == [37_748_736, 41_943_040]
    assert [s.mem_bytes for s in _steps(sp, "qk_norm", "rope")] == [37_748_736, 41_943_040]
    assert _qkv_to_attention(sp) == ["qkv_proj", "sp_a2a_qkv", "qk_norm", "rope", "flash_attn"]


def test_without_the_features_the_recipe_is_unchanged() -> None:
    """Differential: switching QK-norm and RoPE off removes exactly those two steps, nothing else moves."""
    layout = LayoutSpec("t", attention="tp", intra_size=1, ffn="ep", ep=1)
    plain = layer_recipe(QWEN3.with_(qk_layernorm=False, rope=False), layout, SEQ, 8)
    full = layer_recipe(QWEN3, layout, SEQ, 8)
    assert [s for s in full if s.name not in ("qk_norm", "rope")] == plain
    only_rope = layer_recipe(QWEN3.with_(qk_layernorm=False), layout, SEQ, 8)
    assert [s.name for s in full if s.name not in [t.name for t in only_rope]] == ["qk_norm"]


def test_megatron_qk_layernorm_flag() -> None:
    """--qk-layernorm sets the field over a base model without it; without the flag the base's value stays."""
    base = ModelSpec("m", 2, 1024, 8, 8, 512, 8, 2, 64)
    assert parse_megatron_args("--qk-layernorm").resolve(base).model.qk_layernorm
    assert not parse_megatron_args("--num-layers 2").resolve(base).model.qk_layernorm
    assert parse_megatron_args("--moe-grouped-gemm").layout_fields["expert_gemm"] == "multi_stream"


def test_megatron_no_rope_fusion_runs_the_eager_rope() -> None:
    """--no-rope-fusion turns apply_rope_fusion off: Qwen3's RoPE becomes Megatron-Core's eager ops, 24 kernels
    (q, then k: 6 for the cos and sin tables and 6 on the elements each) and 24 B per element of q and k plus the
    tables, where the fused kernel moves 4 B per element in 2 kernels."""
    assert not QWEN3.rope_unfused
    model = parse_megatron_args("--no-rope-fusion").resolve(QWEN3).model
    assert model.rope_unfused and not parse_megatron_args("--num-layers 2").resolve(QWEN3).model.rope_unfused
    layout = LayoutSpec("t", attention="tp", intra_size=2)
    (fused,) = _steps(attention_recipe(QWEN3, layout, SEQ), "rope")
    (eager,) = _steps(attention_recipe(model, layout, SEQ), "rope")
    elements = SEQ * (QWEN3.q_width + QWEN3.num_kv_heads * QWEN3.head_dim) / 2
    assert (fused.kernels, eager.kernels) == (2, 24)
    assert eager.mem_bytes - 24 * elements == 2 * 2 * SEQ * QWEN3.head_dim * (8 + 8 + 6)


MOE = ModelSpec("m", 1, 1024, 8, 8, 512, 8, 2, 64)


def _layout(expert_gemm: str) -> LayoutSpec:
    """EP 2 of 8 experts: 4 local experts per GPU; no GEMM-fused collectives (as Megatron runs them)."""
    return LayoutSpec("t", attention="tp", intra_size=2, ffn="ep", expert_gemm=expert_gemm, intra_op_overlap=False)


def test_expert_gemm_launches_per_local_expert() -> None:
    """4 local experts: TE GroupedLinear and SequentialMLP launch 4 GEMMs per expert GEMM, a grouped kernel 1;
    the fused activation is one kernel but under SequentialMLP, which runs each expert's MLP on its own."""
    for expert_gemm, gemms, act in (("grouped", 1, 1), ("multi_stream", 4, 1), ("sequential", 4, 4)):
        fc13, act_step, fc2 = _steps(
            ffn_recipe(MOE, _layout(expert_gemm), 1024, 8, False), "expert_fc13", "swiglu", "expert_fc2"
        )
        assert (fc13.kernels, act_step.kernels, fc2.kernels) == (gemms, act, gemms)
        assert fc13.gemm.groups == 4


def _ops(expert_gemm: str):
    layout = _layout(expert_gemm)
    steps = [(0, layer_recipe(MOE, layout, 1024, 8))]
    return tuple(forward_ops(steps, layout)), tuple(backward_ops(steps, layout))


def test_multi_stream_costs_the_host_three_more_launches_per_gemm() -> None:
    """Differential against one grouped kernel, at 10 us per launch: the forward's two expert GEMMs launch 4
    kernels each instead of 1 (+60 us), the backward's dgrad and wgrad of both (+120 us); every other op
    launches the same, and the GPU runs each expert GEMM in the same time (TE's streams run them side by side)."""
    for direction, extra_s in ((0, 60e-6), (1, 120e-6)):
        grouped, multi = _ops("grouped")[direction], _ops("multi_stream")[direction]
        assert [op.name for op in grouped] == [op.name for op in multi]
        launches = launch_times_s(multi, CAL, toy_gpu())
        assert sum(launches) - sum(launch_times_s(grouped, CAL, toy_gpu())) == pytest.approx(extra_s, abs=1e-12)
        gemms = [i for i, op in enumerate(multi) if op.kind == GEMM and op.name.startswith("expert_")]
        assert len(gemms) == (2 if direction == 0 else 4)
        assert all(launches[i] == pytest.approx(40e-6) for i in gemms)
        gpu = toy_gpu()
        for i in gemms:
            assert compute_time_s(multi[i], gpu, CAL) == compute_time_s(grouped[i], gpu, CAL)
        roles = {multi[i].role for i in gemms}
        assert roles == ({Role.FORWARD} if direction == 0 else {Role.INPUT_GRAD, Role.WEIGHT_GRAD})


def test_te_cutlass_grouped_gemm_falls_back_to_cublas_for_the_dropless_wgrad() -> None:
    """NVTE_USE_CUTLASS_GROUPED_GEMM=1 (expert_gemm "cutlass"): TE v2.8 takes its CUTLASS kernel only for equal
    K, a multiple of 128, so forward and dgrad are one launch each and the dropless wgrad (K = each expert's
    tokens) four, the multi-stream cuBLAS path; with capacity-padded counts the wgrad stays one kernel."""
    for dropless, wgrad_launches in ((True, 4), (False, 1)):
        layout = _layout("cutlass").with_(dropless=dropless)
        backward = backward_ops([(0, layer_recipe(MOE, layout, 1024, 8))], layout)
        expert = {op.role: op.kernels for op in backward if op.name.startswith("expert_fc13")}
        assert expert == {Role.INPUT_GRAD: 1, Role.WEIGHT_GRAD: wgrad_launches}
        forward = forward_ops([(0, layer_recipe(MOE, layout, 1024, 8))], layout)
        assert [op.kernels for op in forward if op.name.startswith("expert_fc")] == [1, 1]


def test_a_grace_host_issues_each_kernel_at_its_own_measured_cost() -> None:
    """TransformerEngine #2053 times one te.Linear forward's CPU at 99.66 us on a GB200's Grace (torch.nn.Linear's
    2.7 times, as on a GH200) and torch.nn.Linear's at 13.48 us on a DGX-H100 host: an eager kernel costs the host a
    TE module's time beside a GPU whose spec names the CPU, 13.48 x 2.709 = 36.5 us on x86."""
    ops = _ops("multi_stream")[0]
    kernels = sum(op.kernels for op in ops)
    assert GPU_PRESETS["gb200"].host_cpu is GPU_PRESETS["gb300"].host_cpu is HostCpu.GRACE
    assert GPU_PRESETS["h100"].host_cpu is GPU_PRESETS["b200"].host_cpu is HostCpu.X86
    x86 = sum(launch_times_s(ops, DEFAULT_CALIBRATION, GPU_PRESETS["h100"]))
    grace = sum(launch_times_s(ops, DEFAULT_CALIBRATION, GPU_PRESETS["gb200"]))
    assert x86 == pytest.approx(kernels * 36.51e-6, rel=1e-3) and grace == pytest.approx(kernels * 99.66e-6)


def test_a_stack_without_te_modules_launches_at_a_bare_torch_ops_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """MegaScale-MoE's own stack (no Megatron token dispatcher: workloads/recipes/layers.py te_layers) pays a bare
    torch op's host time per kernel, 13.48 us on x86, where Megatron-Core's layers pay a TE module's; and the
    process-wide timing cache keeps the two apart, so an op list that both build is timed for each (the identity
    carries the flag)."""
    ops = _ops("multi_stream")[0]
    kernels = sum(op.kernels for op in ops)
    bare = sum(launch_times_s(ops, DEFAULT_CALIBRATION, GPU_PRESETS["h100"], te_modules=False))
    assert bare == pytest.approx(kernels * 13.48e-6)
    assert te_layers(layout_preset("megatron-lm").with_(token_dispatcher="alltoall"))
    assert not te_layers(layout_preset("megascale-moe"))

    from simulator.engine import timer as timer_module
    from simulator.engine.faults import StageFault
    from simulator.engine.sim_env import environment
    from simulator.report.simulate import prepare
    from workloads.schedules.base import FORWARD, Task

    layout = layout_preset("megascale-moe").with_(pp=1, intra_size=8)
    workload, cluster, _ = prepare("mixtral-8x7b", layout, 8, "h800", 8, 1024, 1, True)
    key = workload.task_key(0, Task(FORWARD, 0, 0))
    shared = timer_module.TimingCache(max_entries=8)

    def duration_s() -> float:
        costs = timer_module.CostCache(workload, cluster.gpu, DEFAULT_CALIBRATION)
        return timer_module.MemoTimer(environment(), costs, [StageFault()], shared).task_timing(key).duration_s

    bare_s = duration_s()
    monkeypatch.setattr(timer_module, "te_layers", lambda _layout: True)
    te_s = duration_s()
    assert len(shared) == 2 and te_s > bare_s


def test_the_host_runs_ahead_where_megatron_cores_schedule_lets_it() -> None:
    """Megatron-Core's plain 1F1B at PP > 1 synchronizes the host at each batched P2P exchange (batch_p2p_sync), the
    interleaved schedule's overlapped P2P does not, and without a pipeline nothing is exchanged: the host runs ahead
    into the next task there (simulator/engine/host_lead.py); MegaScale-MoE's own stack never (not published)."""
    from workloads.graph.step import StepWorkload

    megatron = layout_preset("megatron-lm").with_(token_dispatcher="alltoall", intra_size=1, ffn="ep", ep=8)
    cases = {
        "1f1b pp 2": (megatron.with_(pp=2), False),
        "interleaved pp 2": (megatron.with_(pp=2, schedule="interleaved", virtual_stages=2), True),
        "1f1b pp 1": (megatron.with_(pp=1), True),
        "megascale interleaved": (
            layout_preset("megascale-moe").with_(pp=2, schedule="interleaved", virtual_stages=2),
            False,
        ),
    }
    model = load_model("mixtral-8x7b")
    for name, (layout, ahead) in cases.items():
        workload = StepWorkload(model, layout, 16 * layout.pp, 8, 64, 1024)
        assert workload.host_runs_ahead is ahead, name
