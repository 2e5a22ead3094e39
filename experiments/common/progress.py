"""Progress bars with an ETA (tqdm) for reproduce, sweep, search and bench: on stderr, and only when
stderr is a terminal and --quiet is not given, so logs and pipes stay clean."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm


@functools.cache
def _bar_class() -> type[tqdm]:
    """tqdm without its monitor thread (it only fixes the refresh of a stalled bar, and a live thread makes the
    fork of ``validate`` and ``reproduce``'s worker processes unsafe: experiments/common/parallel.py). Built on
    first use: tqdm is imported by the commands that draw a bar, not by ``moesim run`` (issue #38)."""
    from tqdm import tqdm

    class _Bar(tqdm):
        monitor_interval = 0

    return _Bar


def shown(quiet: bool = False) -> bool:
    """Whether a bar would be drawn: stderr is a terminal and not quiet."""
    return not quiet and sys.stderr.isatty()


def bar(total: int, what: str, unit: str = "point", quiet: bool = False) -> tqdm:
    """A bar over ``total`` items labelled ``what``; a no-op bar unless ``shown(quiet)``."""
    return _bar_class()(
        total=total, desc=what, unit=unit, file=sys.stderr, disable=not shown(quiet), dynamic_ncols=True
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """The --quiet flag of a long-running subcommand."""
    parser.add_argument("--quiet", action="store_true", help="no progress bar or progress lines on stderr")
