"""`import simulator` loads only what a simulation needs (issue #16: start-up): pandas, matplotlib, networkx,
dask and yaml are imported by the commands that use them."""

import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "networkx", "dask", "yaml")


def test_import_simulator_leaves_heavy_modules_out():
    code = f"import sys, simulator; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


def test_the_lazily_built_loader_reads_yaml_1_2_floats():
    from workloads.inputs.yaml_files import parse_yaml

    assert parse_yaml("cluster", "nic_Bps: 50e9\nlatency_s: 1e-6\n") == {"nic_Bps": 50e9, "latency_s": 1e-6}
