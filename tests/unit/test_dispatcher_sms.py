"""The SMs of the flex dispatcher's kernels: Megatron's flags and their precedence (TransformerConfig.__post_init__
at NVIDIA/Megatron-LM@d98e8a64dd), the layout field, and the defaults simulator.costs.kernels.comm_kernel_sms
falls back to (Megatron-Core's 20 for DeepEP, HybridEP's 24 in one NVLink domain and 8 across)."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION as CAL
from simulator.costs.kernels import comm_kernel_sms
from topologies.errors import ConfigError
from workloads.graph.op_lists import forward_ops
from workloads.inputs.megatron import parse_megatron_args
from workloads.ops import ALL_TO_ALL, COLLECTIVE, COMM, Group, Op, Transport
from workloads.recipes.moe import ep_ffn_recipe
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import model_preset

FLEX = "--moe-token-dispatcher-type flex --expert-model-parallel-size 8 --moe-flex-dispatcher-backend "


def _sms(flags: str, backend: str = "hybridep") -> int:
    return parse_megatron_args(FLEX + backend + " " + flags).layout_fields["dispatcher_sms"]


def test_no_flag_leaves_the_backends_default() -> None:
    assert _sms("") == _sms("", "deepep") == 0


def test_the_unified_flag_wins_over_the_deprecated_ones() -> None:
    assert _sms("--moe-flex-dispatcher-num-sms 16") == 16
    assert _sms("--moe-flex-dispatcher-num-sms 16 --moe-hybridep-num-sms 32") == 16
    # an explicit moe_flex_dispatcher_num_sms skips the conflict check of the deprecated knobs, as Megatron does
    assert _sms("--moe-flex-dispatcher-num-sms 16 --moe-hybridep-num-sms 32 --moe-deepep-num-sms 24") == 16


def test_a_deprecated_flag_is_routed_into_the_unified_one() -> None:
    # Megatron-Bridge's perf recipes set moe_hybridep_num_sms = 32 (perf_recipes/_common.py _benchmark_common)
    assert _sms("--moe-hybridep-num-sms 32") == 32
    # the deprecated knobs are not per backend any more: DeepEP's name reaches HybridEP and the other way round
    assert _sms("--moe-deepep-num-sms 24") == 24
    assert _sms("--moe-hybridep-num-sms 24", "deepep") == 24
    assert _sms("--moe-deepep-num-sms 32 --moe-hybridep-num-sms 32") == 32


def test_conflicting_deprecated_flags_are_refused_in_megatrons_words() -> None:
    with pytest.raises(ConfigError, match="Conflicting deprecated SM-count knobs"):
        _sms("--moe-deepep-num-sms 20 --moe-hybridep-num-sms 32")


def test_deepep_takes_an_even_count_and_every_count_is_positive() -> None:
    with pytest.raises(ConfigError, match="must be even"):
        _sms("--moe-flex-dispatcher-num-sms 21", "deepep")
    assert _sms("--moe-flex-dispatcher-num-sms 21") == 21  # HybridEP asserts no parity
    with pytest.raises(ConfigError, match="positive"):
        _sms("--moe-flex-dispatcher-num-sms 0")


def test_without_the_flex_dispatcher_the_flags_do_nothing() -> None:
    job = parse_megatron_args("--moe-token-dispatcher-type alltoall --moe-hybridep-num-sms 32")
    assert job.layout_fields["dispatcher_sms"] == 0
    assert any("--moe-hybridep-num-sms without --moe-token-dispatcher-type flex" in note for note in job.notes)


def _ep_op(transport: Transport, nic_bytes: float = 0.0, sms: int = 0) -> Op:
    return Op("a2a", COLLECTIVE, COMM, collective=ALL_TO_ALL, group=Group.EP, group_size=8, comm_bytes=1.0,
              nic_bytes=nic_bytes, transport=transport, sms=sms)  # fmt: skip


def test_the_held_sms_are_the_jobs_else_the_backends_default() -> None:
    assert comm_kernel_sms(_ep_op(Transport.DEEPEP), CAL) == 20  # Megatron-Core's set_deepep_num_sms(... else 20)
    assert comm_kernel_sms(_ep_op(Transport.DEEPEP, nic_bytes=1.0), CAL) == 20
    assert comm_kernel_sms(_ep_op(Transport.HYBRIDEP), CAL) == 24  # HybridEP's Configurer, one NVLink domain
    assert comm_kernel_sms(_ep_op(Transport.HYBRIDEP, nic_bytes=1.0), CAL) == 8  # ... across domains
    assert comm_kernel_sms(_ep_op(Transport.HYBRIDEP, nic_bytes=1.0, sms=32), CAL) == 32
    assert comm_kernel_sms(_ep_op(Transport.DEEPEP, sms=24), CAL) == 24
    assert comm_kernel_sms(_ep_op(Transport.NCCL, sms=32), CAL) == CAL.comm_sms_nccl  # NCCL keeps its channels


def test_the_layout_field_reaches_the_dispatch_and_combine_ops() -> None:
    model = model_preset("mixtral-8x7b")
    layout = LayoutSpec("flex", attention="tp", intra_size=1, ep=8, token_dispatcher="flex-hybridep", dispatcher_sms=32)
    ops = forward_ops([(0, ep_ffn_recipe(model, layout, 4096, 8))], layout)
    ep = [op for op in ops if op.group == Group.EP and op.transport == Transport.HYBRIDEP]
    assert [op.name for op in ep] == ["ep_a2a_dispatch", "ep_a2a_combine"]
    assert {op.sms for op in ep} == {32}
    assert all(op.sms == 0 for op in ops if op not in ep)  # the routing map's NCCL all-gather among them
    with pytest.raises(ConfigError, match="dispatcher_sms"):
        LayoutSpec("flex", dispatcher_sms=-1)


def test_more_sms_than_the_gpu_has_are_refused_in_megatrons_words() -> None:
    """An H100 has 132 SMs: the dispatch and combine kernels cannot hold them all (simulator/report/simulate.prepare),
    and the error names the Megatron flag that set them."""
    from simulator.report.simulate import simulate

    job = parse_megatron_args(FLEX + "hybridep --moe-flex-dispatcher-num-sms 132 --moe-grouped-gemm")
    run = job.resolve(model_preset("mixtral-8x7b"), None)
    with pytest.raises(ConfigError, match="132 SMs .* h100 has 132") as refused:
        simulate(run.model, run.layout, 8, cluster="h100", global_batch=8, seq_len=4096)
    assert "--moe-flex-dispatcher-num-sms" in str(job.explain(refused.value))
    fits = parse_megatron_args(
        FLEX + "hybridep --moe-flex-dispatcher-num-sms 130 --moe-grouped-gemm --use-distributed-optimizer"
    )
    run = fits.resolve(model_preset("mixtral-8x7b"), None)
    assert (
        simulate(run.model, run.layout, 8, cluster="h100", global_batch=8, seq_len=4096, allow_oom=True).step_time_s > 0
    )
