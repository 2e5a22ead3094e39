"""moesim's simulator: ``simulate`` one training step and get a ``Report``."""

from simulator.report import Report, simulate

__all__ = ["Report", "simulate"]
