"""One end-to-end cell per sandbox backend (issue 11 §4), plus the same task with
``network: none``: the verdicts must not depend on the backend.

A cell runs exactly as a user runs it (``pytest tasks/ --tt-sandbox <backend>``); the
manifest must record the backend that confined it, and a ``network: none`` copy of the
task must score the same while the agent has no network beyond the tunnelled gateway.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from apparatus.sandbox import BwrapSandbox, docker_reason
from harnesses.install import tool_bin
from tests.conftest import REPO
from tracetrial.archive import RunPaths
from tracetrial.results import CombinedScore

TASK = "E1-build-status-001"
NO_BWRAP = pytest.mark.skipif(BwrapSandbox().available() is not None, reason="bwrap does not run here")
NO_DOCKER = pytest.mark.skipif(docker_reason() is not None, reason=f"docker: {docker_reason()}")
BACKENDS = [pytest.param("local", id="local"), pytest.param("bwrap", id="bwrap", marks=NO_BWRAP),
            pytest.param("docker", id="docker", marks=NO_DOCKER)]


def _harnesses() -> str:
    # Codex runs its own bubblewrap inside: the nested case the docker backend must allow.
    return "reference,codex" if tool_bin("codex") is not None else "reference"


def _run(tasks: Path, output: Path, backend: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks" / "test_cells.py"), "-p", "no:cacheprovider", "-q",
           f"--tt-tasks={tasks}", f"--tt-output={output}", f"--tt-sandbox={backend}",
           "--tt-harness", _harnesses(), "-k", TASK]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)


def _verdicts(output: Path, harness: str) -> dict[str, bool]:
    paths = RunPaths.for_cell(output, TASK, "probe", harness)
    score = CombinedScore.model_validate_json(paths.combined_score.read_text())
    assert score.admitted, [d.reason for d in score.admission if not d.ok]
    return {v.id: v.passed for v in score.verdicts}


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_cell_per_backend(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "out"
    proc = _run(REPO / "tasks", out, backend)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    for harness in _harnesses().split(","):
        verdicts = _verdicts(out, harness)
        assert verdicts and all(verdicts.values()), verdicts
        record = json.loads(RunPaths.for_cell(out, TASK, "probe", harness).result.read_text())
        assert record["resolved_config"]["sandbox"] == backend
        detail = record["resolved_config"]["sandbox_detail"]
        assert detail["backend"] == backend
        if backend == "docker":
            assert detail["image"].startswith("tracetrial-harnesses:") and detail["image_id"].startswith("sha256:")


@pytest.mark.parametrize("backend", [p for p in BACKENDS if p.id != "local"])
def test_network_none_cell_scores_the_same(tmp_path: Path, backend: str) -> None:
    """The task with ``network: none``: the harness still reaches the gateway (tunnel), and
    the verdicts equal the loopback run's."""
    tasks = tmp_path / "tasks"
    shutil.copytree(REPO / "tasks" / TASK, tasks / TASK)
    iso = tasks / TASK / "isolation.yaml"
    data = yaml.safe_load(iso.read_text()) if iso.exists() else {}
    data = {**(data or {}), "network": "none"}
    iso.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    proc = _run(tasks, out, backend)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    for harness in _harnesses().split(","):
        verdicts = _verdicts(out, harness)
        assert verdicts and all(verdicts.values()), verdicts
        record = json.loads(RunPaths.for_cell(out, TASK, "probe", harness).result.read_text())
        assert record["resolved_config"]["sandbox_detail"]["network"] == "none"


def test_network_none_needs_a_real_sandbox(tmp_path: Path) -> None:
    """On the local backend a ``network: none`` cell is skipped with the reason, never run open."""
    tasks = tmp_path / "tasks"
    shutil.copytree(REPO / "tasks" / TASK, tasks / TASK)
    (tasks / TASK / "isolation.yaml").write_text("network: none\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "tasks" / "test_cells.py"), "-p", "no:cacheprovider", "-q", "-rs",
         f"--tt-tasks={tasks}", f"--tt-output={tmp_path / 'out'}", "--tt-sandbox=local", "--tt-harness", "reference"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "network: none, which the local sandbox cannot provide" in proc.stdout
