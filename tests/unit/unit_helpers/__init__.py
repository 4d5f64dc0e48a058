"""Helpers the unit tests of several folders share (tests/unit/conftest.py puts tests/unit on sys.path): where the
repository's parts are (unit_paths), plans and rules built from small cases (plan_cases, rule_cases), a process's
output awaited line by line (live_output), a launcher started for its stacks (stack_launcher, stacks_request), and
peers that arrive after a wait's deadline (late_peers)."""
