"""Fuzzing the loaders and the CLI: any input gives a valid spec or a ConfigError, never another exception."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.cli.main import main
from simulator.engine.faults import Faults
from simulator.engine.probes import Probe, observing
from simulator.memory.per_gpu import peak_memory
from simulator.report.clusters import cluster_from_dict, load_cluster
from simulator.report.simulate import simulate
from topologies.cluster import CLUSTER_PRESETS, ClusterSpec
from topologies.errors import ConfigError
from topologies.hardware import GPU_PRESETS
from workloads.graph.step import StepWorkload
from workloads.inputs.automodel import automodel_from_dict
from workloads.inputs.huggingface.config import load_hf_config, model_from_hf_dict
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_args import FLAGS as MEGATRON_FLAG_TABLE
from workloads.inputs.megatron_args import Kind
from workloads.inputs.yaml_files import layout_from_dict, load_model, model_from_dict, parse_yaml
from workloads.specs.layouts import LAYOUT_PRESETS, LayoutSpec
from workloads.specs.models import MODEL_PRESETS, ModelSpec

MEGATRON_FLAG_NAMES = sorted(MEGATRON_FLAG_TABLE)
HF_FOLDER = Path(__file__).resolve().parents[2] / "examples" / "models"
TRIED: Counter = Counter()  # examples tried per target, printed by the last test
# One xdist worker runs the whole module (--dist loadgroup), so test_zz_report_counts counts every fuzzer's draws,
# not the share its worker happened to get (it failed where the fuzzers were split 1 to 999 examples).
pytestmark = pytest.mark.xdist_group("fuzz_config")
# The dict fuzzers draw 300 examples: every single-field change of every preset is tried exhaustively
# (test_every_single_field_change), so they spend their draws on the combinations and the junk.
FAST = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

MODEL_KEYS = [*asdict(MODEL_PRESETS["paper-352b"])]
LAYOUT_KEYS = [*asdict(LAYOUT_PRESETS["megascale-moe"]), "base"]
SCALARS = st.one_of(
    st.integers(-3, 70),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.sampled_from(
        ["1f1b", "interleaved", "sp", "tp", "ep", "sar", "none", "full", "megatron-lm", "megascale-moe", "grouped"]
    ),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=4), SCALARS, max_size=2))


def mutated(base: dict, keys: list[str]) -> st.SearchStrategy[dict]:
    """A preset's fields with a few keys replaced, dropped or added."""
    changes = st.dictionaries(
        st.one_of(st.sampled_from(keys), st.text(max_size=6)), st.one_of(st.integers(1, 64), VALUES), max_size=2
    )
    drops = st.lists(st.sampled_from(keys), max_size=1)
    return st.builds(lambda c, d: {**{k: v for k, v in base.items() if k not in d}, **c}, changes, drops)


# NOTE: one_of a branch per preset, not a flatmap over its name (here and below): the same dicts, drawn faster
MODEL_DICTS = st.one_of([mutated(asdict(MODEL_PRESETS[name]), MODEL_KEYS) for name in sorted(MODEL_PRESETS)])
CLUSTER_KEYS = [*asdict(ClusterSpec(GPU_PRESETS["h800"], 8)), "base"]
GPU_KEYS = [*asdict(GPU_PRESETS["h800"]), "base"]
GPU_VALUES = st.one_of(
    st.sampled_from([*GPU_PRESETS, "nope"]),
    st.one_of([mutated(asdict(GPU_PRESETS[name]), GPU_KEYS) for name in sorted(GPU_PRESETS)]),
    st.one_of([mutated({"base": name}, GPU_KEYS) for name in sorted(GPU_PRESETS)]),
    VALUES,
)
CLUSTER_DICTS = st.one_of(
    st.one_of([mutated({"base": name}, CLUSTER_KEYS) for name in sorted(CLUSTER_PRESETS)]),
    st.builds(lambda gpu, rest: {"gpu": gpu, **rest}, GPU_VALUES, mutated({"domain_gpus": 8}, CLUSTER_KEYS)),
)
LAYOUT_DICTS = st.one_of(
    st.one_of([mutated({"base": name}, LAYOUT_KEYS) for name in sorted(LAYOUT_PRESETS)]),
    st.one_of([mutated(asdict(LAYOUT_PRESETS[name]), LAYOUT_KEYS) for name in sorted(LAYOUT_PRESETS)]),
)


def outcome(target: str, build) -> None:
    """Run build(); anything but a spec or a ConfigError fails the test."""
    TRIED[target] += 1
    try:
        result = build()
    except ConfigError as error:
        assert str(error).split(":")[0], "the message must name a field"
        TRIED[target + ":error"] += 1
        return
    assert isinstance(result, (ModelSpec, LayoutSpec, ClusterSpec))


@FAST
@given(st.one_of(MODEL_DICTS, st.dictionaries(st.text(max_size=6), VALUES, max_size=4), VALUES))
def test_fuzz_model_dicts(data: object) -> None:
    outcome("model_dict", lambda: model_from_dict(data))


@FAST
@given(st.one_of(LAYOUT_DICTS, st.dictionaries(st.text(max_size=6), VALUES, max_size=4), VALUES))
def test_fuzz_layout_dicts(data: object) -> None:
    outcome("layout_dict", lambda: layout_from_dict(data))


@FAST
@given(
    st.one_of(CLUSTER_DICTS, st.dictionaries(st.text(max_size=6), VALUES, max_size=4), VALUES),
    st.one_of(st.sampled_from([8, 64, 256]), st.integers(-2, 300)),
)
def test_fuzz_cluster_dicts(data: object, gpus: int) -> None:
    outcome("cluster_dict", lambda: cluster_from_dict(data, gpus))


HF_CONFIGS = [json.loads(path.read_text()) for path in sorted(HF_FOLDER.glob("*.json"))]
HF_KEYS = sorted({key for config in HF_CONFIGS for key in config})
HF_DICTS = st.one_of([mutated(config, HF_KEYS) for config in HF_CONFIGS])
# each shipped AutoModel recipe with its model and GPU count (its benchmark.num_nodes, else one node of 8)
AUTOMODEL_RECIPES = [
    (yaml.safe_load((HF_FOLDER.parent / "automodel" / name).read_text()), load_model(model), gpus)
    for name, model, gpus in (
        ("deepseek_v3_te_deepep.yaml", "deepseek-v3", 256),
        ("qwen3_moe_30b_te_deepep.yaml", "qwen3-30b-a3b", 8),
    )
]


def _automodel_layout(data: object, model: ModelSpec, gpus: int) -> LayoutSpec:
    """The layout an AutoModel recipe mapping's Megatron flags resolve to: the translation always gives a job
    Megatron's reader takes, or one ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError("automodel", "must be a mapping")
    recipe = automodel_from_dict(data, "grid")
    flags, _ = recipe.megatron_args(model.num_layers, model.gated_ffn, model.tied_embeddings, gpus)
    _ = recipe.schedule, recipe.fake_balanced_gate
    return parse_megatron_args(flags).resolve(model, None, gpus).layout


@FAST
@given(st.one_of(HF_DICTS, st.dictionaries(st.text(max_size=6), VALUES, max_size=4), VALUES))
def test_fuzz_hf_configs(data: object) -> None:
    """Mutated config.json mappings of every shipped model type: a ModelSpec or one ConfigError."""
    outcome("hf_config", lambda: model_from_hf_dict(data, "fuzz"))


# One value of each kind SCALARS and VALUES draw: the edges of the integers, floats, booleans, none, texts, containers.
GRID_VALUES = [-3, -1, 0, 1, 2, 64, 2**63, 0.5, 1e308, float("nan"), float("inf"), -float("inf"), True, False, None]
GRID_VALUES += ["", "x", "1f1b", "none", "megascale-moe", "h800", [], [1, "x"], {}, {"a": 1}]


def single_changes(base: dict, keys: list[str]) -> list[dict]:
    """base with one of its keys dropped, or one of keys set to each GRID_VALUES value."""
    dropped = [{k: v for k, v in base.items() if k != key} for key in base]
    return dropped + [{**base, key: value} for key in keys for value in GRID_VALUES]


GRIDS = {  # target: (what builds a spec, the grid; built when its test runs, not at collection)
    "model_dict": (
        model_from_dict,
        lambda: [d for name in sorted(MODEL_PRESETS) for d in single_changes(asdict(MODEL_PRESETS[name]), MODEL_KEYS)],
    ),
    "layout_dict": (
        layout_from_dict,
        lambda: [
            d
            for name in sorted(LAYOUT_PRESETS)
            for base in ({"base": name}, asdict(LAYOUT_PRESETS[name]))
            for d in single_changes(base, LAYOUT_KEYS)
        ],
    ),
    "cluster_dict": (
        lambda data: cluster_from_dict(data, 64),
        lambda: (
            [d for name in sorted(CLUSTER_PRESETS) for d in single_changes({"base": name}, CLUSTER_KEYS)]
            + [
                {"gpu": gpu, "domain_gpus": 8}
                for name in sorted(GPU_PRESETS)
                for gpu in single_changes(asdict(GPU_PRESETS[name]), GPU_KEYS)
            ]
        ),
    ),
    "hf_config": (
        lambda data: model_from_hf_dict(data, "grid"),
        lambda: [d for config in HF_CONFIGS for d in single_changes(config, HF_KEYS)],
    ),
    # an AutoModel recipe with one section, or one key of one section, changed: flags or one ConfigError
    "automodel": (
        lambda item: _automodel_layout(*item),
        lambda: [
            (d, model, gpus)
            for recipe, model, gpus in AUTOMODEL_RECIPES
            for d in [
                *single_changes(recipe, sorted(recipe)),
                *(
                    {**recipe, section: changed}
                    for section in sorted(recipe)
                    if isinstance(recipe[section], dict)
                    for changed in single_changes(recipe[section], sorted(recipe[section]))
                ),
            ]
        ],
    ),
}


@pytest.mark.parametrize("target", sorted(GRIDS))
def test_every_single_field_change(target: str) -> None:
    """Every preset (and shipped config.json) with one field dropped or set to each kind of value: a spec or one
    ConfigError. The exhaustive part of the dict fuzzers above, which add combinations and junk at random."""
    build, grid_of = GRIDS[target]
    grid = grid_of()
    assert len(grid) > 500
    for data in grid:
        outcome(target + "_grid", lambda data=data: build(data))


def dumped(data: dict) -> str:
    """YAML text of data (unencodable values fall back to their repr)."""
    try:  # libyaml's emitter where PyYAML has it: the same text, five times faster to draw
        return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    except yaml.YAMLError:
        return repr(data)


TEXTS = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=":-[]{}\n #&*!|>'\"%@`,?0123456789abe.", max_size=60),
    MODEL_DICTS.map(dumped),
    LAYOUT_DICTS.map(dumped),
    st.builds(lambda a, b: a[: len(a) // 2] + b, MODEL_DICTS.map(dumped), st.text(max_size=10)),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))  # no grid covers the parser
@given(TEXTS)
def test_fuzz_yaml_texts(text: str) -> None:
    outcome("model_yaml", lambda: model_from_dict(parse_yaml("model", text)))
    outcome("layout_yaml", lambda: layout_from_dict(parse_yaml("layout", text)))


class _Reached(Exception):
    """Raised when an engine starts: the configuration passed every check."""


class _StopAtStart(Probe):
    """Ends the run as it starts, so that the fuzzer checks validation, not simulation speed."""

    def on_start(self, engine: object) -> None:
        raise _Reached


NUMBERS = st.one_of(st.integers(-2, 2000).map(str), st.sampled_from(["0", "-1", "8", "16", "240", "1e3", "x", ""]))
FLAGS = st.one_of(
    st.tuples(st.just("--model"), st.sampled_from([*MODEL_PRESETS, "nope", "m.yaml", ""])),
    st.tuples(st.just("--layout"), st.sampled_from([*LAYOUT_PRESETS, "nope", "/nonexistent.yml"])),
    st.tuples(st.just("--cluster"), st.sampled_from([*CLUSTER_PRESETS, "H800", "tpu", "/nonexistent.yaml"])),
    st.tuples(st.sampled_from(["--gpus", "--global-batch", "--seq-len", "--micro-batch", "--nic-gbps"]), NUMBERS),
    st.tuples(st.sampled_from(["--json", "--bogus", "extra"])),
    st.tuples(st.sampled_from(["--trace-micro-batches", "--ep", "--ep-max-nodes", "--seed", "--zipf"]), NUMBERS),
    st.tuples(st.sampled_from(["--trace", "--plot"]), st.sampled_from(["", " ", "x.txt", "/proc/t.json", "tests"])),
    st.tuples(st.just("--trace-stages"), st.sampled_from(["-1", "0,x", "", ",", "1e3"])),
    st.tuples(st.just("--routing"), st.sampled_from(["uniform", "zipf", "bogus"])),
    st.tuples(
        st.sampled_from(["--straggler", "--degrade", "--fail-link"]),
        st.sampled_from(["17:1e308", "nvlink:9:1e308", "nic:3:1e200", "3:inf", "nic:1", "1:nan", "x", ":"]),
    ),
    st.tuples(
        st.just("--set"),
        st.sampled_from(["capacity_factor=1e308", "micro_batch=4", "pp=0", "pp=1e400", "zipf_exponent=nan", "=", "x"]),
    ),
)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(FLAGS, max_size=6))
def test_fuzz_cli(capsys, flags: list[tuple[str, ...]]) -> None:
    """Any run command line reaches the engine or is one stderr line ``moesim: error: ...`` with status 2."""
    cli_outcome("cli", capsys, ["run", *[token for flag in flags for token in flag]])


def cli_outcome(target: str, capsys, argv: list[str]) -> None:
    """Run the CLI (stopped as the engine starts); anything but a start or one error line with status 2 fails."""
    TRIED[target] += 1
    capsys.readouterr()
    with observing(_StopAtStart()):
        try:
            status = main(argv)
        except _Reached:
            TRIED[target + ":valid"] += 1
            return
    lines = capsys.readouterr().err.strip().splitlines()
    err = [line for line in lines if not line.startswith("moesim: warning: ")]  # e.g. --nic-gbps 200: gigabits?
    assert status == 2 and len(err) == 1 and err[0].startswith("moesim: error: "), (argv, lines)
    assert len(err[0]) < 1000, "a message never quotes a huge value"
    TRIED[target + ":error"] += 1


API_VALUES = st.one_of(
    VALUES, st.sampled_from([np.int64(240), np.int32(30), np.float64(1.5), np.bool_(True), "17:1.2"])
)
API_KEYWORDS = ["gpus", "cluster", "global_batch", "seq_len", "micro_batch", "calibration", "memoize", "allow_oom"]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from([*API_KEYWORDS, "faults", "probes", "engine"]), API_VALUES, max_size=3))
def test_fuzz_simulate_arguments(keywords: dict) -> None:
    """simulate() with values of any type: the engine starts or one ConfigError, never a TypeError."""
    TRIED["api"] += 1
    arguments = {"gpus": 240, "global_batch": 30, **keywords}
    with observing(_StopAtStart()):
        try:
            simulate("paper-352b", "megascale-moe", **arguments)
        except _Reached:
            TRIED["api:valid"] += 1
        except ConfigError as error:
            assert str(error).split(":")[0] and len(str(error)) < 600
            TRIED["api:error"] += 1


ENTRIES = st.one_of(VALUES, st.lists(st.one_of(st.tuples(SCALARS), st.tuples(SCALARS, SCALARS), VALUES), max_size=2))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(ENTRIES, ENTRIES, ENTRIES, st.booleans())
def test_fuzz_faults(stragglers: object, degraded: object, failed: object, parse: bool) -> None:
    """Faults(...) and Faults.parse(...) of anything: a Faults or one ConfigError."""
    TRIED["faults"] += 1
    try:
        faults = Faults.parse(stragglers, degraded, failed) if parse else Faults(stragglers, degraded, failed)
    except ConfigError:
        TRIED["faults:error"] += 1
        return
    assert all(1 <= factor <= 1e6 for *_, factor in (*faults.stragglers, *faults.degraded))


def bomb(levels: int, fanout: int, depth: int) -> str:
    """A billion-laughs style YAML (``levels`` of aliases, ``fanout`` each) nested ``depth`` lists deep."""
    lines = [f"a0: &a0 {'[' * depth}x{']' * depth}"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels)]
    return "\n".join(lines)


@settings(max_examples=60, deadline=2000, suppress_health_check=list(HealthCheck))
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 90))
def test_fuzz_yaml_bombs(levels: int, fanout: int, depth: int) -> None:
    """Alias bombs and deep nesting: refused (or parsed) within the deadline, never expanded."""
    TRIED["yaml_bomb"] += 1
    try:
        parse_yaml("model", bomb(levels, fanout, depth))
    except ConfigError:
        TRIED["yaml_bomb:error"] += 1


MEGATRON_JUNK = st.one_of(
    st.sampled_from(["0", "-1", "3", "4096", "two", "1.5", "1e3", "", "'a b'", "Et|t|L", "E(t|)*3L", "[0]*2+[1]*30"]),
    st.text(alphabet="Et|Lm()*,0123456789[]+ '\"\\#\n;", max_size=12),
)
TEXT_VALUES = ["Et*3|(tt|)*29,m|L", "Et*15|t*17L", "Et*7|t*8|t*8|t*9L", "2", "([1]*3+[0])*8", "[0]*3+[1]*58"]


def megatron_value(flag: str) -> st.SearchStrategy[str | None]:
    """A value of the flag's kind (Megatron's argparse types), mostly one that parses."""
    spec = MEGATRON_FLAG_TABLE[flag]
    if spec.kind == Kind.SWITCH:
        return st.none()
    if spec.kind == Kind.INT:
        return st.sampled_from(["1", "1", "2", "2", "4", "8", "16", "0"])
    if spec.kind == Kind.FLOAT:
        return st.sampled_from(["1.0", "1.25", "2", "-1", "0.5"])
    if spec.kind == Kind.TEXTS:
        pool = spec.choices or ("core_attn", "moe_act", "layernorm", "moe", "shared_experts", "mlp", "mla_up_proj")
        return st.lists(st.sampled_from(pool), min_size=1, max_size=3).map(" ".join)
    return st.sampled_from(spec.choices or TEXT_VALUES)


TYPED_PAIRS = st.one_of([st.tuples(st.just(flag), megatron_value(flag)) for flag in MEGATRON_FLAG_NAMES])
JUNK_PAIRS = st.tuples(
    st.one_of(
        st.sampled_from([*MEGATRON_FLAG_NAMES, "--lr", "--save", "--foo", "--", "-x", "--fp8-format=e4m3"]),
        st.text(alphabet="-abcdefgrt=", min_size=1, max_size=10),
    ),
    st.one_of(st.none(), MEGATRON_JUNK),
)
MEGATRON_TEXTS = st.builds(
    lambda prefix, parts: prefix + " ".join(flag + (" " + value if value is not None else "") for flag, value in parts),
    st.sampled_from(["--bf16 "] * 4 + ["--fp16 --bf16 ", "torchrun --nnodes 2 pretrain_gpt.py --bf16 \\\n ", ""]),
    st.lists(st.one_of(TYPED_PAIRS, TYPED_PAIRS, TYPED_PAIRS, JUNK_PAIRS), max_size=8),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(MEGATRON_TEXTS, st.sampled_from(["mixtral-8x7b", "deepseek-v3", "paper-352b"]), st.sampled_from([8, 64, 240]))
def test_fuzz_megatron_args(text: str, model: str, gpus: int) -> None:
    """Megatron argument strings: a job, a resolved model and layout and their memory, or a ConfigError."""
    TRIED["megatron"] += 1
    try:
        job = parse_megatron_args(text)
        run = job.resolve(MODEL_PRESETS[model])
        workload = StepWorkload(run.model, run.layout, gpus, 8, job.global_batch_for(gpus), run.seq_len or 4096)
        peak_memory(workload)
    except ConfigError as error:
        assert str(error).split(":")[0], "the message must name a field"
        TRIED["megatron:error"] += 1
        return
    TRIED["megatron:valid"] += 1


ROOT = HF_FOLDER.parent.parent
JSON_TEXTS = st.one_of(
    HF_DICTS.map(json.dumps),
    st.builds(lambda text, cut: text[:cut], HF_DICTS.map(json.dumps), st.integers(0, 300)),
    st.integers(0, 5000).map(lambda depth: "[" * depth + "]" * depth),
    st.sampled_from(["[]", "null", '"x"', "{}", '{"model_type": "llama"}', '{"model_type": "mixtral", "x": 1e999}']),
    st.text(max_size=40),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the files the fuzzers write, and the broken inputs the CLI fuzzer names with ``@``."""
    path = tmp_path_factory.mktemp("fuzz")
    broken = {
        "broken.json": '{"model_type": "mixtral", "hidden_size": ',
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "list.json": "[1, 2]",
        "inf.json": (HF_FOLDER / "mixtral-8x7b.json")
        .read_text()
        .replace('"hidden_size": 4096', '"hidden_size": 1e999'),
        "cluster-unknown.yaml": "base: h800\nnic_gbps: 100\n",
        "cluster-bad.yaml": "base: h800\nnic_bandwidth_Bps: -1\n",
        "cluster-gpu.yaml": "gpu: {base: h100, hbm_bytes: .inf}\ndomain_gpus: 8\n",
        "cluster-deep.yaml": "gpu: " + "[" * 200 + "]" * 200 + "\n",
        "megatron.sh": "torchrun pretrain_gpt.py --tensor-model-parallel-size 3 --bf16\n",
    }
    for name, text in broken.items():
        (path / name).write_text(text)
    return path


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(JSON_TEXTS)
def test_fuzz_hf_config_files(folder: Path, text: str) -> None:
    """config.json files: truncated, nested past the recursion limit, infinite numbers, not a mapping."""
    path = folder / "config.json"
    path.write_text(text)
    outcome("hf_file", lambda: load_hf_config(path))


CLUSTER_TEXTS = st.one_of(
    CLUSTER_DICTS.map(dumped),
    st.builds(lambda a, b: a[: len(a) // 2] + b, CLUSTER_DICTS.map(dumped), st.text(max_size=10)),
    st.text(alphabet=":-[]{}\n #&*!|>'\"%@`,?0123456789abe.", max_size=60),
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(CLUSTER_TEXTS, st.sampled_from([8, 64, 256]))
def test_fuzz_cluster_files(folder: Path, text: str, gpus: int) -> None:
    """Cluster YAML files (mutated presets and GPU mappings, cut short or noise): a ClusterSpec or one ConfigError."""
    path = folder / "cluster.yaml"
    path.write_text(text)
    outcome("cluster_file", lambda: load_cluster(path, gpus))


REAL_FLAGS = st.one_of(
    st.tuples(
        st.just("--model"), st.sampled_from([*(str(p) for p in sorted(HF_FOLDER.glob("*.json"))[:4]), "@broken.json"])
    ),
    st.tuples(st.just("--model"), st.sampled_from(["@deep.json", "@list.json", "@inf.json", str(HF_FOLDER), "@"])),
    st.tuples(
        st.just("--cluster"),
        st.sampled_from(
            [
                str(ROOT / "examples/clusters/h800-100g.yaml"),
                "@cluster-unknown.yaml",
                "@cluster-bad.yaml",
                "@cluster-gpu.yaml",
                "@cluster-deep.yaml",
                str(ROOT / "examples/clusters"),
            ]
        ),
    ),
    st.tuples(MEGATRON_TEXTS.map(lambda text: f"--megatron-args={text}")),
    st.tuples(
        st.sampled_from([f"--megatron-args={ROOT / 'examples/megatron/mixtral-8x22b-h100-128.sh'}", "@megatron.sh"])
    ),
    st.tuples(st.just("--gpus"), st.sampled_from(["8", "64", "128", "240", "0"])),
    st.tuples(st.sampled_from(["--global-batch", "--seq-len", "--micro-batch"]), NUMBERS),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(REAL_FLAGS, max_size=4))
def test_fuzz_cli_real_inputs(capsys, folder: Path, flags: list[tuple[str, ...]]) -> None:
    """``run`` with config.json models, cluster files and Megatron arguments: the engine starts or one line, exit 2."""
    tokens = [token for flag in flags for token in flag]
    argv = ["run", *(str(folder / t[1:]) if t.startswith("@") else t for t in tokens)]
    argv = [t.replace("--megatron-args=@megatron.sh", f"--megatron-args={folder / 'megatron.sh'}") for t in argv]
    cli_outcome("cli_real", capsys, argv)


def test_zz_report_counts() -> None:
    total = sum(v for k, v in TRIED.items() if ":" not in k)
    print(f"\nfuzz examples tried: {total} {dict(TRIED)}")
    assert total == 0 or total >= 1000
