"""Shared by every test directory.

TESTS_MUST_NOT_SKIP=1 (set where the tests run inside the image, and by CI's host runs) turns a skip into a
failure: in the image a missing MXNet, Horovod or mpirun is a broken image, not a reason to skip; on CI's host (root,
Docker) a tmpfs or a namespace the test cannot make is a broken machine. Both kinds of skip count: a test's
own (a skip mark, a fixture's pytest.skip) and a whole module's at collection (a module-level
pytest.importorskip), which would otherwise leave the module's tests out of the run without a word.
"""

import os

import pytest


def must_not_skip() -> bool:
    return os.environ.get("TESTS_MUST_NOT_SKIP") == "1"


def skip_reason(report) -> str:
    return report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and must_not_skip():
        report.outcome = "failed"
        report.longrepr = f"skipped where nothing may skip (TESTS_MUST_NOT_SKIP=1): {skip_reason(report)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and must_not_skip():
        # A failed collection report is a collection error: pytest reports it and the run fails.
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid} skipped at collection where nothing may skip "
                           f"(TESTS_MUST_NOT_SKIP=1): {skip_reason(report)}")
