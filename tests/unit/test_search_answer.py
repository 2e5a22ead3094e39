"""``moesim search`` answers in the user's framework (issue 41 item 1) and refuses before work (issue 42 item 5):
the space's size by formula, progress lines for a log, ties within the error band, the winner as Megatron-LM
arguments, a layout file and a ``moesim run`` line (experiments/search/answer.py, space_size.py)."""

from __future__ import annotations

import json
import re
import shlex
import sys

import pytest
import yaml

import experiments.search.search as search_module
from experiments.cli.main import main
from experiments.common.error_band import ErrorBand
from experiments.common.progress import Lines
from experiments.search.answer import compact_yaml, job_flags, needs_megascale, ties, ties_note
from experiments.search.search import DEFAULT_MAX_POINTS, job_of
from experiments.search.space import SearchSpace, _divides, _grid
from experiments.search.space_size import space_size
from workloads.inputs.yaml_files import layout_from_dict, load_layout, load_model
from workloads.schedules.registry import block_count
from workloads.specs.layouts import LayoutSpec, layout_preset


def _enumerated(model: str, gpus: int, space: SearchSpace, batch: int = 720) -> int:
    """The layouts search() would memory-check, by building each (what the formula must equal)."""
    spec, job = load_model(model), job_of("h800", gpus, batch, 8192)
    return sum(
        1
        for p in _grid(spec, job, space)
        if space.keeps(p)
        and _divides(p, job)
        and (
            space.uneven_pp
            or spec.num_layers % block_count(str(p["schedule"]), int(p["pp"]), int(p["virtual_stages"])) == 0
        )
    )


@pytest.mark.parametrize(
    ("model", "gpus", "space"),
    [
        ("deepseek-v3", 512, SearchSpace.megatron()),
        ("deepseek-v3", 512, SearchSpace.wide()),
        ("mixtral-8x7b", 64, SearchSpace.megatron(4, ("core_attn",))),
        ("mixtral-8x7b", 16, SearchSpace.narrow()),
        ("mixtral-8x7b", 24, SearchSpace.wide().fix(["micro_batch=1", "schedule=dualpipev", "attention=sp"])),
        ("paper-352b", 240, SearchSpace.wide().fix(["cp=2", "ep=16"])),
    ],
)
def test_the_formula_counts_what_is_enumerated(model: str, gpus: int, space: SearchSpace) -> None:
    spec = load_model(model)
    assert space_size(spec, job_of("h800", gpus, 720, 8192), space) == _enumerated(model, gpus, space)


def test_the_default_searches_fit_their_limit() -> None:
    """Issue 42 item 5: the default (Megatron-Core) search of DeepSeek-V3 on 512, Mixtral-8x7B on 64 and
    Qwen3-235B-A22B on 256 GPUs, each token dispatcher a point, is not refused by its own --max-points;
    MegaScale-MoE's space for the 352B model on 1,440 GPUs is, before any work."""
    for model, gpus in (("deepseek-v3", 512), ("mixtral-8x7b", 64), ("qwen3-235b-a22b", 256)):
        assert (
            space_size(load_model(model), job_of("h800", gpus, 720, 8192), SearchSpace.megatron()) <= DEFAULT_MAX_POINTS
        )
    assert (
        space_size(load_model("paper-352b"), job_of("h800", 1440, 720, 8192), SearchSpace.wide()) > DEFAULT_MAX_POINTS
    )


def test_the_help_states_the_max_points_default(capsys) -> None:
    assert main(["search", "--help"]) == 0
    assert f"counted by formula (default {DEFAULT_MAX_POINTS:,})" in " ".join(capsys.readouterr().out.split())


def test_max_points_refuses_before_any_layout_is_built(monkeypatch, capsys) -> None:
    def no_work(*args, **kwargs):
        raise AssertionError("layouts were built before the refusal")

    monkeypatch.setattr(search_module, "layouts", no_work)
    argv = ["search", "--model", "paper-352b", "--gpus", "1440", "--space", "megascale", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the space holds 22,090 layouts" in err[0] and "--max-points 8,000" in err[0]
    assert main(["search", "--model", "mixtral-8x7b", "--gpus", "64", "--max-points", "100", "--quiet"]) == 2
    assert "holds 4,703 layouts (by formula, before any is built), over --max-points 100" in capsys.readouterr().err


def test_progress_lines_say_done_best_and_eta(monkeypatch) -> None:
    """On a log (stderr not a terminal): a line per interval with done / total, the best so far and an ETA."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    now = [0.0]
    said: list[str] = []
    lines = Lines(10, "search: simulated", said.append, interval_s=10, clock=lambda: now[0])
    for second in (4, 8, 12, 16, 30):
        now[0] = second
        lines.update("1.000 s per step")
    assert said == [
        "search: simulated: 3/10 done, best so far 1.000 s per step, ETA 28 s",
        "search: simulated: 5/10 done, best so far 1.000 s per step, ETA 30 s",
    ]
    quiet = Lines(10, "x", said.append, quiet=True, clock=lambda: now[0])
    now[0] = 100
    quiet.update()
    assert len(said) == 2


def test_ties_are_rows_within_the_error_band() -> None:
    """Row 2 (2% slower) overlaps the fastest's likely range (-5%..+5%); row 3 (20% slower) does not; a row
    without a band ties nothing."""
    rows = [{"step_time_s": "1.0"}, {"step_time_s": "1.02"}, {"step_time_s": "1.2"}, {"step_time_s": "1.01"}]
    band = ErrorBand(-0.05, 0.05, 9, ("moe",))
    marks = ties(rows, [band, band, band, None])
    assert marks == [False, True, False, False]
    assert "rows 2 may be as fast" in ties_note(marks, [band])
    assert ties(rows, [None] * 4) == [False] * 4 and "no validated run" in ties_note([False] * 4, [None])


def test_megascale_features_are_named() -> None:
    assert needs_megascale(layout_preset("megascale-moe")) == "ulysses,sar,fused"
    assert needs_megascale(layout_preset("megatron-lm")) == ""


def test_the_layout_file_holds_the_layout() -> None:
    layout = layout_preset("megatron-lm").with_(name="searched", pp=4, recompute_modules=(), ep=16, ffn="ep")
    text = compact_yaml(layout, ["a comment"])
    assert text.startswith("# a comment\n") and "base:" not in text
    assert layout_from_dict(yaml.safe_load(text)) == layout
    assert len(text.splitlines()) < len(yaml.safe_dump(vars(LayoutSpec("x"))).splitlines())


def test_job_flags_drop_what_the_search_sets() -> None:
    job = "torchrun pretrain_gpt.py --bf16 --tensor-model-parallel-size 4 --sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --seq-length 4096 --tp-comm-overlap --moe-grouped-gemm"
    assert job_flags(job, ("--tp-comm-overlap",)) == "--bf16 --moe-grouped-gemm"


def test_the_default_search_answers_in_megatron_words(capsys) -> None:
    """The default space is Megatron-Core's: TP attention, no SAR or fused kernels; the winner comes back as
    Megatron-LM arguments, a layout file and a ``moesim run`` line that simulates the step time ranked first."""
    argv = ["search", "--model", "mixtral-8x7b", "--gpus", "16", "--global-batch", "16", "--seq-len", "2048"]
    fixed = ["--fix", "pp=2", "--fix", "cp=1", "--fix", "micro_batch=1", "--fix", "ep=8"]  # the winner's EP: 45 points
    assert main([*argv, *fixed, "--top", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    ranked = [line.split() for line in out.splitlines() if line.split() and line.split()[0] in ("1", "2", "3")]
    assert ranked and all(row[1] == "tp" and "sar" not in row for row in ranked)
    line = re.search(r"fastest, as Megatron-LM arguments: (.*)", out).group(1)
    assert line.startswith("--moe-grouped-gemm") and "--global-batch-size 16 --seq-length 2048" in line
    assert line.count("--moe-token-dispatcher-type") == 1  # the row's, in place of the job's alltoall
    layout_text = out.split("fastest, as a moesim layout file (--write-layout FILE writes it):\n")[1]
    layout_text = layout_text.split("fastest, simulated again: ")[0]
    layout = layout_from_dict(yaml.safe_load(layout_text.replace("\n  ", "\n")))
    assert needs_megascale(layout) == ""
    command = out.split("fastest, simulated again: ")[1].strip()
    assert command.startswith("moesim run --model mixtral-8x7b --cluster h800 --gpus 16 --megatron-args ")
    assert main([*shlex.split(command)[1:], "--json"]) == 0
    step_s = float(re.search(r"\s(\d+\.\d{3})\s", " ".join(ranked[0])).group(1))  # step s: 3 decimals
    tokens_per_s = float(re.search(r"\s([\d,]{5,})\s", " ".join(ranked[0])).group(1).replace(",", ""))
    again = json.loads(capsys.readouterr().out)
    assert again["step_time_s"] == pytest.approx(step_s, abs=5e-4)
    # to the printed token: the arguments set every field the row simulated (the weight gathers aligned under
    # interleaving only, as Megatron-LM aligns them, is one such)
    assert again["tokens_per_s"] == pytest.approx(tokens_per_s, abs=0.5)


def test_each_tp_simulates_the_vocabulary_megatron_pads(tmp_path) -> None:
    """Megatron pads the vocabulary to a multiple of 128 x TP (DeepSeek-V3's 129,280 stays at TP 1, is 129,536 at
    TP 4), overlaps TP's backward collectives with TP > 1 and runs EP dropless: a search point simulates the job built at its TP, so
    that the printed line runs to the ranked step time."""
    from experiments.search.answer import default_job
    from experiments.search.megatron import write_base

    base = write_base(default_job(load_model("deepseek-v3")), "deepseek-v3", 512, tmp_path, 720, 8192, (1, 4))
    assert load_model(base.by_tp[1, "ep"][0]).vocab_size == 129_280
    assert load_model(base.by_tp[4, "ep"][0]).vocab_size == 129_536
    assert (
        load_layout(base.by_tp[4, "ep"][1]).tp_async_backward
        and not load_layout(base.by_tp[1, "ep"][1]).tp_async_backward
    )
    assert load_layout(base.by_tp[4, "ep"][1]).dropless and not load_layout(base.by_tp[4, "tp"][1]).dropless


def test_a_dense_model_searches_and_runs_back(capsys) -> None:
    """A dense model's default job has no MoE flags and its points split the FFN with attention (Megatron resolves
    TP 1 as EP 1, dropless, which a TP-FFN point would break); the printed run line simulates the first row."""
    argv = ["search", "--model", "examples/models/llama-3.1-8b.json", "--cluster", "h100", "--gpus", "8"]
    argv += ["--global-batch", "16", "--seq-len", "4096", "--fix", "cp=1", "--fix", "micro_batch=1", "--fix", "pp=1"]
    assert main([*argv, "--top", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    line = re.search(r"fastest, as Megatron-LM arguments: (.*)", out).group(1)
    assert "--moe-" not in line
    step_s = float(re.search(r"\s(\d+\.\d{3})\s", out.splitlines()[3]).group(1))
    assert main([*shlex.split(out.split("fastest, simulated again: ")[1].strip())[1:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == pytest.approx(step_s, abs=5e-4)
