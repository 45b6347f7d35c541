"""Every package stays clean under ``mypy --strict`` (the project's typing rule)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

#: Every package of the repository (DESIGN §3), the whole of pyproject.toml's [tool.mypy] packages.
CORE = ("tracetrial", "apparatus", "harnesses", "criteria", "reports", "ci", "tracetrial_fixtures", "tracetrial_cli")


def test_core_packages_pass_mypy_strict() -> None:
    if shutil.which("mypy") is None:
        pytest.skip("mypy is part of the dev extra: pip install -e '.[dev]'")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", *CORE], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
