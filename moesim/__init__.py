"""moesim as a library: simulate one training step of an MoE (or dense) model and read its report.

    import moesim
    report = moesim.simulate("paper-352b", "megascale-moe", 240)
    print(report.step_time_s, report.mfu)

``simulate`` takes presets by name or specs (``ModelSpec``, ``LayoutSpec``, ``ClusterSpec``); the presets are
``MODEL_PRESETS``, ``LAYOUT_PRESETS`` and ``CLUSTER_PRESETS``; ``hf_model`` reads a Hugging Face config.json. The
names load on first use, so ``import moesim`` costs nothing until one is asked for. This package only names the
public API: the code lives in topologies, workloads, simulator and experiments (docs/architecture.md).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.report.simulate import Report, simulate
    from topologies.cluster import CLUSTER_PRESETS, ClusterSpec, cluster_preset
    from topologies.errors import ConfigError
    from workloads.inputs.huggingface.config import load_hf_config as hf_model
    from workloads.specs.layouts import LAYOUT_PRESETS, LayoutSpec, layout_preset
    from workloads.specs.models import MODEL_PRESETS, ModelSpec, model_preset

_WHERE = {  # public name -> (module, name there)
    "simulate": ("simulator.report.simulate", "simulate"),
    "Report": ("simulator.report.simulate", "Report"),
    "ModelSpec": ("workloads.specs.models", "ModelSpec"),
    "MODEL_PRESETS": ("workloads.specs.models", "MODEL_PRESETS"),
    "model_preset": ("workloads.specs.models", "model_preset"),
    "LayoutSpec": ("workloads.specs.layouts", "LayoutSpec"),
    "LAYOUT_PRESETS": ("workloads.specs.layouts", "LAYOUT_PRESETS"),
    "layout_preset": ("workloads.specs.layouts", "layout_preset"),
    "ClusterSpec": ("topologies.cluster", "ClusterSpec"),
    "CLUSTER_PRESETS": ("topologies.cluster", "CLUSTER_PRESETS"),
    "cluster_preset": ("topologies.cluster", "cluster_preset"),
    "ConfigError": ("topologies.errors", "ConfigError"),
    "hf_model": ("workloads.inputs.huggingface.config", "load_hf_config"),
}
__all__ = [
    "CLUSTER_PRESETS",
    "LAYOUT_PRESETS",
    "MODEL_PRESETS",
    "ClusterSpec",
    "ConfigError",
    "LayoutSpec",
    "ModelSpec",
    "Report",
    "cluster_preset",
    "hf_model",
    "layout_preset",
    "model_preset",
    "simulate",
]


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module 'moesim' has no attribute {name!r}")
    module, attribute = _WHERE[name]
    return getattr(import_module(module), attribute)


def __dir__() -> list[str]:
    return __all__
