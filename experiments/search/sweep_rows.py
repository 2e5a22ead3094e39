"""A sweep table's rows appended whole or not at all: each row is formatted first and written in one system call
to a file opened for appending, unbuffered; a write that fails midway (a full disk, a file size limit) is cut
back to the last whole row before the error goes on. A kill between rows leaves whole rows only."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path


class WholeRows:
    """Append CSV rows of ``header``'s columns to ``path``, one whole row per write."""

    def __init__(self, path: Path, header: list[str]) -> None:
        self.path, self.header = path, header
        self._fd = -1

    def __enter__(self) -> WholeRows:  # noqa: PYI034 - Self needs Python 3.11; this class is not subclassed
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def write_header(self) -> None:
        self._append(self._format(lambda writer: writer.writeheader()))

    def write(self, row: dict[str, object]) -> None:
        self._append(self._format(lambda writer: writer.writerow(row)))

    def _format(self, write) -> bytes:
        text = io.StringIO(newline="")
        write(csv.DictWriter(text, fieldnames=self.header, restval="", extrasaction="ignore"))
        return text.getvalue().encode()

    def _append(self, data: bytes) -> None:
        """``data`` at the end of the file, or nothing: a short or failed write is cut back."""
        start = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # a regular file writes all or fails, but a short count is allowed
                written += os.write(self._fd, data[written:])
        except BaseException:
            os.ftruncate(self._fd, start)
            raise
