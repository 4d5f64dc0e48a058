"""Plan: pure functions from the parsed configuration and this host's facts to the exact command and
environment, as data, each decision a small named rule with its reason. job_plan.make_plan composes them:
layout.py, programs.py, env_rules.py and the backend given (backend.py, the interface; backends/registry.py
chooses it)."""
