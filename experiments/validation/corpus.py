"""The `moesim validate` corpus: one published training run a YAML file, read strictly.

A case names the model (a preset or a Hugging Face config.json / moesim YAML, relative to the repository, or
``megatron-flags``: the one its Megatron-LM arguments define),
the job (moesim layout fields or a preset, and / or Megatron-LM arguments), the cluster preset, GPUs, global
batch and sequence length, the measured tokens/s (per GPU, or of the whole job) and model TFLOP/s per GPU
where published, and the source (document, release, commit, recipe, row); optionally a ``group`` (default
``corpus``: the headline MAPE; others get their own) and a ``baseline`` (another case of the folder and the
``change`` between them: a matched pair, experiments/validation/pairs.py). An unknown key or a value of the
wrong type is one ConfigError naming the file and the field (``tiny.yaml:measured.tokens_per_s_per_gpu``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.inputs.bounded_read import read_bounded
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_model import defines_model, flags_model
from workloads.inputs.yaml_files import layout_from_dict, load_layout, load_model, parse_yaml
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

ROOT = Path(__file__).resolve().parents[2]  # the repository: relative model / layout paths start here
CASES_DIR = Path(__file__).resolve().parent / "cases"
DISAGREE = 0.10  # releases of one row that differ by more than this are listed (the newest is used)
MODEL_FROM_FLAGS = "megatron-flags"  # model: the one the case's megatron_args define

TOP = {
    "name": "str",
    "model": "str",
    "cluster": "str",
    "gpus": "int",
    "global_batch": "int",
    "seq_len": "int",
    "layout": "layout",
    "megatron_args": "args",
    "set": "set",  # layout fields over what the Megatron arguments give (what no Megatron flag can say)
    "measured": "measured",
    "source": "source",
    "recipe": "recipe",
    "other_releases": "releases",
    "fitted": "bool",
    "group": "str",
    "baseline": "baseline",
    "release_pair": "release_pair",
    "gaps": "texts",
    "notes": "texts",
}
REQUIRED = ("model", "cluster", "gpus", "global_batch", "seq_len", "measured", "source")
MEASURED = {  # tokens/s per GPU, or tokens/s of the whole job (divided by gpus)
    "tokens_per_s_per_gpu": "number",
    "tokens_per_s": "number",
    "model_tflops_per_gpu": "number",
    "derivation": "str",
    # peak allocated memory per GPU (torch.cuda.max_memory_allocated) in the unit the source prints: GB of 1e9 bytes
    # (Megatron-Bridge's report_memory, src/megatron/bridge/training/utils/train_utils.py) or GiB
    "peak_allocated_gb": "number",
    "peak_allocated_gib": "number",
}
SOURCE = {  # label: the short name tables show (default: document and release)
    "label": "str",
    "document": "str",
    "release": "str",
    "commit": "str",
    "recipe": "str",
    "row": "str",
    "note": "str",
}
BASELINE = {  # a matched run: the case this one changes, and what it changes (experiments/validation/pairs.py)
    "case": "str",
    "change": "str",
}
RELEASE_PAIR = {  # another case: a release that prints the same settings and a tokens/s more than PAIR_GAP apart
    "case": "str",
    "note": "str",
}
PAIR_GAP = 0.20  # releases this far apart at the same printed settings are both kept, as a marked pair (issue 39)
FITTED_PAPER = "MegaScale-MoE"  # the first word of the source label of the fitted paper's own rows
CORPUS = "corpus"  # the group of the corpus, whose MAPE is the headline; others get their own
RELEASE = {
    "release": "str",
    "tokens_per_s_per_gpu": "number",
    "model_tflops_per_gpu": "number",
    "same_row": "bool",
    "settings": "str",
}
KIND_TEXT = {
    "str": "a string",
    "int": "a positive integer",
    "number": "a finite number > 0",
    "bool": "true or false",
    "texts": "a string or a list of strings",
    "args": "Megatron-LM flags: a string or a list of strings",
}


@dataclass(frozen=True)
class Case:
    """One published run: what ran, where, what was measured, and where it was published."""

    name: str
    model: ModelSpec
    cluster: str
    gpus: int
    global_batch: int
    seq_len: int
    layout: LayoutSpec | None
    megatron_args: str
    measured_tokens_per_s_per_gpu: float
    measured_model_tflops_per_gpu: float | None
    source: dict[str, str]
    recipe: dict[str, Any] = field(default_factory=dict)
    other_releases: tuple[dict[str, Any], ...] = ()
    fitted: bool = False
    group: str = CORPUS
    baseline: str = ""  # the case this run changes (a matched pair), and what it changes
    change: str = ""
    release_pair: str = ""  # another release's case at the same printed settings, > PAIR_GAP apart; and why
    release_pair_note: str = ""
    layout_set: tuple[tuple[str, Any], ...] = ()  # the case's ``set``: layout fields applied after megatron_args
    gaps: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    derivation: str = ""
    measured_peak_allocated_gib: float | None = None  # per GPU, where the source publishes it (GB converted)

    @property
    def source_label(self) -> str:
        """The source's label, or its document and release."""
        if "label" in self.source:
            return self.source["label"]
        return " ".join(part for part in (self.source["document"], self.source.get("release", "")) if part)

    @property
    def from_fitted_paper(self) -> bool:
        """One of the fitted paper's own rows (its model, cluster and stack): not an external prediction."""
        return self.source_label.split()[0] == FITTED_PAPER

    def disagreeing_releases(self) -> list[dict[str, Any]]:
        """Other releases of the same row whose tokens/s differ from this case's by more than DISAGREE."""
        return [
            other
            for other in self.other_releases
            if other.get("same_row")
            and abs(other["tokens_per_s_per_gpu"] / self.measured_tokens_per_s_per_gpu - 1) > DISAGREE
        ]


def _value(where: str, kind: str, value: Any) -> Any:
    """``value`` checked as ``kind`` (see KIND_TEXT); a ConfigError naming ``where`` otherwise."""
    ok = {
        "str": isinstance(value, str) and value.strip() != "",
        "int": isinstance(value, int) and not isinstance(value, bool) and value > 0,
        "number": isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0,
        "bool": isinstance(value, bool),
        "texts": isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)),
        "args": isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)),
    }[kind]
    if not ok:
        raise ConfigError(where, f"must be {KIND_TEXT[kind]}, got {value!r}")
    if kind == "number":
        return float(value)
    if kind == "texts":
        return (value,) if isinstance(value, str) else tuple(value)
    if kind == "args":
        return value if isinstance(value, str) else " ".join(value)
    return value


def _mapping(where: str, data: Any, schema: dict[str, str], required: tuple[str, ...]) -> dict[str, Any]:
    """A mapping with only ``schema``'s keys, each of its kind, the ``required`` ones present."""
    if not isinstance(data, dict):
        raise ConfigError(where, f"must be a mapping of {', '.join(schema)}, got {data!r}")
    out = {}
    for key, value in data.items():
        if key not in schema:
            raise ConfigError(f"{where}.{key}", f"unknown key; allowed: {', '.join(schema)}")
        out[key] = _value(f"{where}.{key}", schema[key], value)
    for key in required:
        if key not in out:
            raise ConfigError(f"{where}.{key}", "missing required key")
    return out


def _recipe(where: str, data: Any) -> dict[str, Any]:
    """The published settings as given: keys to a scalar or a list of scalars (documentation only)."""
    if not isinstance(data, dict):
        raise ConfigError(where, f"must be a mapping of setting to value, got {data!r}")
    scalar = (str, int, float, bool)
    for key, value in data.items():
        if not isinstance(key, str) or not (
            isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) for v in value))
        ):
            raise ConfigError(f"{where}.{key}", f"must be a scalar or a list of scalars, got {value!r}")
    return dict(data)


def _path_or_name(text: str) -> str:
    """A file named relative to the repository, or a preset name as given."""
    if text.lower().endswith((".json", ".yaml", ".yml")) and not Path(text).is_absolute():
        return str(ROOT / text)
    return text


def case_model(name: str, megatron_args: str) -> ModelSpec:
    """The case's model: a preset or file, or (``MODEL_FROM_FLAGS``) the one its Megatron-LM arguments define, as
    ``moesim run --megatron-args`` without --model takes it (workloads/inputs/megatron_model.py flags_model)."""
    if name != MODEL_FROM_FLAGS:
        return load_model(_path_or_name(name))
    args = parse_megatron_args(megatron_args).args
    if not defines_model(args):
        raise ConfigError(
            "model", f"{MODEL_FROM_FLAGS} needs megatron_args with --num-layers, --hidden-size, --num-attention-heads"
        )
    return flags_model(args)


def _prefixed(where: str, call: Callable[[], Any]) -> Any:
    """``call()``, with a ConfigError's field prefixed by ``where`` (the case file)."""
    try:
        return call()
    except ConfigError as error:
        raise ConfigError(f"{where}:{error.field}", error.rule) from None


def case_from_dict(data: Any, name: str, origin: str) -> Case:
    """A Case from one YAML mapping; ``origin`` (the file name) prefixes every error's field."""
    if not isinstance(data, dict):
        raise ConfigError(origin, f"must hold a YAML mapping of {', '.join(TOP)}, got {type(data).__name__}")
    for key in data:
        if key not in TOP:
            raise ConfigError(f"{origin}:{key}", f"unknown key; allowed: {', '.join(TOP)}")
    for key in REQUIRED:
        if key not in data:
            raise ConfigError(f"{origin}:{key}", "missing required key")
    plain = {k: _value(f"{origin}:{k}", kind, data[k]) for k, kind in TOP.items() if k in data and kind in KIND_TEXT}
    measured = _mapping(f"{origin}:measured", data["measured"], MEASURED, ())
    if ("tokens_per_s_per_gpu" in measured) == ("tokens_per_s" in measured):
        raise ConfigError(f"{origin}:measured.tokens_per_s_per_gpu", "give exactly one of it and measured.tokens_per_s")
    source = _mapping(f"{origin}:source", data["source"], SOURCE, ("document",))
    releases = data.get("other_releases", [])
    if not isinstance(releases, list):
        raise ConfigError(f"{origin}:other_releases", f"must be a list of mappings, got {releases!r}")
    releases = tuple(
        _mapping(f"{origin}:other_releases[{i}]", r, RELEASE, ("release", "tokens_per_s_per_gpu"))
        for i, r in enumerate(releases)
    )
    baseline = _mapping(f"{origin}:baseline", data["baseline"], BASELINE, tuple(BASELINE)) if "baseline" in data else {}
    pair = data.get("release_pair")
    pair = _mapping(f"{origin}:release_pair", pair, RELEASE_PAIR, tuple(RELEASE_PAIR)) if pair is not None else {}
    if "layout" not in data and "megatron_args" not in data:
        raise ConfigError(f"{origin}:layout", "give the job: layout (preset, file or fields) or megatron_args")
    name = plain.get("name", name)
    layout = data.get("layout")
    if layout is not None and not isinstance(layout, (str, dict)):
        raise ConfigError(f"{origin}:layout", f"must be a preset name, a .yaml path or a mapping, got {layout!r}")
    if isinstance(layout, dict):
        layout = _prefixed(origin, lambda: layout_from_dict(layout, name))
    elif isinstance(layout, str):
        layout = _prefixed(origin, lambda: load_layout(_path_or_name(layout)))
    model = _prefixed(origin, lambda: case_model(plain["model"], plain.get("megatron_args", "")))
    settings = data.get("set", {})
    if not isinstance(settings, dict) or not plain.get("megatron_args") and settings:
        raise ConfigError(f"{origin}:set", f"must be a mapping of layout fields beside megatron_args, got {settings!r}")
    _prefixed(origin, lambda: layout_from_dict(settings, "set"))  # known fields, each checked
    _prefixed(origin, lambda: cluster_preset(plain["cluster"], plain["gpus"]))
    return Case(
        name=name,
        model=model,
        cluster=plain["cluster"],
        gpus=plain["gpus"],
        global_batch=plain["global_batch"],
        seq_len=plain["seq_len"],
        layout=layout,
        megatron_args=plain.get("megatron_args", ""),
        measured_tokens_per_s_per_gpu=measured.get("tokens_per_s_per_gpu") or measured["tokens_per_s"] / plain["gpus"],
        measured_model_tflops_per_gpu=measured.get("model_tflops_per_gpu"),
        source=source,
        recipe=_recipe(f"{origin}:recipe", data.get("recipe", {})),
        other_releases=releases,
        fitted=plain.get("fitted", False),
        group=plain.get("group", CORPUS),
        baseline=baseline.get("case", ""),
        change=baseline.get("change", ""),
        release_pair=pair.get("case", ""),
        release_pair_note=pair.get("note", ""),
        layout_set=tuple(settings.items()),
        gaps=plain.get("gaps", ()),
        notes=plain.get("notes", ()),
        derivation=measured.get("derivation", ""),
        measured_peak_allocated_gib=_peak_allocated_gib(origin, measured),
    )


def _peak_allocated_gib(origin: str, measured: dict[str, Any]) -> float | None:
    """The measured peak allocated memory in GiB (None where the source gives none)."""
    if "peak_allocated_gb" in measured and "peak_allocated_gib" in measured:
        raise ConfigError(f"{origin}:measured.peak_allocated_gb", "give at most one of it and peak_allocated_gib")
    if "peak_allocated_gb" in measured:
        return measured["peak_allocated_gb"] * 1e9 / 2**30
    return measured.get("peak_allocated_gib")


def load_case(path: str | Path) -> Case:
    """One case file (strict: an unknown key or a wrong type is one ConfigError naming the file and field)."""
    path = Path(path)
    text = read_bounded(path.name, path, "case_bytes")  # a regular file within its size limit
    return case_from_dict(parse_yaml(path.name, text, path.name), path.stem, path.name)


def load_cases(source: str | Path = CASES_DIR, names: Iterable[str] = ()) -> list[Case]:
    """The cases of a folder (sorted by file name) or one file; ``names`` keeps only those cases."""
    source = Path(source)
    paths = sorted(source.glob("*.yaml")) if source.is_dir() else [source]
    if not paths:
        raise ConfigError("cases", f"no *.yaml case files in {str(source)!r}")
    cases = [load_case(path) for path in paths]
    seen: dict[str, Path] = {}
    for path, case in zip(paths, cases):
        if case.name in seen:
            raise ConfigError(f"{path.name}:name", f"{case.name!r} is also the name of {seen[case.name].name}")
        seen[case.name] = path
    for path, case in zip(paths, cases):
        if case.baseline and case.baseline not in seen:
            raise ConfigError(f"{path.name}:baseline.case", f"{case.baseline!r} is not a case of {str(source)!r}")
        if case.baseline == case.name:
            raise ConfigError(f"{path.name}:baseline.case", "a case cannot be its own baseline")
    _check_release_pairs(paths, cases)
    wanted = list(names)
    unknown = sorted(set(wanted) - {case.name for case in cases})
    if unknown:
        raise ConfigError("--case", f"unknown case {unknown[0]!r}; choose from {', '.join(c.name for c in cases)}")
    return [case for case in cases if not wanted or case.name in wanted]


def _check_release_pairs(paths: list[Path], cases: list[Case]) -> None:
    """Each release_pair names another case of the folder that names it back, more than PAIR_GAP apart."""
    by_name = {case.name: case for case in cases}
    for path, case in zip(paths, cases):
        if not case.release_pair:
            continue
        where = f"{path.name}:release_pair.case"
        other = by_name.get(case.release_pair)
        if other is None or other is case:
            raise ConfigError(where, f"{case.release_pair!r} is not another case of this folder")
        if other.release_pair != case.name:
            raise ConfigError(where, f"{other.name!r} must name {case.name!r} back in its own release_pair")
        gap = max(case.measured_tokens_per_s_per_gpu, other.measured_tokens_per_s_per_gpu) / min(
            case.measured_tokens_per_s_per_gpu, other.measured_tokens_per_s_per_gpu
        )
        if gap - 1 <= PAIR_GAP:
            raise ConfigError(where, f"the two releases are {gap - 1:.0%} apart, not more than {PAIR_GAP:.0%}")
