"""A launch script read as bash would build its command line: the words after the training script.

What Megatron-LM's own examples (examples/*/train_*.sh at NVIDIA/Megatron-LM d98e8a64dd) and pasted launch lines
use: continuation lines, comments, quotes; ``NAME=value`` and ``export NAME=value``; bash arrays ``NAME=( ... )``
and ``NAME+=( ... )`` over several lines; ``$NAME``, ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``,
``${NAME:=default}``, ``${ARR[@]}`` / ``"${ARR[@]}"`` / ``${ARR[*]}``; ``$(( ... ))`` integer arithmetic; ``--flag=value``.
The command is the first line that runs a ``.py`` script (``torchrun ... pretrain_gpt.py``, ``python -m
torch.distributed.run ... ${SCRIPT}``), else one a variable holds (a launcher that runs ``bash -c "${CMD}"``); without
one, every line's words are taken as flags (a file of flags).

Conditions are not evaluated: the first branch of each ``if`` is taken, other branches and loop / ``case`` bodies
are skipped. A variable the script does not set (the environment's, ``$1``, ``$(command)``) is left as written and
named in ``unresolved``; nothing is read from this machine's environment, so the result is the same everywhere.
"""

from __future__ import annotations

import ast
import operator
import re
import shlex
from typing import NamedTuple

from topologies.errors import ConfigError

SOURCE = "--megatron-args"
_ASSIGN = re.compile(r"^(?:export\s+|declare\s+(?:-\w+\s+)*|local\s+|readonly\s+)?([A-Za-z_]\w*)(\+?)=(.*)$", re.DOTALL)
_NAME = re.compile(r"[A-Za-z_]\w*|[0-9]|[@*#?$!]")
_QUOTED_ARRAY = re.compile(r'"\$\{([A-Za-z_]\w*)\[@\]\}"')
_OPENERS = {"if": "fi", "case": "esac", "for": "done", "while": "done", "until": "done", "select": "done"}
_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


class Command(NamedTuple):
    """The words of the training command after its script, and the variables the script left unset."""

    words: list[str]
    unresolved: tuple[str, ...]


def command_words(text: str) -> Command:
    """The training command of ``text`` (a script, a pasted launch line or a list of flags) as shell words."""
    shell = _Shell()
    flag_lines: list[list[str]] = []
    for line in shell.statements(text):
        words = shell.words(line)
        if not words:
            continue
        script = next((i for i, word in enumerate(words) if word.endswith(".py") and not _spaced(word)), None)
        if script is not None:
            return Command(_until_operator(words[script + 1 :]), tuple(shell.unresolved))
        flag_lines.append(words)
    if flag_lines and flag_lines[0][0].startswith("--"):
        return Command(_until_operator([w for words in flag_lines for w in words]), tuple(shell.unresolved))
    stored = _stored_command(shell)
    if stored is not None:
        return Command(stored, tuple(shell.unresolved))
    first = flag_lines[0][0] if flag_lines else ""
    raise ConfigError(SOURCE, f"expected --flags or a command line running a .py script, got {first!r}")


def _stored_command(shell: _Shell) -> list[str] | None:
    """The words after the training script of a command a launcher keeps in a variable and runs elsewhere
    (``TRAINING_CMD="... python pretrain_gpt.py ${ARGS[@]}"`` then ``srun bash -c "${TRAINING_CMD}"``, as Megatron-LM's
    examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh), the last such variable set; None if none holds one."""
    for value in reversed(shell.scalars.values()):
        for line in re.split(r"[;\n]", value):
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            script = next((i for i, word in enumerate(words) if word.endswith(".py")), None)
            if script is not None:
                return _until_operator(words[script + 1 :])
    return None


def _spaced(word: str) -> bool:
    return any(char.isspace() for char in word)


def _until_operator(words: list[str]) -> list[str]:
    """The words before the first pipe, redirection or command separator (``2>&1 | tee log``, ``; echo``)."""
    for i, word in enumerate(words):
        if word.startswith(("|", "&", ";", ">", "<")) or (word[:1].isdigit() and ">" in word):
            return words[:i]
    return words


class _Shell:
    """The variables a script sets, in order, and the expansion of its words."""

    def __init__(self) -> None:
        self.scalars: dict[str, str] = {}
        self.arrays: dict[str, list[str]] = {}
        self.unresolved: list[str] = []

    def statements(self, text: str):
        """Each logical line that is not an assignment, after applying the assignments before it."""
        text = text.replace("\\\r\n", " ").replace("\\\n", " ")
        lines = iter(text.splitlines())
        skipping: list[str] = []  # closers of the blocks being skipped
        taken: list[str] = []  # closers of the if blocks whose first branch is being read
        for raw in lines:
            line = raw.strip()
            while _open_quote_or_array(line):  # a quoted value or an array over several lines
                more = next(lines, None)
                if more is None:
                    break
                line += "\n" + more.strip()
            head = line.split(None, 1)[0].rstrip(";") if line else ""
            if not line or line.startswith("#"):
                continue
            if skipping:
                if head in _OPENERS:
                    skipping.append(_OPENERS[head])
                elif head == skipping[-1]:
                    skipping.pop()
                continue
            if head in _OPENERS and re.search(rf";\s*{_OPENERS[head]}\s*(;.*)?$", line):
                continue  # a block on one line: its condition is not evaluated, so nothing of it is taken
            if head == "if":
                taken.append("fi")
                continue
            if head in ("elif", "else") and taken:
                taken.pop()
                skipping.append("fi")
                continue
            if head in _OPENERS:
                skipping.append(_OPENERS[head])
                continue
            if head in ("fi", "then", "do") and taken:
                if head == "fi":
                    taken.pop()
                continue
            rest = self._assign(line)
            if rest:
                yield rest

    def _assign(self, line: str) -> str:
        """Apply ``line`` if it is an assignment; return what is left to run: the line itself if it is no
        assignment, the command after ``NAME=value`` prefixes (``CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ...``)."""
        match = _ASSIGN.match(line)
        if not match:
            return line
        name, append, value = match.groups()
        value = value.strip()
        if value.startswith("(") and value.endswith(")"):
            items = self._split(self.expand(value[1:-1]), name)
            self.arrays[name] = (self.arrays.get(name, []) if append else []) + items
            return ""
        first, _, rest = _first_word(value)
        text = " ".join(self._split(self.expand(first), name))
        self.scalars[name] = self.scalars.get(name, "") + text if append else text
        return self._assign(rest) if rest and not rest.startswith("#") else ""

    def words(self, line: str) -> list[str]:
        return self._split(self.expand(line), line.split(None, 1)[0])

    @staticmethod
    def _split(text: str, where: str) -> list[str]:
        try:
            return shlex.split(text, comments=True)
        except ValueError as error:  # an unclosed quote or a trailing escape
            raise ConfigError(SOURCE, f"cannot read as a command line: {error} (at {where!r})") from None

    def expand(self, text: str) -> str:
        """``text`` with the variables, arrays and arithmetic the script set substituted (outside single quotes);
        ``"${ARR[@]}"`` gives one word per item, as bash does."""
        text = _QUOTED_ARRAY.sub(lambda m: self._quoted_items(m.group(1), m.group()), text)
        out, i, quote = [], 0, ""
        while i < len(text):
            char = text[i]
            if char == "'" and quote != '"':
                quote = "" if quote == "'" else "'"
            elif char == '"' and quote != "'":
                quote = "" if quote == '"' else '"'
            elif char == "\\" and quote != "'" and i + 1 < len(text):
                out.append(text[i : i + 2])
                i += 2
                continue
            elif char == "$" and quote != "'":
                value, i = self._dollar(text, i)
                out.append(value)
                continue
            out.append(char)
            i += 1
        return "".join(out)

    def _quoted_items(self, name: str, written: str) -> str:
        if name not in self.arrays:
            self.unresolved.append(written)
            return ""
        return " ".join(shlex.quote(item) for item in self.arrays[name])

    def _dollar(self, text: str, i: int) -> tuple[str, int]:
        """The expansion of the ``$`` at ``text[i]`` and the index after it."""
        if text.startswith("$((", i):
            end = _closing(text, i + 1, "(", ")")
            inner = self.expand(text[i + 3 : end - 1])  # bash also reads bare names inside $(( ))
            inner = re.sub(r"[A-Za-z_]\w*", lambda m: self.scalars.get(m.group(), m.group()), inner)
            value = _arithmetic(inner)
            if value is None:
                self.unresolved.append(text[i : end + 1])
                return text[i : end + 1], end + 1
            return str(value), end + 1
        if text.startswith("$(", i):
            end = _closing(text, i + 1, "(", ")")
            self.unresolved.append(text[i : end + 1])
            return text[i : end + 1], end + 1
        if text.startswith("${", i):
            end = _closing(text, i + 1, "{", "}")
            return self._braced(text[i + 2 : end], text[i : end + 1]), end + 1
        match = _NAME.match(text, i + 1)
        if not match:
            return "$", i + 1
        return self._value(match.group(), text[i : match.end()]), match.end()

    def _braced(self, body: str, written: str) -> str:
        array = re.fullmatch(r"([A-Za-z_]\w*)\[([@*])\]", body)
        if array:
            items = self.arrays.get(array.group(1))
            if items is None:
                self.unresolved.append(written)
                return ""
            return " ".join(items)
        name = re.match(r"[A-Za-z_]\w*|[0-9]+", body)
        if not name:
            self.unresolved.append(written)
            return written
        rest = body[name.end() :]
        for op in (":-", ":=", "-", "="):
            if rest.startswith(op):
                current = self.scalars.get(name.group())
                if current is not None and (current or ":" not in op):
                    return current
                default = self.expand(rest[len(op) :])
                if "=" in op:
                    self.scalars[name.group()] = " ".join(self._split(default, written))
                return default
        if rest:
            self.unresolved.append(written)
            return written
        return self._value(name.group(), written)

    def _value(self, name: str, written: str) -> str:
        if name in self.scalars:
            return self.scalars[name]
        if name in self.arrays:  # $ARR is its first item
            return self.arrays[name][0] if self.arrays[name] else ""
        self.unresolved.append(written)
        return written


def _first_word(text: str) -> tuple[str, str, str]:
    """``text`` split after its first shell word (quotes, escapes, ``$(...)`` and ``${...}`` kept whole)."""
    quote, depth = "", 0
    for i, char in enumerate(text):
        if char in "'\"" and quote in ("", char):
            quote = "" if quote else char
        elif not quote and char in "({":
            depth += 1
        elif not quote and char in ")}":
            depth -= 1
        elif not quote and depth == 0 and char.isspace():
            return text[:i], " ", text[i:].strip()
    return text, "", ""


def _open_quote_or_array(line: str) -> bool:
    """Whether ``line`` leaves a quote or an array's parenthesis open (its value goes on over the next lines)."""
    quote, depth = "", 0
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\" and quote != "'":
            i += 2
            continue
        if char in "'\"" and quote in ("", char):
            quote = "" if quote else char
        elif not quote and char == "#" and (i == 0 or line[i - 1].isspace()):  # a comment, to the line's end
            end = line.find("\n", i)
            if end < 0:
                break
            i = end
        elif not quote and char == "(":
            depth += 1
        elif not quote and char == ")":
            depth -= 1
        i += 1
    return bool(quote) or depth > 0


def _closing(text: str, start: int, opener: str, closer: str) -> int:
    """The index of the ``closer`` that matches the ``opener`` at ``text[start]`` (the text's end if none)."""
    depth = 0
    for i in range(start, len(text)):
        depth += text[i] == opener
        depth -= text[i] == closer
        if depth == 0:
            return i
    return len(text) - 1


def _arithmetic(text: str) -> int | None:
    """An integer expression of + - * / and parentheses (bash's integer arithmetic), or None."""
    try:
        tree = ast.parse(text.strip().replace("/", "//"), mode="eval").body
    except SyntaxError:
        return None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            return _ARITH[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(text)

    try:
        return value(tree)
    except (ValueError, ZeroDivisionError):
        return None
