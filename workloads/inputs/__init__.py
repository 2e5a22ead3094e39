"""Real inputs into specs: Hugging Face config.json (huggingface/), Megatron-LM arguments (megatron*.py: the
flag table, the model, the pipeline layout, the job), and moesim's YAML files. May import every other workloads
sub-package and topologies.
"""
