"""Shared fixtures of TraceTrial's own tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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
