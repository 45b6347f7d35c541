"""The benchmark's own validity test on the real suite (slow; CI runs it with --run-slow).

Every task scores 100/100 with the faithful reference harness under the probe
protocol, and each seeded-defect mutant flips exactly the criteria the task
declares for it (``calibration.mutants`` in task.yaml) — nothing elsewhere.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_suite_is_calibrated(tmp_path: Path) -> None:
    out = tmp_path / "calibration"
    proc = subprocess.run(
        [sys.executable, "-m", "tracetrial_cli.main", "calibrate", "--tasks", str(REPO / "tasks"),
         "--output", str(out), "-n", "2", "--full"],
        cwd=REPO, capture_output=True, text=True, timeout=3600,
    )
    table = proc.stdout[proc.stdout.find("variant "):]
    assert proc.returncode == 0, table[-8000:] + proc.stderr[-2000:]
    assert "NOT calibrated" not in table and "0 problem(s)" in table
