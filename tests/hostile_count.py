"""Count the hostile inputs of issue #13 and the fuzzers' examples: how many were tried, how many refused
cleanly (one ``moesim: error:`` line with exit 2, or one ConfigError), and the slowest refusal's time and
peak memory. A script, not a test (pytest collects only test_*.py):

    PYTHONPATH=. python tests/hostile_count.py            # hostile inputs, then the fuzzers (about 2 min)
    PYTHONPATH=. python tests/hostile_count.py --no-fuzz  # hostile inputs only
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.cli.main import main
from simulator.engine.faults import Faults
from simulator.report.simulate import simulate
from topologies.errors import ConfigError


def hostile_files(folder: Path) -> dict[str, str]:
    """The files the hostile inputs name: bombs, a link to /dev/zero, a 2 MB YAML, a 10^7-point sweep."""
    files = {
        "bomb.yaml": "\n".join(
            ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
            + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
        ),
        "many-keys.yaml": "".join(f"k{i}: {i}\n" for i in range(200_000)),
        "duplicate.yaml": "base: megascale-moe\npp: 4\npp: 8\n",
        "grid.yaml": "model: paper-352b\nlayout: megascale-moe\ngpus: [240, 480, 720, 960, 1440]\n"
        + "".join(f"f{i}: [{', '.join(str(v) for v in range(10))}]\n" for i in range(7))
        + "output: grid.csv\n",
        "dup-points.yaml": "model: paper-352b\nlayout: megascale-moe\ngpus: [240, 240]\noutput: d.csv\n",
        "sweep.yaml": "model: paper-352b\nlayout: megascale-moe\ngpus: 240\nglobal_batch: 30\noutput: s.csv\n",
        "existing.csv": "",
    }
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "zero.yaml").symlink_to("/dev/zero")
    (folder / "dir.json").mkdir()
    return files


def hostile_argvs(folder: Path) -> list[list[str]]:
    """Command lines of the hostile run's failures (issue #13), each now refused in one line or run."""
    f = lambda name: str(folder / name)
    small = ["--global-batch", "30"]
    return [
        ["run", *small, "--trace", "/proc/none/t.json"],
        ["run", *small, "--trace", f("dir.json")],
        ["run", *small, "--trace", "/dev/full"],
        ["run", *small, "--plot", "p.txt"],
        ["run", *small, "--plot", f("dir.json")],
        ["reproduce", "skew", "--out", "/proc/none"],
        ["reproduce", "skew", "--out", f("existing.csv")],
        ["compare", "--out", "/proc/none/c.csv"],
        ["search", "--gpus", "240", "--out", "/proc/none/s.csv"],
        ["search", "--gpus", "240", "--out", str(folder)],
        ["run", "--set", "capacity_factor=1e308", "--allow-oom"],
        ["run", "--degrade", "nvlink:9:1e200", "--degrade", "nvlink:9:1e200"],
        ["run", "--fail-link", "nic:18", "--degrade", "nic:18:1e308"],
        ["run", "--straggler", "17:1e308"],
        ["run", "--degrade", "nvlink:9:1e308"],
        ["run", "--global-batch", "7200000"],
        ["run", "--global-batch", "7200", "--trace", f("t.json")],
        ["run", "--model", f("bomb.yaml")],
        ["run", "--layout", f("bomb.yaml")],
        ["run", "--model", f("zero.yaml")],
        ["run", "--model", f("many-keys.yaml")],
        ["run", "--layout", f("duplicate.yaml")],
        ["sweep", f("grid.yaml")],
        ["sweep", f("bomb.yaml")],
        ["sweep", f("sweep.yaml"), "--scheduler", "bogus"],
        ["sweep", f("sweep.yaml"), "--jobs", "-5"],
        ["run", "--cluster", ""],
        ["run", "--model", ""],
        ["run", "--routing", "uniform", "--zipf", "2"],
        ["run", "--micro-batch", "2", "--set", "micro_batch=4"],
        ["run", "--trace-micro-batches", "-3"],
        ["run", "--trace-stages", "-1", "--trace", f("t.json")],
        ["run", "--trace", ""],
        ["search", "--gpus", "240", "--global-batch", "0"],
        ["search", "--gpus", "240", "--top", "-1"],
        ["compare", "--gpus", ""],
        ["compare", "--layouts", ""],
        ["run", "--gpus", "1.5"],
        ["run", "--gpus", "nan"],
        ["run", "--routing", "foo"],
        ["run", "--megatron-args=--bf16 --foo"],
        ["run", "--model", str(ROOT / "examples/models/mixtral-8x7b.json"), "--gpus", "7"],
        ["run", "--cluster", str(ROOT / "examples/clusters"), "--gpus", "8"],
    ]


API_CALLS: list[tuple[str, Callable[[], object]]] = [
    ("faults='17:1.2'", lambda: simulate("paper-352b", "megascale-moe", 240, faults="17:1.2")),
    ("cluster={'gpu': 'h800'}", lambda: simulate("paper-352b", "megascale-moe", 240, cluster={"gpu": "h800"})),
    ("calibration=None", lambda: simulate("paper-352b", "megascale-moe", 240, calibration=None)),
    ("Faults(stragglers=[(17,)])", lambda: Faults(stragglers=[(17,)])),
    ("Faults.parse(None)", lambda: Faults.parse(None)),
    ("allow_oom='no'", lambda: simulate("paper-352b", "megascale-moe", 240, allow_oom="no")),
    ("memoize='no'", lambda: simulate("paper-352b", "megascale-moe", 240, memoize="no")),
    ("gpus=np.int64(240), batch 30", lambda: simulate("paper-352b", "megascale-moe", np.int64(240), global_batch=30)),
]


class Tally:
    """Inputs tried, refused cleanly, accepted, and the slowest refusal with its peak traced memory."""

    def __init__(self) -> None:
        self.tried = self.refused = self.accepted = 0
        self.failures: list[str] = []
        self.slowest: tuple[float, str] = (0.0, "")

    def refusal(self, label: str, seconds: float) -> None:
        self.refused += 1
        self.slowest = max(self.slowest, (seconds, label))


def run_cli(argv: list[str]) -> tuple[int, list[str]]:
    """Exit status and stderr lines of one in-process ``moesim`` call."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    return status, err.getvalue().strip().splitlines()


def hostile(tally: Tally, folder: Path) -> None:
    """Every hostile command line and API call: a clean refusal, a run, or a failure (listed)."""
    for argv in hostile_argvs(folder):
        tally.tried += 1
        start = time.perf_counter()
        status, err = run_cli(argv)
        seconds = time.perf_counter() - start
        if status == 2 and len(err) == 1 and err[0].startswith("moesim: error: "):
            tally.refusal("moesim " + " ".join(argv), seconds)
        elif status == 0:
            tally.accepted += 1
        else:
            tally.failures.append(f"{argv}: status {status}, {err[-3:]}")
    for label, call in API_CALLS:
        tally.tried += 1
        start = time.perf_counter()
        try:
            call()
        except ConfigError as error:
            if "\n" in str(error):
                tally.failures.append(f"{label}: several lines")
            tally.refusal(label, time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 (what the count is for)
            tally.failures.append(f"{label}: {type(error).__name__}: {error}")
        else:
            tally.accepted += 1


def peak_mib(argv: list[str]) -> float:
    """Peak traced Python memory of one CLI call, MiB."""
    tracemalloc.start()
    run_cli(argv)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def peak_rss_mib(argv: list[str]) -> float:
    """Peak resident memory of the call run alone in a fresh process, MiB (Linux reports KiB)."""
    import resource
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "experiments.cli.main", *argv], env=env, capture_output=True, check=False)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def fuzz(tally: Tally) -> None:
    """The hypothesis fuzzers of tests/properties/test_fuzz_config.py, timing each refusal they see."""
    import pytest

    import tests.properties.test_fuzz_config as fuzzers

    outcome, cli_outcome = fuzzers.outcome, fuzzers.cli_outcome
    slowest = tally.slowest

    def timed(call, label):
        start = time.perf_counter()
        before = fuzzers.TRIED.copy()
        call()
        seconds = time.perf_counter() - start
        if any(key.endswith(":error") and fuzzers.TRIED[key] > before[key] for key in fuzzers.TRIED):
            nonlocal slowest
            slowest = max(slowest, (seconds, label))

    fuzzers.outcome = lambda target, build: timed(lambda: outcome(target, build), f"fuzz {target}")
    fuzzers.cli_outcome = lambda target, capsys, argv: timed(
        lambda: cli_outcome(target, capsys, argv), "moesim " + " ".join(argv)
    )
    status = pytest.main(
        [str(ROOT / "tests/properties/test_fuzz_config.py"), "-q", "-p", "no:cacheprovider", "-x", "-n", "0"]
    )
    tried = sum(v for k, v in fuzzers.TRIED.items() if ":" not in k)
    errors = sum(v for k, v in fuzzers.TRIED.items() if k.endswith(":error"))
    tally.tried += tried
    tally.refused += errors
    tally.accepted += tried - errors
    tally.slowest = slowest
    if status != 0:
        tally.failures.append(f"fuzzers: pytest exit {status}")


def main_count() -> int:
    tally = Tally()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        hostile_files(folder)
        cwd = os.getcwd()
        os.chdir(folder)  # relative outputs (p.txt, sweep CSVs) land here
        try:
            hostile(tally, folder)
            print(f"hostile inputs: {tally.tried} tried, {tally.refused} refused cleanly, {tally.accepted} ran")
            if "--no-fuzz" not in sys.argv:
                fuzz(tally)
            seconds, label = tally.slowest
            argv = label.split(" ")[1:] if label.startswith("moesim ") else None
            memory = f", {peak_mib(argv):.1f} MiB traced, {peak_rss_mib(argv):.0f} MiB peak RSS alone" if argv else ""
        finally:
            os.chdir(cwd)
    print(f"total: {tally.tried} inputs tried, {tally.refused} refused cleanly, {tally.accepted} accepted")
    print(f"slowest refusal: {seconds:.2f} s{memory}: {label[:200]}")
    for failure in tally.failures:
        print("NOT CLEAN:", failure)
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main_count())
