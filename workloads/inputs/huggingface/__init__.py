"""Hugging Face Transformers config.json files as ModelSpecs: the dispatch by model_type and the MoE families
(config.py), the hybrids (hybrid.py), the classic dense decoders (classic.py), and where a model named by its file,
shipped example or hub id is found (names.py). May import workloads.specs and topologies.
"""
