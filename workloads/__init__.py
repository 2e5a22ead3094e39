"""What must run, never how long it takes: model and layout specs, pipeline schedules, the EP plan, the
per-layer op recipes, a step's op lists, and the readers of real inputs (Hugging Face config.json, Megatron-LM
arguments, YAML). Imports topologies.errors only from outside.

Sub-packages, lowest layer first (a layer imports only the layers before it): ``ops`` (the op vocabulary) ->
``schedules`` -> ``specs`` -> ``ep`` -> ``recipes`` -> ``graph`` -> ``inputs``.
"""
