"""Output paths: checked before any simulation, written atomically (a temporary file in the same folder, renamed).

A check refuses, in one line naming the flag, an empty path, a directory where a file is meant (or a file where
a directory is meant), a wrong extension, and a folder that neither exists nor can be created, or is not
writable. A write that fails midway leaves no truncated file under the final name. A temporary folder (``temporary_folder``)
is removed even when its process is killed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from topologies.errors import ConfigError

PLOT_SUFFIXES = (".png", ".pdf", ".svg")
DEFAULT_PLOT_SUFFIX = ".png"  # what matplotlib writes for a name without an extension
NAME_MAX_BYTES = 255  # POSIX NAME_MAX of ext4, xfs, btrfs, APFS: where pathconf cannot tell
# atomic_path's temporary name: "." + name + "." + mkstemp's 8 random characters + ".tmp" + the suffix (at most
# ".pftrace.gz"'s 3-character ".gz" or a 4-character ".yaml": 5 bytes with the dot)
TEMPORARY_NAME_EXTRA = 1 + 1 + 8 + 4 + 5


def _short(path: object) -> str:
    """The path as the user wrote it, cut to a readable length (never a huge repr)."""
    text = str(path)
    return repr(text if len(text) <= 200 else text[:200] + "...")


def _check_folder(field: str, folder: Path, shown: str) -> None:
    """The nearest existing ancestor of ``folder`` must be a writable directory (so the rest can be created)."""
    probe = folder
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail
            raise ConfigError(field, f"{shown}: {str(probe)!r} is a broken link")
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(field, f"{shown}: {str(probe)!r} is not a directory")
    try:  # os.access says yes to root even on read-only file systems (/proc): try a file
        handle, name = tempfile.mkstemp(prefix=".moesim-probe-", dir=probe)
    except OSError as error:
        raise ConfigError(field, f"{shown}: cannot write into {str(probe)!r} ({error.strerror or error})") from None
    os.close(handle)
    os.unlink(name)


def check_output_file(field: str, path: object, suffixes: tuple[str, ...]) -> Path:
    """``path`` as a Path, if it can be written as a file ending in one of ``suffixes``; else ConfigError(field)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise ConfigError(field, f"must name a file ending in {' or '.join(suffixes)}, got {_short(path)}")
    out = Path(path)
    shown = _short(path)
    if out.suffix.lower() not in suffixes:
        raise ConfigError(field, f"{shown}: must end in {' or '.join(suffixes)}")
    _check_name(field, out, shown)
    try:
        if out.is_dir():
            raise ConfigError(field, f"{shown} is a directory; give a file name")
        if out.exists() and not os.access(out, os.W_OK):
            raise ConfigError(field, f"{shown}: cannot overwrite (permission denied)")
        _check_folder(field, out.parent, shown)
    except OSError as error:  # a folder's name over the limit, a loop of links: said, not a traceback
        raise ConfigError(field, f"{shown}: {error.strerror or error}") from None
    return out


def _check_name(field: str, out: Path, shown: str) -> None:
    """The name, and the temporary name written first (``atomic_path``), must fit the file system's limit."""
    longest = _name_max(out.parent)
    if len(os.fsencode(out.name)) + TEMPORARY_NAME_EXTRA > longest:
        raise ConfigError(
            field,
            f"{shown}: the file name is too long ({len(os.fsencode(out.name))} bytes; at most "
            f"{longest - TEMPORARY_NAME_EXTRA} here)",
        )


def _name_max(folder: Path) -> int:
    """The longest file name the file system holding ``folder`` (or its nearest existing ancestor) takes."""
    probe = folder
    try:
        while not probe.is_dir() and probe.parent != probe:
            probe = probe.parent
        return os.pathconf(probe, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return NAME_MAX_BYTES


def check_output_dir(field: str, path: object) -> Path:
    """``path`` as a Path, if it is (or can be created as) a writable directory; else ConfigError(field)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise ConfigError(field, f"must name a folder, got {_short(path)}")
    out = Path(path)
    try:
        if out.exists() and not out.is_dir():
            raise ConfigError(field, f"{_short(path)} is a file; give a folder")
        _check_folder(field, out, _short(path))
    except OSError as error:  # a name over the limit, a loop of links: said, not a traceback
        raise ConfigError(field, f"{_short(path)}: {error.strerror or error}") from None
    return out


def plot_path(field: str, path: object) -> Path:
    """A checked plot path; a name without an extension gets .png (what is really written)."""
    if isinstance(path, (str, os.PathLike)) and str(path).strip() and not Path(path).suffix:
        path = f"{path}{DEFAULT_PLOT_SUFFIX}"
    return check_output_file(field, path, PLOT_SUFFIXES)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, else is removed. On Linux the file
    has no name until then (simulator/outputs/unnamed_files.py: a kill leaves nothing), and the path yielded has
    no extension: writers that infer a format from it are told the format (save_figure)."""
    # NOTE: imported here: `moesim run` without --trace or --plot loads no simulator.outputs (test_import_weight)
    from simulator.outputs.unnamed_files import open_unnamed, reopenable, replace_with

    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    descriptor = open_unnamed(final.parent)
    if descriptor is not None:
        try:
            yield reopenable(descriptor)
            replace_with(descriptor, final)
        finally:
            os.close(descriptor)
        return
    handle, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=f".tmp{final.suffix}", dir=final.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        mask = os.umask(0)
        os.umask(mask)
        temporary.chmod(0o666 & ~mask)  # mkstemp makes 0600; the final file gets the usual mode
        os.replace(temporary, final)
    finally:
        temporary.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def write_csv(frame, path: str | Path, **options) -> None:
    """``frame.to_csv(path, **options)``, atomically (index=False unless given)."""
    with atomic_path(path) as temporary:
        frame.to_csv(temporary, **{"index": False, **options})


def save_figure(fig, path: str | Path, **options) -> None:
    """``fig.savefig(path, **options)``, atomically."""
    from matplotlib.layout_engine import PlaceHolderLayoutEngine  # matplotlib is loaded: ``fig`` is a Figure

    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # NOTE: fig.tight_layout() lays the figure out in place and leaves this placeholder, for which savefig
        # draws the whole figure once more, without rendering, before the real draw (matplotlib 3.11
        # backend_bases.FigureCanvasBase.print_figure); a figure laid out already needs no engine, and the
        # pixels do not change (tests/unit/test_plot_save.py).
        fig.set_layout_engine(None)
    suffix = Path(path).suffix.lower()
    with atomic_path(path) as temporary:  # the format from the final name: the temporary may have no extension
        fig.savefig(temporary, **{"format": suffix[1:] if suffix else DEFAULT_PLOT_SUFFIX[1:], **options})


# The reaper of a temporary folder: a process that waits for end-of-file on its stdin, which comes when the process
# holding the other end closes it or dies (SIGKILL included: the kernel closes a dead process's descriptors), and
# then removes the folder. It ignores Ctrl-C and runs in a session of its own, so neither a terminal's Ctrl-C nor a
# kill of the process group ends it before it has cleaned up.
_REAPER = (
    "import shutil, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "sys.stdin.buffer.read()\n"
    "shutil.rmtree(sys.argv[1], ignore_errors=True)\n"
)


@contextmanager
def temporary_folder(prefix: str = "moesim-") -> Iterator[Path]:
    """A new folder under the system's temporary folder (TMPDIR), removed on leaving, and by a reaper process
    (``_REAPER``, python -S: about 20 ms to start) if this process is killed first. Worker processes forked while
    it is open hold the reaper's pipe too; they die with this process (experiments/common/parallel.py)."""
    import subprocess  # NOTE: here, not at start-up: only sweeps and searches make a temporary folder

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        reaper = subprocess.Popen(
            [sys.executable, "-S", "-c", _REAPER, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        reaper.kill()  # the folder is gone: nothing left for it to do
        reaper.wait()
        reaper.stdin.close()
