"""Every input file moesim reads goes through ``read_bounded``: a regular file within a size limit, read as UTF-8.

A device (``/dev/zero``), a FIFO, a socket or a folder is refused before it is opened for reading (a FIFO would
block, ``/dev/zero`` never ends), and a file larger than its limit is refused before its bytes are read; the limits
and why each has its size are in workloads/specs/limits.py (``*_bytes``; an environment variable raises one).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from topologies.errors import ConfigError
from workloads.specs.limits import check_limit, limit

# O_NONBLOCK: if a FIFO replaces the file between the stat and the open, the open returns at once instead of
# waiting for a writer (the fstat after it then refuses it); it changes nothing for a regular file.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _check_regular(what: str, shown: str, mode: int, limit_name: str) -> None:
    if not stat.S_ISREG(mode):
        raise ConfigError(
            what,
            f"cannot read {shown}: {_kind(mode)}, not a regular file; give a file of at most "
            f"{int(limit(limit_name)):,} bytes (MOESIM_MAX_{limit_name.upper()})",
        )


def read_bounded(what: str, path: str | Path, limit_name: str = "yaml_bytes") -> str:
    """The UTF-8 text of the regular file at ``path`` if it is within the limit ``limit_name`` (bytes); else
    ConfigError(what) naming the limit. Links are followed: a ``.yaml`` link to ``/dev/zero`` is a device."""
    shown = repr(str(path)[:200])
    bound = int(limit(limit_name))
    try:
        info = os.stat(path)
    except (OSError, ValueError) as error:
        raise ConfigError(what, f"cannot read {shown}: {getattr(error, 'strerror', None) or error}") from None
    _check_regular(what, shown, info.st_mode, limit_name)  # before open: opening some devices has effects
    check_limit(what, limit_name, info.st_size, f"{shown}: size in bytes")
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError) as error:
        raise ConfigError(what, f"cannot read {shown}: {getattr(error, 'strerror', None) or error}") from None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            _check_regular(what, shown, os.fstat(handle.fileno()).st_mode, limit_name)  # replaced since the stat
            data = handle.read(bound + 1)
    except OSError as error:
        raise ConfigError(what, f"cannot read {shown}: {error.strerror or error}") from None
    check_limit(what, limit_name, len(data), f"{shown}: size in bytes")  # it grew while we looked
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(what, f"cannot read {shown}: not UTF-8 text ({error.reason} at byte {error.start})") from None
