"""Memory per GPU against hand computations of MegaScale-MoE Sec. 4.1, and the HBM limit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from experiments.cli.main import main
from simulator.memory.activations import logits_bytes, mtp_bytes
from simulator.memory.per_gpu import GIB, activation_bytes_per_layer, peak_memory, stage_memory
from simulator.report.simulate import simulate
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import MEGASCALE_MOE, MEGATRON_LM
from workloads.specs.models import MODEL_PRESETS, ModelSpec

M1 = MODEL_PRESETS["paper-352b"]
MIB = 2**20


def workload(layout, gpus: int = 240, seq_len: int = 8192) -> StepWorkload:
    """paper-352b under layout on gpus H800s, global batch 720."""
    return StepWorkload(M1, layout, gpus, 8, 720, seq_len)


def test_activation_formulas_by_hand() -> None:
    # b=1, s=8192, h=4096, n=8: bsh/n = 4,194,304 BF16 elements = 8 MiB. k=3, f=14336/4096=3.5, m=32/8=4.
    sar = (2 * 3 * 3.5 + 4 + 2 / 4) * 8 * MIB  # 25.5 x 8 MiB = 204 MiB
    none = (2 * 8 + 2 * 3 + 3 * 3 * 3.5 + 12 + 5 / 4) * 8 * MIB  # 66.75 x 8 MiB = 534 MiB
    assert sar == 204 * MIB and none == 534 * MIB
    assert activation_bytes_per_layer(workload(MEGASCALE_MOE)) == pytest.approx(sar, rel=1e-12)
    assert activation_bytes_per_layer(workload(replace(MEGASCALE_MOE, recompute="none"))) == pytest.approx(none)
    # MegaScale-MoE's TP+TP (Table 5, SAR) with the all-gather dispatcher also keeps all b s k = 24,576
    # token copies in BF16 (192 MiB; its permutation is fused, so no index).
    tp_tp = workload(MEGASCALE_MOE.with_(attention="tp", ffn="tp"))
    assert activation_bytes_per_layer(tp_tp) == pytest.approx(sar + 24576 * 4096 * 2, rel=1e-12)
    # Megatron-LM (Megatron-Core, not MegaScale-MoE's system) is counted tensor by tensor
    # (simulator.memory.activations), per local token (b s / n = 1,024), BF16:
    per_token = (
        2 * 4096 * 2  # the two norms' inputs
        + 2 * 4096  # the QKV GEMM's input
        + 2 * (4096 + 2 * 1024)  # Q, K, V (8 KV heads of 128)
        + 2 * 4096  # FlashAttention's output O
        + 4 * 32  # its FP32 log-sum-exp, 32 heads
        + 2 * 4096  # the router's input
        + 4 * 32  # its FP32 scores over 32 experts
        + 30 * 2 * 4096  # k n x capacity 1.25 = 30 gathered copies per local token: the expert inputs
        + 30 * 2 * 2 * 14336 / 8  # fc1's output, 2 f / n wide
        + 30 * 2 * 14336 / 8  # fc2's input
        + 24 * 8 * 4096  # the unfused permutation's int64 index, expanded to [b s k, h]
    )
    assert per_token == 1_408_256
    megatron_no_recompute = workload(replace(MEGATRON_LM, recompute="none"))
    assert activation_bytes_per_layer(megatron_no_recompute) == pytest.approx(1024 * per_token, rel=1e-12)
    # Full recomputation keeps only each layer's input, bsh/n.
    assert activation_bytes_per_layer(workload(MEGATRON_LM)) == pytest.approx(8 * MIB, rel=1e-12)


def test_stage0_breakdown_by_hand() -> None:
    # megascale-moe, 240 GPUs: n=8, pp=15 (4 layers per stage), dp=2, ZeRO-1.
    experts = 32 * 3 * 4096 * 14336 // 8  # E/n whole experts: 704,643,072
    attention = 4096 * (4096 + 2 * 8 * 128) + 4096 * 4096  # SP replicates QKV + out: 41,943,040
    small = 4096 * (32 + 2)  # router and two norms
    embedding = 65536 * 4096 // 8  # stage 0 holds the input embedding, vocab-parallel over n
    held = 4 * (experts + attention + small) + embedding
    assert held == 3_020_455_936
    mem = stage_memory(workload(MEGASCALE_MOE), 0)
    assert mem.params_bytes == pytest.approx(2 * held)  # BF16
    assert mem.grads_bytes == pytest.approx(4 * held)  # FP32 gradients
    assert mem.optimizer_bytes == pytest.approx(12 * held / 2)  # FP32 master, m, v over DP 2
    assert mem.activations_bytes == pytest.approx(15 * 4 * 204 * MIB)  # 1F1B: pp - 0 = 15 in flight
    assert mem.buffers_bytes == pytest.approx(4 * 1024 * 3 * 4096 * 2 * 1.25)  # s/n tokens x k x h, padded
    assert mem.total_gib == pytest.approx(45.8265, abs=1e-3)


def test_megatron_stage0_by_hand() -> None:
    experts = 32 * 3 * 4096 * 14336 // 8  # TP shards every expert over n
    attention = (4096 * (4096 + 2 * 8 * 128) + 4096 * 4096) // 8  # TP shards attention too
    held = 4 * (experts + attention + 4096 * 34) + 65536 * 4096 // 8
    mem = peak_memory(workload(MEGATRON_LM))
    assert mem.stage == 0
    expected = held * (2 + 4 + 6) + 15 * 4 * 8 * MIB + 4 * 1024 * 3 * 4096 * 2 * 1.25  # full recompute
    assert mem.total_bytes == pytest.approx(expected)


def test_over_hbm_is_config_error_unless_allowed(capsys: pytest.CaptureFixture) -> None:
    layout = MEGASCALE_MOE.with_(name="no-sar", recompute="none")
    with pytest.raises(ConfigError, match=r"^memory: .* GiB per GPU \(stage 0\) exceeds the 74.5 GiB \(80 GB\) HBM"):
        simulate(M1, layout, 240, seq_len=16384)
    # 32,768 tokens: 82.0 GiB counted, 70.1 GiB with the activations 25% lower: "may not fit", simulated
    assert main(["run", "--seq-len", "49152", "--global-batch", "240"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moesim: error: memory: ")


def test_allow_oom_flags_report() -> None:
    tiny = ModelSpec("tiny", 4, 1024, 16, 4, 2048, 8, 2, 32000)
    base = cluster_preset("h800", 16)
    small = base.with_(gpu=replace(base.gpu, hbm_bytes=1e8))
    fits = simulate(tiny, MEGASCALE_MOE.with_(pp=2), cluster=base, global_batch=8, seq_len=512)
    assert not fits.oom
    with pytest.raises(ConfigError, match="^memory: "):
        simulate(tiny, MEGASCALE_MOE.with_(pp=2), cluster=small, global_batch=8, seq_len=512)
    report = simulate(tiny, MEGASCALE_MOE.with_(pp=2), cluster=small, global_batch=8, seq_len=512, allow_oom=True)
    assert report.oom and report.to_dict()["oom"] is True
    assert report.peak_memory_gib * GIB > 1e8
    assert report.memory_verdict.startswith("does not fit: ") and fits.memory_verdict.startswith("fits: ")
    assert replace(report, oom=False, memory_verdict="", sim_wall_s=0) == replace(fits, memory_verdict="", sim_wall_s=0)


def test_megatron_recomputes_as_few_layers_as_fit() -> None:
    """With recompute_to_fit, at 240 GPUs Megatron-LM's stage 0 holds 15 micro-batches of 4 layers. Each recomputed layer keeps its
    input (8 MiB); a kept layer keeps 1,024 x 1,408,256 B = 1,375.25 MiB (test_activation_formulas_by_hand).
    Two kept layers fit in 80 GB, three do not."""
    from simulator.memory.per_gpu import fit_recompute

    base = workload(MEGATRON_LM.with_(recompute_to_fit=True))
    static = peak_memory(base).total_bytes - 15 * 4 * 8 * MIB  # everything but activations
    two_kept = static + 15 * (2 * 8 + 2 * 1375.25) * MIB
    three_kept = static + 15 * (1 * 8 + 3 * 1375.25) * MIB
    assert two_kept <= 80e9 < three_kept
    fitted = fit_recompute(base, 80e9)
    assert fitted.layout.recompute_kept_layers == 2
    assert peak_memory(fitted).total_bytes == pytest.approx(two_kept)


def test_interleaved_peak_counts_each_in_flight_forward_with_its_own_block() -> None:
    """pp 2 x vp 2 over blocks of 1, 2, 2, 1 layers: stage 0 holds blocks 0 (1 layer) and 2 (2 layers). Its
    warm-up is (2 - 0 - 1) 2 + (2 - 1) 2 = 4 forwards plus the first steady one, in the order block 0, 0,
    2, 2, 0 (micro-batches in groups of pp): 3 x 1 + 2 x 2 = 7 layers in flight, not 5 x 2."""
    tiny = ModelSpec("tiny", 6, 1024, 16, 4, 2048, 8, 2, 32000)
    layout = MEGASCALE_MOE.with_(pp=2, virtual_stages=2, schedule="interleaved", block_layers=(1, 2, 2, 1))
    work = StepWorkload(tiny, layout, 16, 8, 4, 1024)
    assert work.schedule.in_flight(0) == 5
    per_layer = activation_bytes_per_layer(work)
    assert stage_memory(work, 0).activations_bytes == pytest.approx(7 * per_layer, rel=1e-12)


def test_report_memory_is_each_stage_breakdown_and_their_peak() -> None:
    """The report's per-stage memory and its peak are stage_memory and peak_memory of the step's workload, to the
    bit (built from one breakdown per stage): tiny model, PP 2 with 1F1B, so stage 0 holds 2 micro-batches' and
    stage 1 one micro-batch's activations, and beside them the head's logits: 512 / 8 tokens x 32,000 in BF16
    (MegaScale-MoE's loss is not published)."""
    tiny = ModelSpec("tiny", 4, 1024, 16, 4, 2048, 8, 2, 32000)
    cluster = cluster_preset("h800", 16)
    report = simulate(tiny, MEGASCALE_MOE.with_(pp=2), cluster=cluster, global_batch=8, seq_len=512)
    step = StepWorkload(tiny, MEGASCALE_MOE.with_(pp=2), 16, 8, 8, 512)
    stages = [stage_memory(step, s) for s in range(2)]
    logits = 512 // 8 * 32000 * 2
    assert stages[0].activations_bytes == 2 * (stages[1].activations_bytes - logits)
    assert report.memory_gib == [{**b.terms_gib(), "total": b.total_gib} for b in stages]
    assert report.peak_memory_gib == peak_memory(step).total_gib == max(b.total_gib for b in stages)


def test_the_head_keeps_its_logits_and_each_mtp_depth_its_own() -> None:
    """Nemotron 3 Nano's head at sequence 8,192 (vocabulary 131,072, TE's fused loss): its BF16 logits are the 2 GiB
    Megatron-Bridge's recompute study saw "the output projection still needed" (skills/nemo-mbridge-perf-activation-
    recompute), here over TP 2; two MTP depths keep two more logits, and each its projection's 4h inputs and one
    layer's activations."""
    nano = load_model("examples/models/nemotron-3-nano-30b-a3b.json")
    layout = MEGATRON_LM.with_(name="te-loss", cross_entropy="te", intra_size=2, micro_batch=1)
    tokens = 8192 // 2  # vocabulary-parallel over TP 2: every token, half the vocabulary; counted per token
    assert logits_bytes(nano, layout, 8192) == tokens * 131072 * 2 == 2**30
    megatron_loss = layout.with_(cross_entropy="", token_dispatcher="alltoall")  # Megatron-Core's own loss
    assert logits_bytes(nano, megatron_loss, 8192) == tokens * 131072 * (4 + 2)  # FP32 copy beside the BF16
    with_mtp = replace(nano, mtp_layers=2)
    assert logits_bytes(with_mtp, layout, 8192) == 3 * 2**30
    layer = 1e6  # one MTP depth's layer activations, as given
    assert mtp_bytes(with_mtp, layout, 8192, layer) == 2 * (4 * nano.hidden_size * 2 * tokens + layer)
