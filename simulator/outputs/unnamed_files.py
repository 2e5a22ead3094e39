"""Files that get a name only once written (Linux O_TMPFILE): a kill (SIGKILL) while one is written leaves
nothing behind, where a named temporary file would stay. Elsewhere callers fall back to a named temporary."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def open_unnamed(folder: Path) -> int | None:
    """A writable file with no name in ``folder`` (mode 0666 less the umask), or None where that is not had."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_WRONLY, 0o666)
    except OSError as error:
        if error.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None  # a file system without it: a named temporary file instead
        raise


def reopenable(descriptor: int) -> Path:
    """A path that opens the unnamed file ``descriptor`` again, for writers that take a path (pandas, matplotlib)."""
    return Path(f"/proc/self/fd/{descriptor}")


def replace_with(descriptor: int, final: Path) -> None:
    """Put the unnamed file ``descriptor`` under ``final`` (replacing it): named beside it first, for the instant
    before the rename (linkat cannot replace a file), through /proc/self/fd following the link (os.link with a
    dir_fd calls linkat with AT_SYMLINK_FOLLOW; a plain link(2) would not follow it)."""
    temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(str(descriptor), temporary, src_dir_fd=proc, follow_symlinks=True)
    finally:
        os.close(proc)
    try:
        os.replace(temporary, final)
    finally:
        temporary.unlink(missing_ok=True)
