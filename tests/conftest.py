"""Shared fixtures of TraceTrial's own tests."""

from __future__ import annotations

import shutil
from pathlib import Path

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
