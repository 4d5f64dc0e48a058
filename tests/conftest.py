"""Shared by every test directory.

TESTS_MUST_NOT_SKIP=1 (set where the tests run inside the image) turns a skip into a failure: there, a
missing MXNet, Horovod or mpirun is a broken image, not a reason to skip.
"""

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("TESTS_MUST_NOT_SKIP") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where nothing may skip (TESTS_MUST_NOT_SKIP=1): {reason}"
