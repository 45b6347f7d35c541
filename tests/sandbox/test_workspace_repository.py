"""``workspace_repository: true``: the run's workspace committed as one commit, the same in every
run, with the frozen baseline holding its ``.git``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from apparatus.repository import init_repository
from tracetrial.errors import ApparatusError


def _workspace(root: Path) -> tuple[Path, Path]:
    ws, base = root / "workspace", root / "baseline"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('hi')\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho run\n")
    (ws / "run.sh").chmod(0o755)
    base.mkdir()
    return ws, base


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_run_gets_the_same_commit_and_the_baseline_its_git(tmp_path: Path) -> None:
    heads = []
    for n in (1, 2):
        ws, base = _workspace(tmp_path / str(n))
        init_repository(ws, base)
        assert _files(ws / ".git") == _files(base / ".git")
        heads.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True,
                                    check=True).stdout.strip())
        status = subprocess.run(["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True, check=True)
        assert status.stdout == ""  # everything committed, the executable bit included
    assert heads[0] == heads[1] and len(heads[0]) == 40


def test_no_hooks_or_templates_are_installed(tmp_path: Path) -> None:
    ws, base = _workspace(tmp_path)
    init_repository(ws, base)
    assert not (ws / ".git" / "hooks").exists()


def test_a_workspace_that_already_has_a_git_is_refused(tmp_path: Path) -> None:
    ws, base = _workspace(tmp_path)
    (ws / ".git").mkdir()
    with pytest.raises(ApparatusError, match="already has a .git"):
        init_repository(ws, base)
