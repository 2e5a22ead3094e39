"""What a command that fails says: bad input, a failed read or write (a full disk, a file size limit, a name over
the limit, a read-only folder), a closed stdout and Ctrl-C each end in at most one line and an exit status, never
a traceback (issue 42 items 2 and 4)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from experiments.common.args import one_line
from topologies.errors import ConfigError

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C


def exit_status(command: Callable[[], None]) -> int:
    """Run ``command``; its exit status: 0, 2 for a refusal or a failed read or write (one line on stderr; a
    closed stdout says nothing), INTERRUPTED for Ctrl-C (one line)."""
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over `ulimit -f`: EFBIG, said in one line, not a kill
    try:
        command()
        sys.stdout.flush()  # here, not at exit: a closed pipe is then caught below
    except ConfigError as error:
        _say(f"moesim: error: {one_line(str(error))}")  # one line, never a huge value
        return 2
    except KeyboardInterrupt as interrupt:  # what was finished is kept (a sweep says how to resume)
        return interrupted(one_line(str(interrupt)) if interrupt.args else "")
    except BrokenPipeError:  # stdout closed early (moesim ... | head): quiet, as the Python docs advise
        _silence_stdout()
        return 2
    except OSError as error:
        where = f" ({one_line(str(error.filename)[:120])})" if error.filename else ""
        _say(f"moesim: error: cannot write or read{where}: {error.strerror or type(error).__name__}")
        return 2
    return 0


def interrupted(what: str = "") -> int:
    """Say Ctrl-C in one line (``what``: what was kept, how to resume); the exit status INTERRUPTED. Also for a
    Ctrl-C while the command line loads its modules or reads its arguments (experiments/cli/main.py)."""
    _say("moesim: interrupted" + (f"; {what}" if what else ""))
    return INTERRUPTED


def _say(line: str) -> None:
    """One line on stderr, even if stderr itself is gone."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of a closed pipe raises nothing
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
