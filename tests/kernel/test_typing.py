"""The core packages stay clean under ``mypy --strict`` (the project's typing goal)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

CORE = ("tracetrial", "criteria", "reports")


def test_core_packages_pass_mypy_strict() -> None:
    if shutil.which("mypy") is None:
        pytest.skip("mypy is part of the dev extra: pip install -e '.[dev]'")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", *CORE], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
