"""Start-up loads only what a command uses (issue #16, issue #38 item 4): a simulation needs neither pandas,
matplotlib, networkx, dask, yaml nor tqdm, and ``moesim run`` loads none of the other commands (compare, validate,
sweep / search, bench, reproduce), the process pools or the Megatron-argument reader. Each check looks at
``sys.modules`` in a fresh interpreter, not at a clock."""

import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "networkx", "dask", "yaml", "tqdm")
# What `moesim run --json` does not use: numpy (only skewed routing and a GPU speed spread draw numbers), the process
# pools and subprocesses, and the modules of the other commands and flags.
NOT_RUN = (
    *HEAVY,
    "numpy",
    "multiprocessing",
    "concurrent.futures",
    "subprocess",
    "experiments.paper.targets",
    "experiments.search",
    "experiments.validation",
    "experiments.paper.reproduce",
    "experiments.cli.sweep_cli",
    "experiments.cli.bench",
    "experiments.cli.plots_run",
    "experiments.common.parallel",
    "experiments.common.stage_costs",
    "workloads.inputs.megatron",
    "workloads.inputs.megatron_args",
    "simulator.report.balance",
    "simulator.outputs",
)


def loaded_after(code: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` are in sys.modules after running ``code`` in a fresh interpreter."""
    check = f"{code}\nimport sys\nprint(','.join(m for m in {names!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    return [name for name in out.strip().rpartition("\n")[2].split(",") if name]


def test_a_simulation_leaves_heavy_modules_out():
    assert loaded_after("from simulator import simulate", HEAVY) == []


def test_moesim_run_imports_only_what_it_uses():
    code = (
        "import contextlib, io\n"
        "from experiments.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['run', '--gpus', '1440', '--json']) == 0"
    )
    assert loaded_after(code, NOT_RUN) == []


def test_the_check_sees_a_command_that_loads_them():
    """The same check on `moesim compare --help` (which builds compare's parser) finds compare: it can fail."""
    code = (
        "import contextlib, io\n"
        "from experiments.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['compare', '--help']) == 0"
    )
    assert "experiments.search" in loaded_after(code, NOT_RUN)


def test_importing_a_cost_model_leaves_the_engine_out():
    """``simulator``'s package loads ``simulate`` on first use (PEP 562), not when a sub-module is imported."""
    loaded = loaded_after(
        "import simulator.costs.calibration", ("simulator.report.simulate", "simulator.engine.engine")
    )
    assert loaded == []


def test_simulate_and_report_still_import_from_the_package():
    from simulator import Report, simulate
    from simulator.report.simulate import Report as report_class
    from simulator.report.simulate import simulate as simulate_function

    assert (simulate, Report) == (simulate_function, report_class)


def test_the_lazily_built_loader_reads_yaml_1_2_floats():
    from workloads.inputs.yaml_files import parse_yaml

    assert parse_yaml("cluster", "nic_Bps: 50e9\nlatency_s: 1e-6\n") == {"nic_Bps": 50e9, "latency_s": 1e-6}
