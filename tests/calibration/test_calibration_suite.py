"""The benchmark's own validity test on the real suite (slow; CI runs it with --run-slow).

Every task scores 100/100 with the faithful reference harness under the probe
protocol, and each seeded-defect mutant flips exactly the criteria the task
declares for it (``calibration.mutants`` in task.yaml) — nothing elsewhere — with the
agent failures it causes attributed to the harness (TASK_GUIDE rule 10).

Incremental: the committed record ``ci/calibration/probe.json`` keys each task's last
calibration by its pack digest and the reference harness version. Here the tasks whose
key changed (new or edited packs, an edited reference harness or mutant list) are
measured, plus a sample of unchanged ones (apparatus drift); ``TT_CALIBRATION_FULL=1``
measures the full matrix. The record is copied, never rewritten by the test: to commit
new results, run ``tracetrial calibrate --record ci/calibration/probe.json -n 2``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

RECORD = REPO / "ci" / "calibration" / "probe.json"
#: Unchanged tasks re-measured per run, chosen by the commit (a different few each commit).
DRIFT_SAMPLE = 3


def head_commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "0"


@pytest.mark.slow
def test_suite_is_calibrated(tmp_path: Path) -> None:
    out = tmp_path / "calibration"
    record = tmp_path / "probe.json"
    if RECORD.is_file():
        shutil.copy(RECORD, record)
    argv = [sys.executable, "-m", "tracetrial_cli.main", "calibrate", "--tasks", str(REPO / "tasks"),
            "--output", str(out), "-n", "2", "--full", "--record", str(record)]
    if os.environ.get("TT_CALIBRATION_FULL") == "1":
        argv.append("--full-matrix")
    else:
        argv += ["--sample", str(DRIFT_SAMPLE), "--sample-seed", head_commit()]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=3600, check=False)
    table = proc.stdout[proc.stdout.find("variant "):]
    assert proc.returncode == 0, proc.stdout[:400] + table[-8000:] + proc.stderr[-2000:]
    assert "NOT calibrated" not in table and "0 problem(s)" in table
    assert "calibration record" in proc.stdout  # the incremental path was taken and said what it ran
