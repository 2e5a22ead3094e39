"""Reproductions the paper does not have: EP across nodes, routing skew, pipeline schedules, the scale-up
domain, the r ratio. May import: experiments.common, experiments.search, simulator, workloads, topologies.
"""
