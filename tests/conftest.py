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
