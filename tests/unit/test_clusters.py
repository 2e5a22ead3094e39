"""Clusters as data: presets that pack a job into NVLink domains, strict cluster YAML files, --nic-gbps."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from experiments.cli.main import main
from simulator.report.clusters import cluster_from_dict, gpu_from_dict, load_cluster
from simulator.report.simulate import simulate
from topologies.cluster import ClusterSpec, cluster_preset
from topologies.errors import ConfigError
from topologies.hardware import GPU_PRESETS, GpuSpec, gpu_preset
from workloads.specs.layouts import layout_preset

SMALL_RUN = ["--model", "mixtral-8x7b", "--global-batch", "16", "--seq-len", "1024", "--json"]


@pytest.mark.parametrize(
    ("gpus", "per_node", "nodes"),
    [(4, 4, 1), (8, 8, 1), (64, 64, 1), (128, 64, 2), (256, 64, 4)],
)
def test_gb200_packs_jobs_into_64_of_72(gpus: int, per_node: int, nodes: int) -> None:
    """A job smaller than the 64 GPUs used per rack gets one domain of its size; larger ones whole domains of 64."""
    cluster = cluster_preset("gb200", gpus)
    assert (cluster.domain_gpus, cluster.host_gpus, cluster.used_domain_gpus) == (72, 4, 64)
    assert (cluster.gpus_per_node, cluster.num_nodes) == (per_node, nodes)


def test_gb200_nvl72_uses_the_whole_rack() -> None:
    assert (cluster_preset("gb200-nvl72", 144).gpus_per_node, cluster_preset("gb200-nvl72", 144).num_nodes) == (72, 2)


@pytest.mark.parametrize(
    ("name", "gpus", "message"),
    [
        ("gb200", 100, "gpus: 100 must be a multiple of the 64 GPUs a job uses per domain; try 64 or 128"),
        ("gb200", 6, "gpus: 6 must be whole hosts of 4 GPUs"),
        (
            "gb200-nvl72",
            64 * 3,
            (
                "gpus: 192 must be a multiple of the 72 GPUs a job uses per domain; try 144 or 216 (or the gb200 / "
                "gb300 presets, whose jobs take 64 GPUs of each 72-GPU rack)"
            ),
        ),
        ("b200", 12, "gpus: 12 must be a multiple of the 8 GPUs a job uses per domain; try 8 or 16"),
    ],
)
def test_jobs_that_do_not_pack_name_gpus(name: str, gpus: int, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        cluster_preset(name, gpus)
    assert str(error.value) == message


def test_b200_and_h200_presets() -> None:
    """DGX datasheets per GPU: B200 72 PF FP8 sparse / 8 / 2, 1,440 GB / 8, its HBM the device's 7,680-bit bus at 3,996
    MHz (pytorch/ao PR #4002; the datasheet's 64 TB/s / 8 would be 8); H200 141 GB at 4.8 TB/s."""
    b200, h200 = gpu_preset("b200"), gpu_preset("h200")
    assert (b200.peak_fp8_flops, b200.peak_bf16_flops) == (72e15 / 8 / 2, 2.25e15)
    assert (b200.hbm_bytes, b200.hbm_bandwidth_Bps, b200.sm_count) == (1440e9 / 8, 7680 / 8 * 3996e6 * 2, 148)
    assert (h200.peak_bf16_flops, h200.hbm_bytes, h200.hbm_bandwidth_Bps) == (989e12, 141e9, 4.8e12)
    assert cluster_preset("b200", 16).gpus_per_node == cluster_preset("h200", 16).gpus_per_node == 8


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return str(path)


def test_yaml_cluster_with_base_and_gpu_preset(tmp_path: Path) -> None:
    """base: a preset, gpu: a GPU preset, SI numbers as people write them (100e9)."""
    path = write(tmp_path, "base: gb200\ngpu: b200\ndomain_gpus_used: 32\nnic_bandwidth_Bps: 100e9\n")
    cluster = load_cluster(path, 64)
    assert cluster == ClusterSpec(
        GPU_PRESETS["b200"], 64, domain_gpus=72, gpus_per_host=4, domain_gpus_used=32, nic_bandwidth_Bps=100e9
    )
    assert (cluster.gpus_per_node, cluster.num_nodes) == (32, 2)


def test_yaml_cluster_with_full_gpu_mapping() -> None:
    """Every GpuSpec field given (here the H100's, renamed): the preset's cluster with that GPU."""
    gpu = {**asdict(GPU_PRESETS["h100"]), "name": "my-h100"}
    cluster = cluster_from_dict({"gpu": gpu, "domain_gpus": 8}, 16)
    assert cluster == cluster_preset("h100", 16, gpu=GpuSpec(**gpu))
    assert gpu_from_dict({"base": "h100", "hbm_bytes": 141e9}).hbm_bytes == 141e9


def test_yaml_cluster_loads_and_simulates(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A file equal to the h800 preset simulates to the same numbers as the preset, from Python and the CLI."""
    path = write(tmp_path, "gpu: h800\ndomain_gpus: 8\nnic_bandwidth_Bps: 50e9\n")
    layout = layout_preset("megascale-moe").with_(pp=2)
    from_file = simulate("mixtral-8x7b", layout, 16, cluster=path, global_batch=16, seq_len=1024)
    preset = simulate("mixtral-8x7b", layout, 16, cluster="h800", global_batch=16, seq_len=1024)
    assert from_file.step_time_s == preset.step_time_s
    assert (
        main(["run", "--cluster", path, "--gpus", "16", "--layout", "megascale-moe", "--set", "pp=2", *SMALL_RUN]) == 0
    )
    assert json.loads(capsys.readouterr().out)["step_time_s"] > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu: h100\nnic_gbps: 50\n", "cluster.nic_gbps: unknown key"),
        ("gpu: h100\ndomain_gpus: eight\n", "cluster.domain_gpus: must be an integer, got 'eight'"),
        ("gpu: h100\nnic_bandwidth_Bps: -1.0\n", "cluster.nic_bandwidth_Bps: must be a finite number > 0"),
        ("domain_gpus: 8\n", "cluster.gpu: missing required key"),
        ("gpu: h1000\n", "cluster.gpu: unknown preset 'h1000'"),
        ("gpu: {name: x, peak_bf16_flops: 1e15}\n", "cluster.gpu.hbm_bandwidth_Bps: missing required key"),
        ("gpu: {base: h100, hbm_gb: 141}\n", "cluster.gpu.hbm_gb: unknown key"),
        ("gpu: {base: h100, sm_count: 0}\n", "cluster.gpu.sm_count: must be > 0"),
        ("base: tpu\n", "cluster.base: unknown preset 'tpu'"),
        ("base: gb200\ndomain_gpus_used: 66\n", "cluster.domain_gpus_used: 66 must be whole hosts of 4 GPUs"),
        ("base: gb200\nnum_gpus: 64\n", "cluster.num_gpus: a cluster file describes hardware"),
        ("[1, 2]\n", "cluster: "),
    ],
)
def test_bad_cluster_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, text: str, message: str) -> None:
    """Each bad file is one line on stderr naming the key, exit status 2."""
    assert main(["run", "--cluster", write(tmp_path, text), "--gpus", "64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"moesim: error: {message}") and err.count("\n") == 1, err


@pytest.mark.parametrize(("gpus", "pp"), [(8, 1), (64, 4), (256, 4)])
def test_cli_runs_on_gb200(gpus: int, pp: int, capsys: pytest.CaptureFixture) -> None:
    """8, 64 and 256 GPUs run on gb200: one domain of 8, one of 64, four of 64."""
    assert main(["run", "--cluster", "gb200", "--gpus", str(gpus), "--set", f"pp={pp}", *SMALL_RUN]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gpus"] == gpus and report["tokens_per_s_per_gpu"] == report["tokens_per_s"] / gpus


def test_nic_gbps_changes_a_multi_node_step(capsys: pytest.CaptureFixture) -> None:
    """16 GPUs = 2 nodes with PP 2: the PP sends and DP sync cross the NIC, so a 2x slower NIC is slower."""
    times = {}
    for gbps in ("100", "25"):
        argv = ["run", "--gpus", "16", "--set", "pp=2", "--nic-gbps", gbps, *SMALL_RUN]
        assert main(argv) == 0
        times[gbps] = json.loads(capsys.readouterr().out)["step_time_s"]
    assert times["25"] > times["100"]
    assert main(["run", "--gpus", "16", "--nic-gbps", "0"]) == 2
    assert capsys.readouterr().err.startswith("moesim: error: nic_gbps:")
