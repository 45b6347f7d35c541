"""Tasks on the real Claude Code and Codex CLIs under the probe protocol (slow).

Issue acceptance: each cell runs to an admitted, scored archive (whatever the score),
or is recorded as not eligible with its reason — never an apparatus error.

The matrix grows as tasks × CLIs, so a CI run takes a sample of the tasks chosen by the
commit (:func:`ci.sampling.sample_ids`; successive commits cover different tasks), plus any
task whose pack changed since the last commit; ``TT_REAL_CLI_FULL=1`` runs every task.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci.sampling import sample_ids
from harnesses.install import tool_bin
from tests.conftest import REPO
from tracetrial.archive import RunPaths, verify_manifest
from tracetrial.results import CombinedScore, ResultRecord
from tracetrial.task import TaskPack, discover

#: Tasks per CI run (each on both CLIs).
SAMPLE = 10


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def selected(packs: list[TaskPack]) -> list[TaskPack]:
    """The packs this run measures: all with ``TT_REAL_CLI_FULL=1``, else changed + a sample."""
    if os.environ.get("TT_REAL_CLI_FULL") == "1":
        return packs
    changed = set(_git("diff", "--name-only", "HEAD~1", "--", "tasks").splitlines())
    touched = {p.id for p in packs if any(c.startswith(f"tasks/{p.root.name}/") for c in changed)}
    ids = touched | set(sample_ids([p.id for p in packs], SAMPLE, _git("rev-parse", "HEAD") or "0"))
    return [p for p in packs if p.id in ids]


@pytest.mark.slow
def test_every_task_is_admitted_and_scored_on_both_clis(tmp_path: Path) -> None:
    if tool_bin("claude") is None or tool_bin("codex") is None:
        pytest.skip("run: tracetrial install claude_code codex")
    all_packs = [p for p in discover(REPO / "tasks") if isinstance(p, TaskPack)]
    assert len(all_packs) >= 14
    packs = selected(all_packs)
    assert packs and len(packs) >= min(SAMPLE, len(all_packs))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-n", "2", "-q", "-p", "no:cacheprovider",
         "--tt-harness", "claude_code,codex", f"--tt-output={out}", "-k", " or ".join(p.id for p in packs)],
        cwd=REPO, capture_output=True, text=True, timeout=3000, check=False,
    )
    assert "APPARATUS ERROR" not in proc.stdout, proc.stdout[-6000:]
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
