"""Regenerate workloads/inputs/megatron_flags_<commit>.tsv from a Megatron-LM checkout, without importing it (it needs torch):
``python -m experiments.cli.megatron_flag_extract /path/to/Megatron-LM | cut -f1,2 > list.tsv`` (then strip the
``:ConfigClass`` suffix of the second column). Every --flag of megatron/training/arguments.py: the literal
``add_argument`` names, and the names ArgumentGroupFactory (megatron/training/argument_utils.py) generates from the
config dataclasses it is given, by its rules (``--field-name``; a bool defaulting to True as ``--no-`` and
``--disable-``; ``argparse_meta`` ``arg_names``; ``exclude`` lists; ``init=False`` fields skipped)."""

import ast
import pathlib
import sys


def main(root: pathlib.Path) -> None:
    """Print 'flag<TAB>adding function[:config class]' for every flag, sorted."""
    args_py = root / "megatron/training/arguments.py"
    tree = ast.parse(args_py.read_text())
    classes = {}
    for path in root.rglob("*.py"):
        try:
            t = ast.parse(path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(t):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, node)
    flags = {}  # name -> group

    def add(name, group):
        flags.setdefault(name, group)

    def literal_list(node, scope):
        if isinstance(node, (ast.List, ast.Tuple)):
            return [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if isinstance(node, ast.Name):
            for stmt in ast.walk(scope):
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets
                ):
                    return literal_list(stmt.value, scope)
        return []

    def fields(cls):
        out = []
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
            if name in classes:
                out += fields(classes[name])
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                out.append(stmt)
        return out

    def names_for(stmt, prefix_default=None):
        name = stmt.target.id
        value = stmt.value
        meta_names = None
        default = value
        init = True
        if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) == "field":
            default = None
            for kw in value.keywords:
                if kw.arg == "default":
                    default = kw.value
                if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                    init = False
                if kw.arg == "metadata" and isinstance(kw.value, ast.Dict):
                    for k, v in zip(kw.value.keys, kw.value.values):
                        if isinstance(k, ast.Constant) and k.value == "argparse_meta" and isinstance(v, ast.Dict):
                            for k2, v2 in zip(v.keys, v.values):
                                if isinstance(k2, ast.Constant) and k2.value == "arg_names":
                                    meta_names = literal_list(v2, v)
        if not init:
            return []
        if meta_names:
            return meta_names
        ann = ast.unparse(stmt.annotation)
        is_bool = ann in ("bool", "Optional[bool]", "bool | None")
        if is_bool and isinstance(default, ast.Constant) and default.value is True:
            return ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
        return ["--" + name.replace("_", "-")]

    for func in tree.body:
        if not isinstance(func, ast.FunctionDef):
            continue
        group = func.name
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                for a in node.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                        add(a.value, group)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ArgumentGroupFactory":
                cls_name = node.args[0].id
                exclude = []
                for kw in node.keywords:
                    if kw.arg == "exclude":
                        exclude = literal_list(kw.value, func)
                for stmt in fields(classes[cls_name]):
                    if stmt.target.id in exclude or stmt.target.id.startswith("_"):
                        continue
                    for n in names_for(stmt):
                        add(n, f"{group}:{cls_name}")
    for name in sorted(flags):
        print(f"{name}\t{flags[name]}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
