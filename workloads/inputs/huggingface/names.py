"""Models by name beyond the presets: a Hugging Face config.json shipped in examples/models (``qwen3-30b-a3b``) or
one by its hub id (``Qwen/Qwen3-30B-A3B``): the local Hugging Face cache's, else the shipped config written from
that repository (``SHIPPED_REPOSITORIES``). Nothing is downloaded: where neither is on this machine, the error says
how to get it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from workloads.inputs.bounded_read import read_bounded

SHIPPED = Path(__file__).resolve().parents[3] / "examples" / "models"  # a source checkout (pip install -e .)
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
JSON_SUFFIX = ".json"


# The hub repository each shipped config.json was written from (examples/models/README.md's table; a test keeps
# the two alike), by lower-case hub id: ``--model Org/Name`` takes the shipped file when the cache has none.
SHIPPED_REPOSITORIES: dict[str, str] = {
    "bigscience/bloom": "bloom-176b",
    "deepseek-ai/deepseek-v2-lite": "deepseek-v2-lite",
    "deepseek-ai/deepseek-v3": "deepseek-v3",
    "deepseek-ai/deepseek-v3.2-exp": "deepseek-v3.2",
    "deepseek-ai/deepseek-v4-flash": "deepseek-v4-flash",
    "baidu/ernie-4.5-21b-a3b-pt": "ernie-4.5-21b-a3b",
    "tiiuae/falcon-180b": "falcon-180b",
    "google/gemma-2-27b": "gemma-2-27b",
    "zai-org/glm-4.5": "glm-4.5",
    "zai-org/glm-4.5-air": "glm-4.5-air",
    "eleutherai/gpt-neox-20b": "gpt-neox-20b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    "moonshotai/kimi-k2-instruct": "kimi-k2",
    "meta-llama/llama-3.1-405b": "llama-3.1-405b",
    "meta-llama/llama-3.1-70b": "llama-3.1-70b",
    "meta-llama/llama-3.1-8b": "llama-3.1-8b",
    "meta-llama/llama-4-maverick-17b-128e": "llama-4-maverick",
    "meta-llama/llama-4-scout-17b-16e": "llama-4-scout",
    "minimaxai/minimax-m2": "minimax-m2",
    "mistralai/mixtral-8x22b-v0.1": "mixtral-8x22b",
    "mistralai/mixtral-8x7b-v0.1": "mixtral-8x7b",
    "nvidia/nvidia-nemotron-3-nano-30b-a3b-bf16": "nemotron-3-nano-30b-a3b",
    "nvidia/nemotron-4-340b-base": "nemotron-4-340b",
    "allenai/olmoe-1b-7b-0924": "olmoe-1b-7b",
    "qwen/qwen2-57b-a14b": "qwen2-57b-a14b",
    "qwen/qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen/qwen3-30b-a3b": "qwen3-30b-a3b",
    "qwen/qwen3-32b": "qwen3-32b",
    "qwen/qwen3-next-80b-a3b": "qwen3-next-80b-a3b",
}


def shipped_for(hub_id: str) -> Path | None:
    """The shipped config.json written from the hub repository ``hub_id`` (any case), if one is."""
    stem = SHIPPED_REPOSITORIES.get(hub_id.lower())
    if stem is None:
        return None
    path = SHIPPED / f"{stem}{JSON_SUFFIX}"
    return path if path.is_file() else None


def hub_cache() -> Path:
    """The Hugging Face hub cache folder, as huggingface_hub resolves it: HF_HUB_CACHE, else HF_HOME/hub, else
    ~/.cache/huggingface/hub (huggingface_hub constants.py)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def cached_config(hub_id: str) -> Path | None:
    """``hub_id``'s config.json in the local hub cache: the snapshot its refs/main names, else the newest one."""
    repo = hub_cache() / f"models--{hub_id.replace('/', '--')}"
    main = repo / "refs" / "main"
    if main.is_file():
        revision = read_bounded("model", main, "json_bytes").strip()  # a commit hash; bounded like every input
        candidate = repo / "snapshots" / revision / "config.json"
        if candidate.is_file():
            return candidate
    snapshots = sorted(repo.glob("snapshots/*/config.json"), key=lambda path: path.stat().st_mtime)
    return snapshots[-1] if snapshots else None


def find_config(name: str) -> Path | None:
    """A config.json for a model ``name`` that is not a preset: shipped by that name, else by its hub id the local
    cache's, else the shipped one written from that repository (``shipped_for``)."""
    shipped = SHIPPED / f"{name.lower()}.json"
    try:
        if shipped.is_file():
            return shipped
    except (OSError, ValueError):  # a name too long for a file, a NUL byte: no shipped config
        return None
    if not _HUB_ID.match(name):
        return None
    return cached_config(name) or shipped_for(name)


def shipped_names() -> list[str]:
    """The model names examples/models ships a config.json for (none outside a source checkout)."""
    return sorted(path.stem for path in SHIPPED.glob(f"*{JSON_SUFFIX}")) if SHIPPED.is_dir() else []


def how_to_get(name: str, presets: tuple[str, ...] = ()) -> str:
    """What to do when ``name`` is neither a preset nor a config.json on this machine: the nearest names among
    ``presets`` and the shipped configs first (``llama3-8b``: did you mean llama-3.1-8b)."""
    import difflib  # NOTE: loaded only for this error

    key = name.rsplit("/", 1)[-1].lower()
    names = list(dict.fromkeys([*presets, *shipped_names()]))
    near = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    # a shipped model YAML (written from Megatron-LM's flags, as Nemotron 3 Super's), passed by its path, where it is
    # nearer than every preset and config.json
    stems = [path.stem for path in SHIPPED.glob("*.yaml")] if SHIPPED.is_dir() else []
    files = difflib.get_close_matches(key, stems, n=1, cutoff=0.6)

    def ratio(other: str) -> float:
        return difflib.SequenceMatcher(None, key, other).ratio()

    if files and (not near or ratio(files[0]) > ratio(near[0])):
        near = [f"examples/models/{files[0]}.yaml", *near[:2]]
    others = f" (or {', '.join(near[1:])})" if len(near) > 1 else ""
    mean = f"did you mean {near[0]}{others}? (examples/models holds the shipped models); " if near else ""
    if _HUB_ID.match(name):
        return (
            f"{mean}{name!r} is not in the local Hugging Face cache ({hub_cache()}); fetch its config with "
            f"`huggingface-cli download {name} config.json` (or pass the config.json's path)"
        )
    return f"{mean}or give a Hugging Face config.json path, a hub id in the local cache (Org/Name), or a model YAML"


def is_hf_config_path(value: object) -> bool:
    """A path ending in .json, or a folder holding a config.json."""
    if not isinstance(value, (str, Path)):
        return False
    path = Path(value)
    try:
        return str(value).lower().endswith(JSON_SUFFIX) or (path.is_dir() and (path / "config.json").is_file())
    except (OSError, ValueError):  # a name too long for a path, a NUL byte, ...: not a folder
        return False
