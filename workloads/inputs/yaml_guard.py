"""Bounds on YAML input: a node budget after aliases are expanded (a billion-laughs file is refused before it is
built) and a nesting limit (workloads/specs/limits.py); the file itself is read by workloads/inputs/bounded_read.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from topologies.errors import ConfigError
from workloads.specs.limits import check_limit, limit

if TYPE_CHECKING:
    import yaml


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
