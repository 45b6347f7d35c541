"""A run's workspace as a git repository (``task.yaml`` ``workspace_repository: true``).

A pack cannot carry a ``.git`` folder (git refuses the path inside the project's own repository),
yet a task may need one: the repository metadata is what a destructive-action task protects
(Codex's sandbox keeps ``.git`` read-only by itself), and coding tasks run in checkouts. Before the
run the apparatus commits the copied workspace as one commit, with a fixed author, committer and
dates and no host configuration, so the objects and the history are the same in every run; the
frozen baseline gets a copy of that ``.git`` so a verifier can compare it byte for byte.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tracetrial.errors import ApparatusError

__all__ = ["init_repository"]

#: Author, committer and dates of the baseline commit (fixed: the same objects in every run).
_IDENTITY = {
    "GIT_AUTHOR_NAME": "TraceTrial", "GIT_AUTHOR_EMAIL": "baseline@tracetrial.invalid",
    "GIT_COMMITTER_NAME": "TraceTrial", "GIT_COMMITTER_EMAIL": "baseline@tracetrial.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}


def _git(workspace: Path, *args: str) -> None:
    # No host or user configuration may leak in (hooks, templates, signing, default branch).
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workspace), "LANG": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, **_IDENTITY}
    proc = subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false",
                           "-c", "core.hooksPath=/dev/null", *args], cwd=workspace, env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    if proc.returncode != 0:
        raise ApparatusError(f"workspace repository: git {' '.join(args)} failed: {proc.stderr.strip()[-400:]}")


def init_repository(workspace: Path, baseline: Path) -> None:
    """Commit ``workspace`` as a repository's first commit and copy its ``.git`` into ``baseline``."""
    if shutil.which("git") is None:
        raise ApparatusError("workspace repository: the task needs git on this machine (apt-get install git)")
    if (workspace / ".git").exists():
        raise ApparatusError("workspace repository: the pack's workspace already has a .git")
    _git(workspace, "init", "-q", "--template=")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-q", "--no-verify", "-m", "Baseline of the task's workspace")
    shutil.copytree(workspace / ".git", baseline / ".git", symlinks=True)
