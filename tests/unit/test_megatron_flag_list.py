"""Megatron-LM's flags at the pinned commit, every one classified (workloads/inputs/megatron_flag_list.py), and the
GPT-OSS / window flags the issue found "unknown" now read or explained."""

from __future__ import annotations

from collections import Counter

import pytest

from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_args import FLAGS, READ_FLAGS, flag_class
from workloads.inputs.megatron_flag_list import IGNORED, NOT_MODELLED, UNKNOWN, ignored_reason, pinned_flags
from workloads.inputs.yaml_files import load_model

CLASSES = ("modelled", "no effect", "not modelled")
GPT_OSS = load_model("examples/models/gpt-oss-20b.json")


def test_every_pinned_flag_has_a_class() -> None:
    pinned = pinned_flags()
    assert len(pinned) > 800 and all(name.startswith("--") for name in pinned)
    classes = Counter(flag_class(name) for name in pinned)
    assert set(classes) == set(CLASSES), classes  # none "unknown"
    assert classes["modelled"] == sum(name in pinned for name in READ_FLAGS)  # --checkpoint-activations is legacy


def test_the_names_moesim_reads_or_explains_are_megatron_s() -> None:
    """A flag moesim reads or gives its own reason for is a flag of the pinned parser (a renamed flag fails here:
    --overlap-p2p-comm was never one; Megatron has --no-overlap-p2p-communication)."""
    pinned = pinned_flags()
    assert [name for name in FLAGS if name not in pinned] == []
    assert [name for name in IGNORED if name not in pinned] == []


@pytest.mark.parametrize(
    ("flag", "cls"),
    [
        ("--cuda-graph-impl", "modelled"),
        ("--window-size", "modelled"),
        ("--softmax-type", "no effect"),
        ("--lr", "no effect"),
        ("--log-throughput", "no effect"),
        ("--inference-max-requests", "no effect"),
        ("--use-megatron-fsdp", "modelled"),
        ("--data-parallel-sharding-strategy", "modelled"),  # FSDP's, not the data pipeline's
        ("--fsdp-double-buffer", "not modelled"),
        ("--moe-paged-stash", "modelled"),
        ("--moe-paged-stash-page-size", "not modelled"),
        ("--disable-mamba-mem-eff-path", "not modelled"),
    ],
)
def test_classes(flag: str, cls: str) -> None:
    assert flag_class(flag) == cls


def test_flags_megatron_does_not_have_are_unknown() -> None:
    """GPT-OSS's example passes two flags of a post-training plug-in (examples/gptoss/02_train.sh): Megatron's
    pre-training parser at the pin has neither."""
    assert ignored_reason("--enable-gpt-oss") == UNKNOWN == ignored_reason("--export-force-local-attention")
    assert ignored_reason("--fsdp-double-buffer").startswith(NOT_MODELLED)


def test_windows_from_the_job() -> None:
    """--window-size 127,0 is a 128-key causal window; --window-attn-skip-freq 2 puts it on layers 1, 3, ... (from
    1), i.e. 0, 2, ... from 0: GPT-OSS's own pattern, so no note; a list pattern marks the window layers."""
    flags = "--window-size 127,0 --window-attn-skip-freq 2 --quick-geglu --activation-func-clamp-value 7.0"
    run = parse_megatron_args(flags).resolve(GPT_OSS)
    assert run.model.sliding_window == 128 == GPT_OSS.sliding_window
    assert run.model.window_layers == tuple(range(0, 24, 2)) == GPT_OSS.window_layers
    assert run.model.expert_act_clamp == 7.0
    assert not any("sliding windows" in note for note in run.notes)
    assert not any("no --swiglu" in note for note in run.notes)
    listed = parse_megatron_args("--window-size 63,0 --window-attn-skip-freq [1,1,0]*8").resolve(GPT_OSS).model
    assert listed.sliding_window == 64 and listed.window_layers == tuple(i for i in range(24) if i % 3 != 2)
    full = parse_megatron_args("--window-size -1,0").resolve(GPT_OSS).model
    assert (full.sliding_window, full.window_layers) == (0, ())
    every = parse_megatron_args("--window-size 127,0").resolve(GPT_OSS).model
    assert every.window_layers == tuple(range(24))


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        ("--window-size 127", "--window-size"),
        ("--window-size 127,0 --window-attn-skip-freq 0", "--window-attn-skip-freq"),
        ("--window-size 127,0 --window-attn-skip-freq [1,0]", "--window-attn-skip-freq"),  # 2 of 24 layers
    ],
)
def test_window_errors_name_the_flag(flags: str, flag: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_megatron_args(flags).resolve(GPT_OSS)
    assert error.value.field == flag


def test_interleaving_at_pp_2_follows_overlap_p2p() -> None:
    """Megatron overlaps PP sends by default (overlap_p2p_comm True), which lets PP 2 interleave; without it
    (--no-overlap-p2p-communication) PP must be > 2; PP 1 never interleaves (validate_args)."""
    base = "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"
    assert parse_megatron_args(base).resolve(GPT_OSS).layout.virtual_stages == 2
    with pytest.raises(ConfigError, match="pp >= 3"):
        parse_megatron_args(base + " --no-overlap-p2p-communication").resolve(GPT_OSS)
    with pytest.raises(ConfigError, match="pp >= 2"):
        parse_megatron_args("--num-virtual-stages-per-pipeline-rank 2").resolve(GPT_OSS)


def test_a_layout_with_the_virtual_stages_it_implies() -> None:
    """Megatron-Bridge configs carry the layout and the virtual stages it implies; Megatron-LM takes one of the two:
    a consistent pair is read with a note, an inconsistent one names the flag."""
    dsv3 = load_model("examples/models/deepseek-v3.json")
    flags = (
        '--pipeline-model-parallel-size 8 --pipeline-model-parallel-layout "Et|(tt|)*30mL" --mtp-num-layers 1 '
        "--expert-model-parallel-size 8 "
    )
    run = parse_megatron_args(flags + "--num-virtual-stages-per-pipeline-rank 4").resolve(dsv3)
    assert run.layout.virtual_stages == 4 and any("implies it" in note for note in run.notes)
    with pytest.raises(ConfigError) as error:
        parse_megatron_args(flags + "--num-virtual-stages-per-pipeline-rank 2").resolve(dsv3)
    assert error.value.field == "--num-virtual-stages-per-pipeline-rank" and "give 4" in error.value.rule
    with pytest.raises(ConfigError, match="at most one"):
        parse_megatron_args(flags + "--num-layers-per-virtual-pipeline-stage 2").resolve(dsv3)
