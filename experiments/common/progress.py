"""Progress bars with an ETA (tqdm) for reproduce, sweep, search and bench: on stderr, and only when
stderr is a terminal and --quiet is not given, so logs and pipes stay clean. Where stderr is a log file,
``Lines`` says the same in a line every ``LINE_INTERVAL_S`` (``moesim search``)."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
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


# A log shows a long search alive without growing long: one line per 10 s is 6 lines a minute (a judgement).
LINE_INTERVAL_S = 10.0


class Lines:
    """Progress as lines for a log: done / total, the best so far and an ETA, at most one each ``interval_s``
    and only where no bar is drawn (stderr not a terminal) and not quiet."""

    def __init__(
        self,
        total: int,
        what: str,
        say: Callable[[str], None],
        *,
        quiet: bool = False,
        interval_s: float = LINE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.what, self.say, self.clock, self.interval_s = total, what, say, clock, interval_s
        self.on = not quiet and not sys.stderr.isatty()
        self.start_s = self.last_s = clock()
        self.done = 0

    def update(self, best: str = "") -> None:
        """One more item done; a line if ``interval_s`` passed since the last one."""
        self.done += 1
        now_s = self.clock()
        if not self.on or now_s - self.last_s < self.interval_s:
            return
        self.last_s = now_s
        eta_s = (now_s - self.start_s) / self.done * (self.total - self.done)
        best_text = f", best so far {best}" if best else ""
        self.say(f"{self.what}: {self.done:,}/{self.total:,} done{best_text}, ETA {eta_s:.0f} s")
