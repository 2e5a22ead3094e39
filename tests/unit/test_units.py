"""topologies/units.py: bandwidths as users write them, and --nic-gbps reading them."""

from __future__ import annotations

import json

import pytest

from topologies.errors import ConfigError
from topologies.units import bandwidth_GBps


@pytest.mark.parametrize(
    ("text", "gb_per_s"),
    [
        ("400Gb/s", 50.0),  # a NIC datasheet: gigabits
        ("400Gbps", 50.0),
        ("400 Gb/s", 50.0),
        ("50GB/s", 50.0),  # gigabytes
        ("50 GBps", 50.0),
        ("3.2Tb/s", 400.0),
        ("900GB/s", 900.0),
        ("100MB/s", 0.1),
        ("50", 50.0),  # a bare number keeps today's meaning: GB/s
        (25, 25.0),
        ("1e2", 100.0),
    ],
)
def test_bandwidths(text: object, gb_per_s: float) -> None:
    assert bandwidth_GBps("nic_gbps", text)[0] == pytest.approx(gb_per_s)


def test_a_bare_number_that_looks_like_gigabits_is_warned_about() -> None:
    value, warning = bandwidth_GBps("nic_gbps", "400")
    assert value == 400.0 and "write 400Gb/s (50 GB/s)" in warning
    assert bandwidth_GBps("nic_gbps", "50")[1] == "" and bandwidth_GBps("nic_gbps", "400Gb/s")[1] == ""


@pytest.mark.parametrize("text", ["", "fast", "4x", "50 GiB/s", "nan", "inf", "-5GB/s", True, None, "50Gb"])
def test_anything_else_is_one_line_naming_the_field(text: object) -> None:
    with pytest.raises(ConfigError, match=r"^nic_gbps: must be a"):
        bandwidth_GBps("nic_gbps", text)


def test_a_bare_number_is_left_to_the_physical_bounds() -> None:
    assert bandwidth_GBps("nic_gbps", "-5") == (-5.0, "")  # refused by topologies/bounds.py, as every bandwidth


def test_run_reads_gigabits(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.cli.main import main

    steps = []
    for nic in ("400Gb/s", "50", "25GB/s"):
        assert main(["run", "--gpus", "240", "--global-batch", "60", "--nic-gbps", nic, "--json"]) == 0
        steps.append(json.loads(capsys.readouterr().out)["step_time_s"])
    assert steps[0] == steps[1] != steps[2]  # 400 Gb/s is 50 GB/s; the NIC rate matters here
    assert main(["run", "--nic-gbps", "4x"]) == 2
    assert "nic_gbps: must be a bandwidth" in capsys.readouterr().err


def test_compare_reads_the_same_units(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    from experiments.cli.main import main

    out = tmp_path / "c.csv"
    argv = ["compare", "--gpus", "240", "--global-batch", "30", "--nic-gbps", "200Gb/s,400", "--out", str(out)]
    assert main(argv) == 0
    assert sorted(pd.read_csv(out).nic_gbps) == [25.0, 400.0]  # GB/s in the table, whatever was written
    assert "nic_gbps 400 is read as 400 GB/s" in capsys.readouterr().err
