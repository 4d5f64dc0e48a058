"""Parse: SageMaker's config files, the environment and this host into frozen, validated values.

training_config.load_training_config reads /opt/ml/input/config/*.json (with SM_* overrides) and a built-in
program's launch rules; host_facts.gather reads this host's cores, GPUs and interfaces. Everything the planner
needs is decided here: planning starts from these values and never parses again.
"""
