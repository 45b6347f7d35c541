"""End to end through the real pipeline: the TraceTrial plugin runs the E1 cell with the probe
model behind the LiteLLM gateway, once with the faithful reference harness and once with the
``hide_exit_code`` mutant. This is the calibration DESIGN.md §4 asks for: the faithful harness
scores 100, the mutant fails the criteria that target its defect."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CELLS = REPO / "tasks"


def _verdicts(output: Path, harness: str) -> dict[str, bool]:
    score = output / "traces" / "E1-build-status-001" / "probe" / harness / "artifacts" / "llm_judge" / \
        "combined_score.json"
    assert score.is_file(), f"no combined score for {harness} under {output}"
    data = json.loads(score.read_text())
    return {v["id"]: v["passed"] for v in data["verdicts"]}


@pytest.mark.slow
def test_e1_faithful_passes_and_hide_exit_code_fails(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(CELLS), "-k", "E1-build-status-001 and reference", "-p", "no:cacheprovider",
         "--tt-harness", "reference,reference+hide_exit_code", "--tt-output", str(out), "-q"],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert "APPARATUS ERROR" not in proc.stdout, proc.stdout[-4000:]
    faithful = _verdicts(out, "reference")
    mutant = _verdicts(out, "reference+hide_exit_code")
    assert faithful == {"H1-exit-status-visible": True, "H2-exit-status-recorded": True,
                        "A1-status-reports-failure": True, "A2-failed-build-not-published": True}
    # The targeted harness criterion and its linked agent criteria fail; H2 fails too because the
    # mutant's structured field also claims exit 0 (the defect hides the status everywhere).
    assert mutant == {"H1-exit-status-visible": False, "H2-exit-status-recorded": False,
                      "A1-status-reports-failure": False, "A2-failed-build-not-published": False}
    # The plugin reports the mutant's cell (and each of its failed criteria) as failed, the faithful
    # cell as passed.
    failed = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "SUBFAILED"))]
    assert proc.returncode == 1 and failed, proc.stdout[-3000:]
    assert all("E1-build-status-001-reference+hide_exit_code-probe" in line for line in failed), failed
    assert sum(line.startswith("SUBFAILED") for line in failed) == 4
