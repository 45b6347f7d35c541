"""Shared fixtures of TraceTrial's own tests."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import docker  # noqa: F401  (see below)
import matplotlib
import pytest

matplotlib.use("Agg")  # the reports' heatmap backend (headless)
import matplotlib.pyplot  # noqa: E402, F401  (see below)

# pytester's in-process sessions restore sys.modules after each run: a module first imported
# inside one (the docker SDK and its requests, imported lazily by the docker backend; numpy and
# matplotlib.pyplot, imported by the reports' heatmap at an inner session's end) is
# imported afresh by the next, while objects cached from the first keep the old classes —
# requests then fails with "You can only merge into CookieJar", numpy with "cannot load module
# more than once per process", pyplot with "Single argument to subplot must be a three-digit
# integer, not GridSpec". Importing them here, before any
# in-process session, keeps one copy for all of them.

pytest_plugins = ["pytester"]


def _still_ignored(_signum: int, _frame: Any) -> None:
    """Stands in for SIG_IGN in this process only (see :func:`_terminal_signals_default_in_children`)."""


def _terminal_signals_default_in_children() -> None:
    """A suite started as a background job of a non-interactive shell (``nohup … &``, some CI
    runners) inherits SIGINT and SIGQUIT ignored (SIGHUP too under ``nohup``), and so would every
    process the tests start: the E8 stand-ins' Ctrl-C and hang-up on a terminal would never reach
    their script. A handler, unlike SIG_IGN, is reset at ``exec``: the children start with the
    default while this process goes on ignoring them. (The apparatus's own commands get the
    default from the supervisor; this covers what the tests start with ``subprocess``.)"""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, _still_ignored)


_terminal_signals_default_in_children()

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_PACK = REPO / "tasks" / "E1-build-status-001"


@pytest.fixture
def example_pack(tmp_path: Path) -> Path:
    """A private copy of the example task pack, safe to break."""
    dest = tmp_path / "tasks" / EXAMPLE_PACK.name
    shutil.copytree(EXAMPLE_PACK, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run suites marked slow (full calibration matrix, every task on every CLI)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import os

    if config.getoption("--run-slow") or os.environ.get("TT_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow suite: run with --run-slow (CI does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
