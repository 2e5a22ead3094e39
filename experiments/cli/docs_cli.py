"""docs/cli.md, the command-line reference, written from the ``moesim`` argparse parsers themselves.

The page is formatted here, not by argparse's help formatter, whose line wrapping follows the terminal's width
and the Python version: the same parsers give the same page everywhere.
"""

from __future__ import annotations

import argparse

HEADER = """# Command-line reference

Generated from the parsers of the `moesim` command (`python -m experiments.cli.docs_pages` rewrites this page;
`tests/unit/test_docs_reference.py` fails when it is stale). `moesim COMMAND --help` prints the same.
Bad input is one line, `moesim: error: FIELD: ...`, and exit status 2.
"""


def _parser() -> argparse.ArgumentParser:
    from experiments.cli.main import _parser as moesim_parser  # NOTE: lazy, the parsers import the whole CLI

    return moesim_parser()


def _escape(text: str) -> str:
    """Help text as Markdown: angle brackets and asterisks shown as written."""
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def _help(action: argparse.Action, prog: str) -> str:
    """The action's help with argparse's %-expansions applied (``%(default)s``, ``%%``)."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {name: value for name, value in vars(action).items() if value is not argparse.SUPPRESS}
    params["prog"] = prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(choice) for choice in params["choices"])
    return action.help % params


def _metavar(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None and action.option_strings:
        return "{" + ",".join(str(choice) for choice in action.choices) + "}"
    return action.dest.upper()


def _flag_line(action: argparse.Action, prog: str) -> str:
    """One bullet: the flag and its value, what it does, its choices, whether it repeats, its default."""
    names = ", ".join(action.option_strings) if action.option_strings else _metavar(action)
    value = _metavar(action) if action.option_strings else ""
    spelled = f"`{names} {value}`" if value else f"`{names}`"
    notes = []
    if action.choices is not None and (action.metavar is not None or not action.option_strings):
        notes.append("one of " + ", ".join(f"`{choice}`" for choice in action.choices))
    text = _escape(_help(action, prog))
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        notes.append("repeatable")
    if action.required and action.option_strings:
        notes.append("required")
    if notes:
        text = f"{text} ({'; '.join(notes)})" if text else "; ".join(notes)
    return f"- {spelled}: {text}" if text else f"- {spelled}"


def _section(name: str, parser: argparse.ArgumentParser, summary: str) -> list[str]:
    lines = [f"## `moesim {name}`", "", f"{_escape(summary[:1].upper() + summary[1:])}.", ""]
    positionals = [a for a in parser._actions if not a.option_strings]
    optionals = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    if positionals:
        lines += ["Arguments:", "", *(_flag_line(a, parser.prog) for a in positionals), ""]
    if optionals:
        lines += ["Options:", "", *(_flag_line(a, parser.prog) for a in optionals), ""]
    if parser.epilog:
        lines += ["```", parser.epilog.strip("\n"), "```", ""]
    return lines


def cli_markdown() -> str:
    """The whole page: the top-level options, then each subcommand in the order ``moesim --help`` lists them."""
    parser = _parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    summaries = {choice.dest: choice.help or "" for choice in commands._choices_actions}
    lines = [HEADER, "Commands:", ""]
    lines += [f"- [`moesim {name}`](#moesim-{name}): {_escape(summaries.get(name, ''))}" for name in commands.choices]
    top = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    lines += ["", "Options of `moesim` itself:", "", *(_flag_line(a, parser.prog) for a in top), ""]
    for name, sub in commands.choices.items():
        lines += _section(name, sub, summaries.get(name, ""))
    return "\n".join(lines).rstrip("\n") + "\n"
