"""Failed writes and signals (issue 42 items 2 and 4): a full disk, a file size limit, a long name, a read-only
folder, a closed pipe and Ctrl-C are one line with exit 2 (130 for Ctrl-C), never a traceback, and leave nothing
under the final name or as a temporary file; workers die with their parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.common.paths import write_text
from experiments.search.sweep_rows import WholeRows

RUN = ["run", "--gpus", "240", "--global-batch", "30"]  # a run of 0.02 s of simulation (tests/unit/test_cli.py)
FULL = Path("/dev/full")  # every write fails with ENOSPC (Linux)
needs_dev_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this platform")


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moesim: error:"), err
    assert "Traceback" not in err
    return lines[0]


@needs_dev_full
def test_a_full_disk_is_one_line_and_exit_2(capsys) -> None:
    """stdout on a full disk (/dev/full): ENOSPC said in one line."""
    code = subprocess.run(
        [sys.executable, "-m", "experiments.cli.main", *RUN],
        stdout=FULL.open("w"),
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    assert code.returncode == 2
    assert "No space left on device" in _one_error_line(code.stderr)


@needs_dev_full
def test_atomic_write_that_fails_leaves_nothing(tmp_path, monkeypatch) -> None:
    """A write that fails midway leaves neither the final name nor a temporary file."""

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError):
        write_text(tmp_path / "layout.yaml", "a: 1\n")
    assert list(tmp_path.iterdir()) == []


def test_a_file_size_limit_is_one_line_and_leaves_no_trace_file(tmp_path) -> None:
    """Over `ulimit -f` (EFBIG): one line, exit 2, no trace under its name and no temporary file."""
    if not hasattr(signal, "SIGXFSZ"):
        pytest.skip("no file size limit signal on this platform")
    trace = tmp_path / "t.json"
    limit = "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))"
    script = (
        f"{limit}; import sys; from experiments.cli.main import main; sys.exit(main({[*RUN, '--trace', str(trace)]!r}))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert "File too large" in _one_error_line(done.stderr)
    assert list(tmp_path.iterdir()) == []


def test_a_trace_that_fails_midway_leaves_nothing(tmp_path) -> None:
    """The trace is written to an unnamed file (Linux) or a temporary one: a failure (or a kill) midway leaves
    neither it nor the final name."""
    from simulator.outputs.trace_files import _write_atomically

    def fails(out) -> None:
        out.write(b'{"traceEvents":[')
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        _write_atomically(tmp_path / "t.json", fails)
    assert list(tmp_path.iterdir()) == []
    assert _write_atomically(tmp_path / "t.json", lambda out: out.write(b"{}")) == 2
    assert [path.name for path in tmp_path.iterdir()] == ["t.json"]


def test_a_long_file_name_is_refused_before_work(tmp_path, capsys) -> None:
    assert main([*RUN, "--trace", str(tmp_path / ("a" * 300 + ".json"))]) == 2
    assert "file name is too long" in _one_error_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_validate_out_and_search_write_layout_are_checked_before_work(tmp_path, capsys, monkeypatch) -> None:
    """An unwritable folder (/proc takes no new files, even as root) or an existing folder as a file name: refused
    before a case or a layout runs."""
    from experiments.search import search_main
    from experiments.validation import validate

    def no_work(*args, **kwargs):
        raise AssertionError("ran before the output was checked")

    monkeypatch.setattr(validate, "run_cases", no_work)
    monkeypatch.setattr(search_main, "main_search", no_work)
    assert main(["validate", "--out", "/proc/moesim-out"]) == 2
    assert "out:" in _one_error_line(capsys.readouterr().err)
    for target in ("/proc/best.yaml", str(tmp_path)):
        assert main(["search", "--model", "mixtral-8x7b", "--gpus", "16", "--write-layout", target]) == 2
        assert "write_layout:" in _one_error_line(capsys.readouterr().err)


def test_a_closed_stdout_exits_quietly() -> None:
    """`moesim presets | head -0`-like: nothing on stderr, no traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli.main", *RUN], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdout.close()  # the reader is gone before moesim writes
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2 and err == b""


@pytest.mark.parametrize("command", [RUN, ["reproduce", "table3"]])
def test_ctrl_c_is_one_line_and_exit_130(command, capsys, monkeypatch, tmp_path) -> None:
    from experiments.paper import reproduce
    from simulator.report import simulate

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(reproduce, "reproduce", interrupted)
    monkeypatch.setattr(simulate, "simulate", interrupted)
    monkeypatch.setattr("experiments.cli.main.simulate", interrupted)
    argv = [*command, "--out", str(tmp_path)] if command[0] == "reproduce" else command
    assert main(argv) == 130
    assert capsys.readouterr().err.strip() == "moesim: interrupted"


def test_a_sweep_row_that_fails_to_write_is_cut_back(tmp_path, monkeypatch) -> None:
    """A row is whole or absent: a write that fails after part of a row leaves the rows before it."""
    table = tmp_path / "t.csv"
    real_write = os.write

    def half_then_full(fd, data):
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    with WholeRows(table, ["a", "b"]) as rows:
        rows.write_header()
        rows.write({"a": 1, "b": 2})
        monkeypatch.setattr(os, "write", half_then_full)
        with pytest.raises(OSError):
            rows.write({"a": 3, "b": 4})
    assert table.read_bytes() == b"a,b\r\n1,2\r\n"


def _gone(pid: int) -> bool:
    """Exited (a zombie counts: it computes nothing and waits only for a reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_within_2_s_of_their_parent_killed() -> None:
    """SIGKILL of the parent (nothing of it runs after): its pool workers, busy on a long task, end within 2 s."""
    script = textwrap.dedent(
        """
        import time
        from experiments.common.parallel import Workers

        workers = Workers(2)
        futures = [workers.submit(time.sleep, 60) for _ in range(2)]
        time.sleep(0.5)
        print(" ".join(str(pid) for pid in workers._executor._processes), flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2 and not any(_gone(pid) for pid in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
            time.sleep(0.05)
        assert all(_gone(pid) for pid in pids), pids
    finally:
        parent.kill()
        parent.wait()


def test_ctrl_c_in_a_sweep_says_how_to_resume_in_one_line(tmp_path, capsys, monkeypatch) -> None:
    from experiments.search import sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(sweep, "_rows", interrupted)
    path = tmp_path / "sweep.yaml"
    path.write_text("model: paper-352b\ngpus: 240\nglobal_batch: [30, 60]\noutput: o.csv\n")
    assert main(["sweep", str(path), "--quiet"]) == 130
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"moesim: interrupted; finished rows are in {tmp_path / 'o.csv'}, rerun to resume"


@pytest.mark.skipif(not hasattr(os, "O_TMPFILE"), reason="files without a name are a Linux feature")
def test_a_kill_while_writing_leaves_no_temporary_file(tmp_path) -> None:
    """SIGKILL (nothing of the process runs after) in the middle of an atomic write: the folder stays empty."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from experiments.common.paths import atomic_path

        with atomic_path({str(tmp_path / "out.csv")!r}) as temporary, open(temporary, "w") as handle:
            handle.write("half a row")
            handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False)
    assert done.returncode == -signal.SIGKILL
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_kill_leaves_no_temporary_folder(tmp_path) -> None:
    """SIGKILL of a process inside temporary_folder (a search without --out, a Megatron job's files), with a pool
    worker forked while the folder is open: within 2 s the folder and every process are gone (the reaper)."""
    script = textwrap.dedent(
        """
        import time
        from experiments.common.parallel import Workers
        from experiments.common.paths import temporary_folder

        with temporary_folder() as folder, Workers(2) as workers:
            (folder / "search.csv").write_text("a row")
            futures = [workers.submit(time.sleep, 60) for _ in range(2)]
            time.sleep(0.5)
            print(folder, *workers._executor._processes, flush=True)
            time.sleep(60)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        folder, *pids = parent.stdout.readline().split()
        reaper = next(iter(set(_children(parent.pid)) - {int(pid) for pid in pids}))
        assert Path(folder).parent == tmp_path and (Path(folder) / "search.csv").exists()
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and (list(tmp_path.iterdir()) or not _gone(reaper)):
            time.sleep(0.05)
        assert list(tmp_path.iterdir()) == [] and _gone(reaper)
        assert all(_gone(int(pid)) for pid in pids)
    finally:
        parent.kill()
        parent.wait()


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_a_temporary_folder_is_removed_on_leaving(tmp_path, monkeypatch) -> None:
    from experiments.common.paths import temporary_folder

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    with pytest.raises(KeyboardInterrupt), temporary_folder() as folder:
        (folder / "x").write_text("x")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_the_command_line_loads_is_one_line() -> None:
    """A Ctrl-C in the second the modules take to load (here raised as simulator.report.simulate is imported):
    `moesim: interrupted`, exit 130, no traceback (was a traceback from wherever the import was)."""
    script = textwrap.dedent(
        """
        import runpy, sys

        class CtrlC:
            def find_spec(self, name, path=None, target=None):
                if name == "simulator.report.simulate":
                    raise KeyboardInterrupt

        sys.meta_path.insert(0, CtrlC())
        sys.argv = ["moesim", "run"]
        runpy.run_module("experiments.cli.main", run_name="__main__")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (130, "moesim: interrupted\n")
