"""docs/yaml-reference.md and docs/megatron-flags.md, written from the specs' dataclasses and Megatron's flag table.

A field's description is the comment beside it (or the comment block above a run of fields) in its source file,
its type and default are the dataclass's, and a text field's choices are the ones its own check names when given
a value it refuses: nothing here restates what the code decides.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import typing
from collections import defaultdict
from enum import Enum

from topologies.cluster import ClusterSpec, cluster_preset
from topologies.errors import ConfigError
from topologies.hardware import GpuSpec, gpu_preset
from workloads.inputs import megatron_args, megatron_flag_list
from workloads.specs.layouts import LayoutSpec, layout_preset
from workloads.specs.models import ModelSpec, model_preset

_REFUSED = "\x00"  # a text value no choice list holds


def field_comments(cls: type) -> dict[str, str]:
    """Each field's comment: the one on its line, else the block above it, else the block above the run of
    uncommented fields it belongs to (a block describing several fields is named once, then referred to)."""
    lines, _ = inspect.getsourcelines(cls)  # a module-level class: its lines parse as they are
    (node,) = ast.parse("".join(lines)).body
    text = [line.rstrip() for line in lines]
    out: dict[str, str] = {}
    block: list[str] = []
    owner = ""
    previous_end = 0
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        name = item.target.id
        between = [line.strip() for line in text[previous_end : item.lineno - 1]]
        comments = [line[1:].strip() for line in between if line.startswith("#")]
        if comments:
            block, owner = comments, name
        elif any(not line for line in between):
            block, owner = [], ""
        inline = text[item.lineno - 1].split("  # ", 1)
        if len(inline) == 2:
            out[name] = inline[1].strip()
            block, owner = [], ""
        elif block and owner == name:
            out[name] = " ".join(block)
        elif block:
            out[name] = f"see `{owner}`"
        previous_end = item.end_lineno or item.lineno
    return out


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    return getattr(annotation, "__name__", str(annotation))


def _choices(example: object, name: str) -> tuple[str, ...]:
    """The values a text field takes, read from the spec's own refusal of one it does not."""
    try:
        dataclasses.replace(example, **{name: _REFUSED})
    except ConfigError as error:
        found = re.search(r"must be (?:one of|among) (.+)$", error.rule)
        if found:
            return tuple(choice.strip() for choice in found.group(1).split(","))
    except (TypeError, ValueError):
        pass
    return ()


def _yaml(value: object) -> str:
    """A default as a YAML file writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        short = f"{value:.6g}"
        short = short if float(short) == value else repr(value)
        return short if any(mark in short for mark in ".en") else short + ".0"
    if isinstance(value, tuple):
        return "[" + ", ".join(_yaml(item) for item in value) + "]"
    if isinstance(value, Enum):  # a typed identity is written in a file by its value
        return json.dumps(value.value)
    return json.dumps(value) if isinstance(value, str) else str(value)


def _default(f: dataclasses.Field) -> str:
    return f"default `{_yaml(f.default)}`" if f.default is not dataclasses.MISSING else "required"


def spec_fields(cls: type, example: object, skip: tuple[str, ...] = ()) -> list[str]:
    """One bullet per field: name, type, default or 'required', choices, what it means."""
    comments = field_comments(cls)
    hints = typing.get_type_hints(cls)
    lines = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        hint = hints[f.name]
        kind = "str" if isinstance(hint, type) and issubclass(hint, Enum) else _type_name(hint)
        kind = "GPU preset name or mapping" if kind == "GpuSpec" else kind
        facts = [kind, _default(f)]
        if isinstance(hint, type) and issubclass(hint, Enum):
            facts.append("one of " + ", ".join(f"`{member.value}`" for member in hint))
        elif kind == "str":
            choices = _choices(example, f.name)
            if choices:
                facts.append("one of " + ", ".join(f"`{c}`" if c else '`""`' for c in choices))
        comment = comments.get(f.name, "")
        lines.append(f"- `{f.name}` ({'; '.join(facts)})" + (f": {_markdown(comment)}" if comment else ""))
    return lines


def _markdown(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


YAML_HEADER = """# YAML field reference

Generated from the specs' dataclasses (`python -m experiments.cli.docs_pages` rewrites this page;
`tests/unit/test_docs_reference.py` fails when it is stale): each field's type, default and, for a text field,
the values its check accepts; the description is the comment beside the field in its source file. Loading is
strict: an unknown key, a value of the wrong type (`"4"`, `true` or `4.0` for an integer) or a missing required
key is one line naming the field, exit status 2. [Models, layouts and clusters as files](files.md) shows
whole files; units are SI (seconds, bytes, bytes/s, FLOP/s) unless the name says otherwise.
"""


def yaml_reference_markdown() -> str:
    """The YAML field reference: model, layout, cluster, GPU and sweep files."""
    from experiments.search.sweep import SIM_KEYS

    layout = layout_preset("megascale-moe")
    lines = [
        YAML_HEADER,
        "## Model files (`--model FILE.yaml`): `ModelSpec`",
        "",
        "`workloads/specs/models.py`. `name` defaults to the file's stem. A Hugging Face `config.json` is read",
        "into the same fields (`workloads/inputs/huggingface/config.py`).",
        "",
        *spec_fields(ModelSpec, model_preset("mixtral-8x7b")),
        "",
        "## Layout files (`--layout FILE.yaml`): `LayoutSpec`",
        "",
        "`workloads/specs/layouts.py`. `base: PRESET` starts from a layout preset whose fields the others",
        "override; without it the defaults below apply (megascale-moe's). `name` defaults to the file's stem.",
        "`--set FIELD=VALUE` overrides the same fields on the command line.",
        "",
        *spec_fields(LayoutSpec, layout),
        "",
        "## Cluster files (`--cluster FILE.yaml`): `ClusterSpec`",
        "",
        "`topologies/cluster.py`. `base: PRESET` starts from a cluster preset. The job's GPU count is `--gpus`,",
        "never the file's (`num_gpus` is refused). `gpu` is a GPU preset name or a mapping of the fields below.",
        "",
        *spec_fields(ClusterSpec, cluster_preset("h800", 8), skip=("num_gpus",)),
        "",
        "## GPUs (`gpu:` in a cluster file): `GpuSpec`",
        "",
        "`topologies/hardware.py`. A mapping of every field, or `base: PRESET` and the fields that differ.",
        "",
        *spec_fields(GpuSpec, gpu_preset("h800")),
        "",
        "## Sweep files (`moesim sweep FILE.yaml`)",
        "",
        "`experiments/search/sweep.py`. Each key takes a value or a list; the points are every combination.",
        "",
        *(f"- `{key}`" for key in SIM_KEYS),
        "- any layout field above but `name` and `micro_batch` (e.g. `pp: [10, 12]`)",
        "- `output` (required): the table, `.csv` or `.parquet` (relative to the sweep file)",
        "",
    ]
    return "\n".join(lines)


MEGATRON_HEADER = f"""# Megatron-LM flag coverage

Generated from `workloads/inputs/megatron_args.py` and `workloads/inputs/megatron_flag_list.py`
(`python -m experiments.cli.docs_pages` rewrites this page; `tests/unit/test_docs_reference.py` fails when it is
stale): every flag of Megatron-LM's parser at commit `{megatron_flag_list.PIN[:10]}`, as moesim reads it under
`--megatron-args`. Flag names, types and choices follow Megatron-LM's `megatron/training/arguments.py`;
[Megatron-LM arguments](megatron.md) says what each modelled flag becomes in moesim. A flag that is not modelled
or has no effect is listed in the report's `ignored_args` with the reason given here; a flag this Megatron-LM
does not have is reported as `{megatron_flag_list.UNKNOWN}`.
"""


def _flag_groups() -> dict[str, list[str]]:
    """The modelled flags by the Megatron-LM argument group (``_add_*_args``) that adds each, in FLAGS' order."""
    groups: dict[str, list[str]] = defaultdict(list)
    pinned = megatron_flag_list.pinned_flags()
    for name in megatron_args.FLAGS:
        groups[pinned.get(name, "not in the pinned parser")].append(name)
    return groups


def _value(flag: megatron_args.Flag) -> str:
    kinds = {
        megatron_args.Kind.SWITCH: "switch",
        megatron_args.Kind.INT: "integer",
        megatron_args.Kind.FLOAT: "number",
        megatron_args.Kind.TEXT: "text",
        megatron_args.Kind.TEXTS: "one or more texts",
    }
    text = kinds[flag.kind]
    return text + (": " + ", ".join(f"`{c}`" for c in flag.choices) if flag.choices else "")


def megatron_flags_markdown() -> str:
    """The coverage page: modelled flags by group, then every other flag of the pinned Megatron-LM by reason."""
    lines = [MEGATRON_HEADER, f"## Modelled ({len(megatron_args.FLAGS)} flags)", ""]
    for group, names in _flag_groups().items():
        lines += [f"`{group}`:", ""]
        lines += [f"- `{name}` ({_value(megatron_args.FLAGS[name])})" for name in names]
        lines.append("")
    by_class: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name in sorted(megatron_flag_list.pinned_flags()):
        if name not in megatron_args.FLAGS:
            reason = megatron_flag_list.ignored_reason(name)
            by_class[megatron_flag_list.reason_class(reason)][reason].append(f"`{name}`")
    titles = {
        "not modelled": "Not modelled: they may change step time or memory, and the step is simulated without them",
        "no effect": "Accepted, not affecting the simulated step",
    }
    for kind, title in titles.items():
        reasons = by_class.get(kind, {})
        count = sum(len(names) for names in reasons.values())
        lines += [f"## {title} ({count} flags)", ""]
        for reason, names in reasons.items():
            lines += [f"- {_markdown(reason[:1].upper() + reason[1:])}: {', '.join(names)}"]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
