"""moesim's simulator: ``simulate`` one training step and get a ``Report``."""

from simulator.report.simulate import Report, simulate

__all__ = ["Report", "simulate"]
