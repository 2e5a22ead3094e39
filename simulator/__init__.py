"""moesim's simulator: ``simulate`` one training step and get a ``Report``.

The two names load on first use (PEP 562), so importing one sub-module (``simulator.costs.kernels``) does not
load the engine, the fast paths and the report (issue #38)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.report.simulate import Report, simulate

__all__ = ["Report", "simulate"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from simulator.report import simulate as module

        return getattr(module, name)
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
