"""Predictions against published runs: the corpus of cases (corpus.py, cases/*.yaml), ``moesim validate``,
matched A/B pairs, and the kernel- and layer-level anchors. May import: experiments.common, simulator,
workloads, topologies.
"""
