"""The argparse front end's rules: one-line errors (``moesim: error: gpus: must be an integer, got '1.5'``, exit 2,
no usage dump) and value types that check ranges at parse time."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable

from topologies.errors import ConfigError
from topologies.units import bandwidth_GBps

ERROR_PREFIX = "moesim: error: "
_ARGUMENT = re.compile(r"^argument (?:-+)?([\w-]+)(?:/[^:]*)?: (.*)$", re.DOTALL)
_INVALID = re.compile(r"^invalid (\w+) value: (.*)$", re.DOTALL)
_KINDS = {"int": "an integer", "float": "a number"}


def one_line(message: str) -> str:
    """argparse's message in moesim's words: ``field: rule``, on one line, never a huge value."""
    match = _ARGUMENT.match(message)
    if match:
        field, rule = match.group(1).replace("-", "_"), match.group(2)
        invalid = _INVALID.match(rule)
        if invalid and invalid.group(1) in _KINDS:
            rule = f"must be {_KINDS[invalid.group(1)]}, got {invalid.group(2)}"
        message = f"{field}: {rule}"
    message = " ".join(message.split())
    return message if len(message) <= 1000 else message[:1000] + "..."


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (subcommands inherit it). Its
    ``epilog`` may be a function returning the text: called when --help (or the CLI page) first reads it, so that
    a command that is only run does not build its help (the presets' epilog of `moesim run` computes every model's
    parameter count)."""

    @property
    def epilog(self) -> str | None:
        if callable(self._epilog):
            self._epilog = self._epilog()
        return self._epilog

    @epilog.setter
    def epilog(self, text: str | Callable[[], str] | None) -> None:
        self._epilog = text

    def error(self, message: str):  # type: ignore[override]
        print(ERROR_PREFIX + one_line(message), file=sys.stderr)
        sys.exit(2)


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def integer(minimum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer (no fractions, no floats), at least ``minimum`` if given."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {_short(text)}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def number(minimum: float | None = None, *, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float, at least (or, with ``above``, more than) ``minimum`` if given."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {_short(text)}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {_short(text)}")
        if minimum is not None and (value <= minimum if above else value < minimum):
            raise argparse.ArgumentTypeError(f"must be {'>' if above else '>='} {minimum:g}, got {_short(text)}")
        return value

    parse.__name__ = "float"
    return parse


def nonempty(text: str) -> str:
    """An argparse type: a string that is not empty or blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def bandwidth(field: str) -> Callable[[str], float]:
    """An argparse type: a bandwidth in GB/s from ``50GB/s``, ``400Gb/s`` or a bare number of GB/s
    (topologies/units.py); a bare number that looks like gigabits is taken as GB/s with a warning on stderr."""

    def parse(text: str) -> float:
        try:
            value, warning = bandwidth_GBps(field, text)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(error.rule) from None
        if warning:
            print(f"moesim: warning: {warning}", file=sys.stderr)
        return value

    parse.__name__ = "bandwidth"
    return parse
