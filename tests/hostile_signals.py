"""Issue 42's hostile checks, each as the user would meet it (a shell, a full disk, a kill), against this checkout:
a table of input, exit status and what the command said. A script, not a test (pytest collects only test_*.py):

    python tests/hostile_signals.py        # about a minute; prints a Markdown table, exit 1 if a check failed

A check fails on a traceback, on more than one line on stderr, on an unexpected exit status, or on what it left
behind (a file under the final name, a temporary file or folder, a process alive 2 s after its parent's SIGKILL).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOESIM = [sys.executable, "-m", "experiments.cli.main"]
SMALL = ["--model", "mixtral-8x7b", "--gpus", "16", "--global-batch", "16", "--seq-len", "1024", "--set", "pp=2"]


def _env(folder: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(folder / "tmp")}


def _said(stderr: str) -> tuple[str, bool]:
    """The last line said, and whether what was said is at most one line without a traceback."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return (lines[-1] if lines else "(nothing)"), len(lines) <= 1 and "Traceback" not in stderr


def shell(folder: Path, command: str) -> tuple[int, str, bool]:
    """Run ``command`` in bash in ``folder`` ($M is moesim); the exit status of moesim (the pipeline's first)."""
    script = f"M='{' '.join(MOESIM)}'; {command}; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(
        ["bash", "-c", script], check=False, cwd=folder, env=_env(folder), capture_output=True, text=True
    )
    return (done.returncode, *_said(done.stderr))


def interrupted(
    folder: Path, argv: list[str], after_s: float, sig: int, ready: Callable[[str], bool] | None = None
) -> tuple[int, str, bool, list[int]]:
    """Send ``sig`` to moesim ``argv`` ``after_s`` after it starts, or after ``ready(what it said so far)`` holds
    (then ``after_s`` is the deadline); its exit status, its words and its processes alive 2 s after (each
    killed then)."""
    process = subprocess.Popen(
        [*MOESIM, *argv], cwd=folder, env=_env(folder), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    start = time.monotonic()
    while time.monotonic() - start < after_s and process.poll() is None:
        if ready is not None and ready("".join(lines)):
            break
        time.sleep(0.05)
    family = _descendants(process.pid)
    process.send_signal(sig)
    process.wait(timeout=60)
    reader.join(timeout=10)
    stderr = "".join(lines)
    time.sleep(2.0)
    alive = [pid for pid in family if _running(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    said, clean = _said(stderr)
    if sig == signal.SIGINT:  # progress lines before the Ctrl-C are fine; its own words are the last line
        clean = said.startswith("moesim: interrupted") and "Traceback" not in stderr
    return process.returncode, said, clean, alive


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for task in _listdir(f"/proc/{todo.pop()}/task"):
            for child in _read(f"/proc/{pid}/task/{task}/children").split():
                if int(child) not in found:
                    found.add(int(child))
                    todo.append(int(child))
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _running(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def checks(folder: Path) -> list[tuple[str, int, int, str, bool]]:
    """(input, expected status, status, last line said, clean) of every check."""
    (folder / "tmp").mkdir()
    os.mkfifo(folder / "fifo")
    (folder / "cases").mkdir()
    (folder / "cases" / "zero.yaml").symlink_to("/dev/zero")
    (folder / "bad-nic.yaml").write_text("base: h800\nnic_bandwidth_Bps: 1.0e-300\n")
    (folder / "zero-flops.yaml").write_text("base: h800\ngpu: {base: h800, peak_bf16_flops: 0}\n")
    for name, line in (("nic0", "nic_gbps: [0, 25]"), ("nicneg", "nic_gbps: -25"), ("badc", "cluster: bad-nic.yaml")):
        (folder / f"{name}.yaml").write_text(
            f"model: mixtral-8x7b\ngpus: 16\nglobal_batch: 16\npp: 2\n{line}\noutput: {name}.csv\n"
        )
    batches = ", ".join(str(4096 + 128 * i) for i in range(8))  # DeepSeek-V3 on 2,048 GPUs: about 2 s a point
    many = f"model: deepseek-v3\nlayout: deepseek-v3\ngpus: 2048\nglobal_batch: [{batches}]\nseq_len: 4096\n"
    (folder / "many.yaml").write_text(many + "output: many.csv\n")
    small = " ".join(SMALL)
    rows: list[tuple[str, int, int, str, bool]] = []

    def add(label: str, expected: int, result: tuple, leftover: list[str] | None = None) -> None:
        status, said, clean = result[:3]
        clean = clean or status == -signal.SIGKILL  # a killed command's progress lines are not its last words
        left = [name for name in leftover or [] if (folder / name).exists()] + _listdir(str(folder / "tmp"))
        if len(result) > 3 and result[3]:
            left.append(f"processes {result[3]}")
        rows.append((label, expected, status, said + (f" (left: {left})" if left else ""), clean and not left))

    add("stdout on /dev/full (run --json)", 2, shell(folder, f"$M run {small} --json > /dev/full"))
    add("ulimit -f 1, run --trace t.json", 2, shell(folder, f"ulimit -f 1; $M run {small} --trace t.json"), ["t.json"])
    long_name = "x" * 300 + ".json"
    add("run --trace <300-character name>", 2, shell(folder, f"$M run {small} --trace {long_name}"))
    add("closed stdout pipe (run --json | true)", 2, shell(folder, f"$M run {small} --json | true"))
    add("validate --out /proc/v.csv (read-only)", 2, shell(folder, "$M validate --out /proc/v.csv"))
    searched = "--model mixtral-8x7b --gpus 16 --global-batch 16 --seq-len 1024"
    add("search --write-layout /proc/l.yaml", 2, shell(folder, f"$M search {searched} --write-layout /proc/l.yaml"))
    add("run --megatron-args /dev/zero", 2, shell(folder, f"$M run {small} --megatron-args /dev/zero"))
    add("run --megatron-args FIFO", 2, shell(folder, f"timeout 20 $M run {small} --megatron-args fifo"))
    add("validate --cases (a /dev/zero link)", 2, shell(folder, "$M validate --cases cases"))
    add("run --trace-stages 99", 2, shell(folder, f"$M run {small} --trace t.json --trace-stages 99"))
    add("search --fix schedule=nosuch", 2, shell(folder, f"$M search {searched} --fix schedule=nosuch"))
    add("compare --nic-gbps 0", 2, shell(folder, f"$M compare {small} --nic-gbps 0 --out c.csv"), ["c.csv"])
    add("compare --nic-gbps -1", 2, shell(folder, f"$M compare {small} --nic-gbps -1 --out c.csv"), ["c.csv"])
    add(
        "compare --cluster (NIC of 1e-300 B/s)",
        2,
        shell(folder, f"$M compare {small} --cluster bad-nic.yaml --out c.csv"),
    )
    add("sweep nic_gbps: [0, 25]", 2, shell(folder, "$M sweep nic0.yaml"), ["nic0.csv"])
    add("sweep nic_gbps: -25", 2, shell(folder, "$M sweep nicneg.yaml"), ["nicneg.csv"])
    add("sweep cluster: NIC of 1e-300 B/s", 2, shell(folder, "$M sweep badc.yaml"), ["badc.csv"])
    add("run --cluster (peak FLOP/s 0)", 2, shell(folder, f"$M run {small} --cluster zero-flops.yaml"))
    dsv3 = ["--model", "deepseek-v3", "--layout", "deepseek-v3", "--gpus", "2048", "--global-batch", "15360"]
    dsv3 += ["--seq-len", "4096", "--set", "schedule=dualpipev"]  # about 7 s
    for at_s in (0.3, 3.0):  # while the modules load, and during the run
        run = ["run", *dsv3, "--trace", "t.json", "--trace-stages", "0", "--trace-micro-batches", "2"]
        add(
            f"Ctrl-C in run --trace (SIGINT at {at_s} s)",
            130,
            interrupted(folder, run, at_s, signal.SIGINT),
            ["t.json"],
        )
    add(
        "Ctrl-C in reproduce --jobs 2 (SIGINT at 4 s)",
        130,
        interrupted(folder, ["reproduce", "all", "--jobs", "2", "--out", "r"], 4.0, signal.SIGINT),
    )
    reproduce = ["reproduce", "all", "--jobs", "2", "--out", "r2"]
    add("SIGKILL of reproduce all --jobs 2 (at 4 s)", -9, interrupted(folder, reproduce, 4.0, signal.SIGKILL))
    search = ["search", "--model", "mixtral-8x7b", "--gpus", "64", "--jobs", "2"]
    add("Ctrl-C in search --jobs 2 without --out (at 8 s)", 130, interrupted(folder, search, 8.0, signal.SIGINT))
    add("SIGKILL of search --jobs 2 without --out (at 8 s)", -9, interrupted(folder, search, 8.0, signal.SIGKILL))
    table_open = lambda _said: any(name.startswith("moesim-search-") for name in _listdir(str(folder / "tmp")))
    label = "SIGKILL of search --jobs 2 without --out (its table open)"
    add(label, -9, interrupted(folder, search, 120.0, signal.SIGKILL, table_open))
    sweep = ["sweep", "many.yaml", "--jobs", "2"]
    running = lambda said: "running 8 on 2 processes" in said
    add(
        "SIGKILL of sweep --jobs 2 (its workers running)", -9, interrupted(folder, sweep, 60.0, signal.SIGKILL, running)
    )
    return rows


def main() -> int:
    with tempfile.TemporaryDirectory() as name:
        rows = checks(Path(name))
    print("| input | exit status | said (last line) |\n|---|---|---|")
    for label, expected, status, said, clean in rows:
        mark = "" if status == expected and clean else f" **(expected {expected}, one clean line)**"
        print(f"| {label} | {status}{mark} | {said.replace('|', '/')[:240]} |")
    return 0 if all(status == expected and clean for _, expected, status, _, clean in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
