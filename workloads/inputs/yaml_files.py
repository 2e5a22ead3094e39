"""Models and layouts as YAML files: strict loaders (ConfigError naming the key), round-trip dumps, and the bounds on
YAML input (a node budget after aliases are expanded, so a billion-laughs file is refused before it is built, and a
nesting limit: workloads/specs/limits.py; the file itself is read by workloads/inputs/bounded_read.py)."""

from __future__ import annotations

import functools
import re
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topologies.errors import ConfigError
from workloads.inputs.bounded_read import read_bounded
from workloads.inputs.huggingface.config import load_hf_config
from workloads.inputs.huggingface.names import find_config, how_to_get, is_hf_config_path
from workloads.specs.fieldtypes import check_value, field_types
from workloads.specs.layouts import LAYOUT_PRESETS, LayoutSpec, layout_preset
from workloads.specs.limits import check_limit, limit
from workloads.specs.models import MODEL_PRESETS, ModelSpec, model_preset

if TYPE_CHECKING:
    import yaml

YAML_SUFFIXES = (".yaml", ".yml")


def is_yaml_path(value: object) -> bool:
    """True if value is a Path or a string naming a .yaml/.yml file."""
    return isinstance(value, Path) or (isinstance(value, str) and value.lower().endswith(YAML_SUFFIXES))


def read_yaml(what: str, path: str | Path) -> dict:
    """Parse the YAML mapping at path; any read or parse failure is ConfigError(what, ...)."""
    return parse_yaml(what, read_bounded(what, path), str(path)[:200])  # regular files within the size limit


@functools.cache
def _loader() -> type:
    """PyYAML's safe loader, reading YAML 1.2 / JSON floats too: ``50e9`` and ``1e-6`` are numbers, not strings
    (YAML 1.1 wants ``5.0e+10``), so SI values such as a cluster's bandwidths can be written as people write them.
    Built on first use: yaml is imported by what reads YAML, not by ``import simulator`` (issue #16). libyaml's
    parser where PyYAML was built with it (the same nodes, several times faster), else PyYAML's own."""
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
    )
    return Loader


def parse_yaml(what: str, text: str, origin: str = "<text>") -> dict:
    """Parse YAML text that must hold one mapping; failures are ConfigError(what, ...)."""
    loader = None
    try:
        loader = _loader()(text)  # a SafeLoader subclass: no arbitrary objects (reading the text may fail)
        node = loader.get_single_node()
        check_nodes(what, node, origin)  # aliases expanded, nesting: before anything is built
        data = None if node is None else loader.construct_document(node)
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001 - yaml raises YAMLError, ValueError, RecursionError, ...
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(what, f"{origin} is not valid YAML: {first[:200]}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError(what, f"{origin} must hold a YAML mapping of fields, got {type(data).__name__}")
    return data


def required_fields(cls: type) -> set[str]:
    """Fields of a dataclass without a default."""
    return {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}


# Keys a former release read, and what replaced them (issue 40: the token dispatcher became one object).
REPLACED_KEYS = {
    "ep_dispatcher": "replaced by token_dispatcher (megascale, alltoall, allgather, flex-deepep, flex-hybridep)",
    "flex_backend": "replaced by token_dispatcher (flex-deepep, flex-hybridep)",
}


def checked_fields(what: str, cls: type, data: dict, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Type-check the keys of data against cls's fields; unknown keys name themselves."""
    kinds = field_types(cls)
    allowed = [*kinds, *extra]
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(key, str) and key not in allowed and key in REPLACED_KEYS:
            raise ConfigError(f"{what}.{key}", REPLACED_KEYS[key])
        if not isinstance(key, str) or key not in allowed:
            raise ConfigError(f"{what}.{str(key)[:60]}", f"unknown key; allowed: {', '.join(allowed)}")
        out[key] = value if key in extra else check_value(f"{what}.{key}", kinds[key], value)
    return out


def model_from_dict(data: object, default_name: str = "") -> ModelSpec:
    """Build a ModelSpec from a mapping of its fields (name defaults to default_name)."""
    if not isinstance(data, dict):
        raise ConfigError("model", f"must be a mapping of fields, got {type(data).__name__}")
    values = checked_fields("model", ModelSpec, data)
    if default_name and "name" not in values:
        values["name"] = default_name
    for key in sorted(required_fields(ModelSpec) - set(values)):
        raise ConfigError(f"model.{key}", "missing required key")
    return ModelSpec(**values)


def layout_from_dict(data: object, default_name: str = "") -> LayoutSpec:
    """Build a LayoutSpec from a mapping of fields, optionally overriding a preset named by `base`."""
    if not isinstance(data, dict):
        raise ConfigError("layout", f"must be a mapping of fields, got {type(data).__name__}")
    values = checked_fields("layout", LayoutSpec, data, extra=("base",))
    base = values.pop("base", None)
    if base is not None:
        if not isinstance(base, str):
            raise ConfigError("layout.base", f"must be a preset name ({', '.join(LAYOUT_PRESETS)}), got {base!r}")
        try:
            merged = asdict(layout_preset(base))
        except ConfigError as error:
            raise ConfigError("layout.base", error.rule) from None
        merged["name"] = default_name or merged["name"]
        merged.update(values)
        values = merged
    if default_name and "name" not in values:
        values["name"] = default_name
    for key in sorted(required_fields(LayoutSpec) - set(values)):
        raise ConfigError(f"layout.{key}", "missing required key")
    return LayoutSpec(**values)


def load_model(source: ModelSpec | str | Path) -> ModelSpec:
    """A ModelSpec from a spec, a preset name, a .yaml/.yml file (name defaults to the file stem) or a
    Hugging Face config.json (a .json path or a folder holding one)."""
    if isinstance(source, ModelSpec):
        return source
    if is_hf_config_path(source):
        return load_hf_config(source)
    if is_yaml_path(source):
        return model_from_dict(read_yaml("model", source), Path(source).stem)
    if not isinstance(source, str):
        raise ConfigError("model", f"must be a preset name, a YAML path or a ModelSpec, got {source!r}")
    if source.lower() in MODEL_PRESETS:
        return model_preset(source)
    found = find_config(source)  # a shipped config.json by name, or a hub id in the local Hugging Face cache
    if found is not None:
        model = load_hf_config(found)
        return model.with_(name=source.rsplit("/", 1)[-1]) if "/" in source else model  # not the snapshot's hash
    try:
        return model_preset(source)
    except ConfigError as error:
        raise ConfigError("model", f"{error.rule}; {how_to_get(source, tuple(MODEL_PRESETS))}") from None


def load_layout(source: LayoutSpec | str | Path) -> LayoutSpec:
    """A LayoutSpec from a spec, a preset name or a .yaml/.yml file (name defaults to the file stem)."""
    if isinstance(source, LayoutSpec):
        return source
    if is_yaml_path(source):
        return layout_from_dict(read_yaml("layout", source), Path(source).stem)
    if not isinstance(source, str):
        raise ConfigError("layout", f"must be a preset name, a YAML path or a LayoutSpec, got {source!r}")
    return layout_preset(source)


def model_to_yaml(model: ModelSpec) -> str:
    """YAML text of every field of model; model_from_dict(yaml.safe_load(text)) == model."""
    import yaml

    return yaml.safe_dump(asdict(model), sort_keys=False)


def layout_to_yaml(layout: LayoutSpec) -> str:
    """YAML text of every field of layout; layout_from_dict(yaml.safe_load(text)) == layout."""
    import yaml

    return yaml.safe_dump(asdict(layout), sort_keys=False)


def check_nodes(what: str, root: yaml.Node | None, origin: str) -> None:
    """Raise ConfigError(what) if the composed document expands (aliases included) to more nodes than the limit,
    nests deeper than the limit, or refers to itself."""
    if root is None:
        return
    budget, deepest = limit("yaml_nodes"), limit("yaml_depth")
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, depth)
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # iterative post-order walk, so deep files cannot overflow Python's stack
        node, done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if not done:
            if key in active:
                raise ConfigError(what, f"{origin} refers to itself through an alias")
            active.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        if any(id(child) not in sizes for child in children):
            raise ConfigError(what, f"{origin} refers to itself through an alias")
        count = 1 + sum(sizes[id(child)][0] for child in children)
        depth = 1 + max((sizes[id(child)][1] for child in children), default=0)
        active.discard(key)
        sizes[key] = (count, depth)
        if count > budget:
            check_limit(what, "yaml_nodes", count, f"{origin}: nodes with aliases expanded")
        if depth > deepest:
            check_limit(what, "yaml_depth", depth, f"{origin}: nesting depth")


def _children(node: yaml.Node) -> list[yaml.Node]:
    import yaml  # NOTE: loaded by the parse that built node; a lookup here

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
