"""Every test tier: under CI=true a session that skipped any test, or collected none, fails;
and no test leaves its logging configuration to the next.

A skipped test is a test that did not run (DEVELOPERS.md: in CI no test may skip). The
session then lists each skip with its reason.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
import structlog


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


class NoSkipsInCi:
    """Collects the skips of the session; at its end, fails it if there were any."""

    def __init__(self) -> None:
        self.skips: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            self.skips.append(f"{report.nodeid} ({report.when}): {reason}")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.skips and session.testscollected:
            return
        lines = ["", "CI=true: this tier must run every test, and it did not:"]
        if not session.testscollected:
            lines.append("  no test was collected")
        if self.skips:
            lines.append(f"  {len(self.skips)} skipped:")
            lines += [f"    {line}" for line in self.skips]
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("\n".join(lines), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    if _in_ci():
        config.pluginmanager.register(NoSkipsInCi(), "no-skips-in-ci")


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """A test that runs a service's main() configures logging for the whole process; the
    next test must not inherit its handlers (they wrote another test's output, or to a
    capture stream pytest had closed)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.configure(**config)
