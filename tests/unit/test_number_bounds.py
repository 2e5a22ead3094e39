"""Bounds on numbers (issue 42): hardware and cluster values within the physical bounds of topologies/bounds.py,
0 and negatives refused at input by every command, bubble fractions never below 0, --trace-stages /
--trace-micro-batches checked against the run and --fix values against the search space."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.search.space import SearchSpace
from simulator.report.bubbles import ROUND_OFF, imbalance_idle, schedule_bubble
from simulator.report.clusters import load_cluster
from topologies.bounds import BOUNDS, QUANTITIES, check_physical
from topologies.cluster import CLUSTER_PRESETS, ClusterSpec, cluster_preset
from topologies.errors import ConfigError
from topologies.hardware import GPU_PRESETS
from workloads.schedules.registry import make_schedule

GPU_FIELDS = ("peak_bf16_flops", "peak_fp8_flops", "hbm_bytes", "hbm_bandwidth_Bps", "nvlink_bandwidth_Bps")
CLUSTER_FIELDS = ("nic_bandwidth_Bps", "nic_efficiency", "nic_latency_s", "leaf_oversubscription")


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moesim: error: "), err
    return err[0]


def test_every_preset_is_within_the_bounds() -> None:
    for gpu in GPU_PRESETS.values():
        for name in (*GPU_FIELDS, "sm_count", "nvlink_latency_s"):
            check_physical(name, name, getattr(gpu, name))
    for name in CLUSTER_PRESETS:
        cluster = cluster_preset(name, 64)
        for field in CLUSTER_FIELDS:
            check_physical(field, field, getattr(cluster, field))


def test_every_bound_states_why_and_every_quantity_has_one() -> None:
    assert {quantity for quantity, _, _ in QUANTITIES.values()} == set(BOUNDS)
    for bound in BOUNDS.values():
        assert 0 < bound.low < bound.high and len(bound.why) > 20


@pytest.mark.parametrize("field", GPU_FIELDS)
def test_gpu_values_at_the_bounds_pass_and_beyond_them_are_refused(field: str) -> None:
    bound = BOUNDS[QUANTITIES[field][0]]
    gpu = GPU_PRESETS["h100"]
    for value in (bound.low, bound.high):
        assert getattr(replace(gpu, **{field: value}), field) == value
    for value in (bound.low / 2, bound.high * 2, 1e-300, 0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match=rf"^{field}: "):
            replace(gpu, **{field: value})


@pytest.mark.parametrize("field", CLUSTER_FIELDS)
def test_cluster_values_beyond_the_bounds_are_refused(field: str) -> None:
    bound = BOUNDS[QUANTITIES[field][0]]
    cluster = cluster_preset("h800", 16)
    for value in (bound.low, bound.high):
        assert getattr(cluster.with_(**{field: value}), field) == value
    for value in (bound.low / 2, bound.high * 2, 0.0, -1.0):
        with pytest.raises(ConfigError, match=rf"^{field}: "):
            cluster.with_(**{field: value})


def test_gpu_counts_and_sm_counts_are_bounded() -> None:
    with pytest.raises(ConfigError, match=r"^gpus: 2,000,000 is outside the physical bound \[1, 1,000,000\] GPUs"):
        ClusterSpec(gpu=GPU_PRESETS["h100"], num_gpus=2_000_000)
    with pytest.raises(ConfigError, match=r"^sm_count: "):
        replace(GPU_PRESETS["h100"], sm_count=100_000)


@pytest.mark.parametrize("field", ["peak_bf16_flops", "peak_fp8_flops", "hbm_bandwidth_Bps"])
def test_a_cluster_file_with_a_vanishing_number_is_one_line(field: str, tmp_path: Path) -> None:
    """1e-300 FLOP/s or B/s gave ``RuntimeError: closed task``; now the field and its bound."""
    path = tmp_path / "c.yaml"
    path.write_text(f"base: h800\ngpu:\n  base: h800\n  {field}: 1e-300\n")
    with pytest.raises(ConfigError, match=rf"^cluster\.gpu\.{field}: 1e-300 is outside the physical bound"):
        load_cluster(str(path), 16)


def test_run_nic_gbps_is_bounded_in_gb_per_s(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "--model", "mixtral-8x7b", "--gpus", "16"]
    message = _one_line_error([*base, "--nic-gbps", "1e-300"], capsys)
    assert "nic_gbps: 1e-300 is outside the physical bound [0.001, 1e+06] GB/s" in message


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--nic-gbps", "0,25"], "nic_gbps: must be a finite number > 0"),
        (["--nic-gbps", "-5"], "nic_gbps: must be a finite number > 0"),
        (["--scaleup", "0,8"], "scaleup: must be a finite number > 0"),
        (["--sweep", "nic_latency_s=0"], "nic_latency_s: must be a finite number > 0"),
        (["--sweep", "nic_efficiency=0.001"], "nic_efficiency: 0.001 is outside the physical bound"),
        (["--sweep", "seq_len=0,1024"], "seq_len: must be >= 1, got 0"),
    ],
)
def test_compare_refuses_zero_negative_and_unphysical_values_before_running(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "c.csv"
    argv = ["compare", "--model", "mixtral-8x7b", "--gpus", "16", *flags, "--out", str(out)]
    assert message in _one_line_error(argv, capsys)
    assert not out.exists()


def test_compare_refuses_zero_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--gpus 0 was a ZeroDivisionError traceback in the plot."""
    argv = ["compare", "--model", "mixtral-8x7b", "--gpus", "0,16", "--out", str(tmp_path / "c.csv")]
    assert "gpus: must be a finite number > 0" in _one_line_error(argv, capsys)


@pytest.mark.parametrize(
    "line", ["nic_gbps: [0, 25]", "nic_gbps: -1", "gpus: [0, 16]", "nic_gbps: 1e-300", "global_batch: [0, 16]"]
)
def test_a_sweep_refuses_zero_and_unphysical_values_before_running(
    line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"model: mixtral-8x7b\nlayout: megascale-moe\ngpus: 16\n{line}\noutput: s.csv\n")
    key = line.split(":")[0]
    assert f"sweep.{key}: " in _one_line_error(["sweep", str(sweep)], capsys)
    assert not (tmp_path / "s.csv").exists() or not list(csv.DictReader((tmp_path / "s.csv").open()))


@pytest.mark.parametrize(
    "cluster, message",
    [
        (
            "base: h800\nnic_bandwidth_Bps: 1.0e-300\n",
            "cluster.nic_bandwidth_Bps: 1e-300 is outside the physical bound",
        ),
        (
            "base: h800\ngpu: {base: h800, peak_bf16_flops: 0}\n",
            "cluster.gpu.peak_bf16_flops: must be a finite number > 0",
        ),
        (
            "base: h800\ngpu: {base: h800, hbm_bandwidth_Bps: 1.0e-300}\n",
            "cluster.gpu.hbm_bandwidth_Bps: 1e-300 is outside",
        ),
        (None, "cannot read"),  # a cluster file that is not there
    ],
)
def test_a_sweep_refuses_an_unphysical_cluster_file_before_running(
    cluster: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every point naming the cluster would be an error row (exit 0, issue 42): one line, exit 2, no table.
    The file is found beside the sweep file, like a model's or a layout's."""
    if cluster is not None:
        (tmp_path / "c.yaml").write_text(cluster)
    sweep = tmp_path / "s.yaml"
    sweep.write_text("model: mixtral-8x7b\ngpus: [16, 32]\ncluster: [h800, c.yaml]\noutput: s.csv\n")
    line = _one_line_error(["sweep", str(sweep)], capsys)
    assert line.startswith(f"moesim: error: sweep.cluster: {tmp_path / 'c.yaml'}: ") and message in line
    assert not (tmp_path / "s.csv").exists()


def test_a_sweep_keeps_a_gpu_count_the_cluster_cannot_pack_as_its_row(tmp_path: Path) -> None:
    """An error about the point's GPU count (12 GPUs on 8-GPU domains) is that point's row, not a refusal."""
    sweep = tmp_path / "s.yaml"
    sweep.write_text("model: mixtral-8x7b\ngpus: [12, 16]\nglobal_batch: 16\nseq_len: 1024\npp: 2\noutput: s.csv\n")
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    rows = {row["gpus"]: row["error"] for row in csv.DictReader((tmp_path / "s.csv").open())}
    assert rows["12"].startswith("gpus: 12 must be a multiple") and rows["16"] == ""


def test_imbalance_idle_is_exactly_zero_within_round_off_and_kept_beyond() -> None:
    assert imbalance_idle(0.1111111111111111, 0.11111111111111116) == 0.0  # was -5.6e-17
    assert imbalance_idle(0.3, 0.3 + ROUND_OFF / 2) == 0.0
    assert imbalance_idle(0.2, 0.1) == pytest.approx(0.1)
    assert imbalance_idle(0.1, 0.2) == pytest.approx(-0.1)  # stages idling less than the balanced replay: said


@pytest.mark.parametrize("name, micro_batches", [("1f1b", 1), ("1f1b", 7), ("zb1p", 5)])
def test_one_stage_has_no_schedule_bubble(name: str, micro_batches: int) -> None:
    schedule = make_schedule(name, 1, micro_batches)
    kinds = {task.direction for task in schedule.order(0)}
    assert schedule_bubble(schedule, {kind: 0.1 + 0.2 * (kind != "F") for kind in kinds}) == 0.0


TRACE = ["run", "--model", "deepseekmoe", "--gpus", "32", "--set", "pp=4", "--global-batch", "16", "--seq-len", "1024"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--trace-stages", "99"], "trace_stages: stage 99 is not a stage of this run (pp=4): give stages 0 to 3"),
        (["--trace-stages", "0,4"], "trace_stages: stage 4 is not a stage of this run"),
        (["--trace-micro-batches", "100"], "trace_micro_batches: 100 is more than this run's"),
    ],
)
def test_trace_selection_is_checked_against_the_run(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    assert message in _one_line_error([*TRACE, "--trace", str(trace), *flags], capsys)
    assert not trace.exists()


@pytest.mark.parametrize(
    "pair, message",
    [
        ("schedule=nosuch", "schedule='nosuch' is not in the search space; schedule takes 1f1b, dualpipe"),
        ("micro_batch=3", "micro_batch='3' is not in the search space; micro_batch takes 1, 2"),
        ("recompute=everything", "recompute takes full, none, sar, selective"),
        ("pp=0", "pp='0': pp is a positive integer"),
        ("ep=x", "ep='x': ep is a positive integer"),
    ],
)
def test_fix_values_outside_the_space_are_refused(pair: str, message: str) -> None:
    with pytest.raises(ConfigError, match="^fix: ") as error:
        SearchSpace.wide().fix([pair])
    assert message in str(error.value)


def test_fix_values_of_the_space_are_kept() -> None:
    space = SearchSpace.wide().fix(["schedule=DualPipe", "pp=4", "ep_overlap=true", "recompute=sar", "attention=sp"])
    assert space.fixed[0] == ("schedule", "DualPipe")
    with pytest.raises(ConfigError, match="schedule='zb1p' is not in the search space"):
        SearchSpace.narrow().fix(["schedule=zb1p"])  # the narrow grid has no ZB-1P
