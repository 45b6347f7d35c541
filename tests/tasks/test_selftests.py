"""TASK_GUIDE rule 13 over the whole suite: every pack's verifier has a ``selftest.py`` that scores
a faithful and broken evidence sets built by hand, and it passes (exit 0, no ``BAD`` case)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TASKS = Path(__file__).resolve().parents[2] / "tasks"
PACKS = sorted(p.name for p in TASKS.iterdir() if (p / "task.yaml").exists())


def test_the_suite_has_packs() -> None:
    assert len(PACKS) >= 104


@pytest.mark.parametrize("pack", PACKS)
def test_selftest_exists_and_passes(pack: str) -> None:
    selftest = TASKS / pack / "verifier" / "selftest.py"
    assert selftest.is_file(), f"{pack}: no verifier/selftest.py (rule 13)"
    proc = subprocess.run([sys.executable, "-B", str(selftest)], cwd=TASKS.parent, capture_output=True,
                          text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "BAD" not in proc.stdout, out[-3000:]
    assert "ok" in proc.stdout, f"{pack}: the self-test reported no case"
