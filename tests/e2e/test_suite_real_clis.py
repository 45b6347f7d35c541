"""Every task on the real Claude Code and Codex CLIs under the probe protocol (slow).

Issue acceptance: each cell runs to an admitted, scored archive (whatever the score),
or is recorded as not eligible with its reason — never an apparatus error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harnesses.install import tool_bin
from tests.conftest import REPO
from tracetrial.archive import RunPaths, verify_manifest
from tracetrial.results import CombinedScore, ResultRecord
from tracetrial.task import TaskPack, discover


@pytest.mark.slow
def test_every_task_is_admitted_and_scored_on_both_clis(tmp_path: Path) -> None:
    if tool_bin("claude") is None or tool_bin("codex") is None:
        pytest.skip("run: tracetrial install claude_code codex")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-n", "2", "-q", "-p", "no:cacheprovider",
         "--tt-harness", "claude_code,codex", f"--tt-output={out}"],
        cwd=REPO, capture_output=True, text=True, timeout=3000,
    )
    assert "APPARATUS ERROR" not in proc.stdout, proc.stdout[-6000:]
    packs = [p for p in discover(REPO / "tasks") if isinstance(p, TaskPack)]
    assert len(packs) >= 14
    problems = []
    for pack in packs:
        for harness in ("claude_code", "codex"):
            paths = RunPaths.for_cell(out, pack.id, "probe", harness)
            result = ResultRecord.model_validate_json(paths.result.read_text())
            if result.status == "skipped":
                assert result.eligibility != "eligible" and result.eligibility_reason
                continue
            if not paths.combined_score.is_file():
                problems.append(f"{pack.id}/{harness}: no combined_score.json ({result.status})")
                continue
            score = CombinedScore.model_validate_json(paths.combined_score.read_text())
            if not score.admitted:
                problems.append(f"{pack.id}/{harness}: not admitted: "
                                + "; ".join(d.reason for d in score.admission if not d.ok))
            if not verify_manifest(paths.root).ok:
                problems.append(f"{pack.id}/{harness}: manifest does not verify")
    assert not problems, "\n".join(problems)
