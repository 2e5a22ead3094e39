"""Shared by every experiment: argument types, output paths and atomic writes, progress bars, the process
pool, plotting helpers, presets, results/REPRODUCTION.md sections, and per-layer / per-stage cost tables.
May import: simulator, workloads, topologies.
"""
