"""Symbolic links in a task pack (hostile-pack hardening): a link is allowed only inside
``workspace/``, relative, naming something inside it; it is hashed and copied as a link, never as
what it names. A link to ``/``, to the pack's truth or to a host file would otherwise be copied
(with what it names) into every run's workspace, or make the digest walk the whole file system."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tracetrial.errors import TaskPackErrors
from tracetrial.task import load_task, pack_digest


def _errors(pack: Path) -> str:
    with pytest.raises(TaskPackErrors) as info:
        load_task(pack)
    return str(info.value)


@pytest.mark.parametrize(("where", "target", "message"), [
    ("workspace/root", "/", "points outside the workspace"),
    ("workspace/host", "/etc/hostname", "points outside the workspace"),
    ("workspace/truth", "../truth.json", "points outside the workspace"),
    ("workspace/sub/up", "../../verifier", "points outside the workspace"),
    ("workspace/self", ".", "points outside the workspace"),
    ("verifier/extra.py", "../workspace/x.txt", "outside the workspace"),
])
def test_a_link_that_leaves_the_workspace_is_refused(example_pack: Path, where: str, target: str,
                                                     message: str) -> None:
    link = example_pack / where
    link.parent.mkdir(parents=True, exist_ok=True)
    (example_pack / "workspace" / "x.txt").write_text("x")
    link.symlink_to(target)
    msg = _errors(example_pack)
    assert message in msg and where in msg


def test_a_link_inside_the_workspace_is_kept_and_hashed_as_a_link(example_pack: Path, tmp_path: Path) -> None:
    ws = example_pack / "workspace"
    (ws / "data" / "2026-12").mkdir(parents=True)
    (ws / "data" / "2026-12" / "ledger.csv").write_text("a,b\n")
    (ws / "reports").mkdir()
    (ws / "reports" / "current").symlink_to("../data/2026-12")
    task = load_task(example_pack)
    before = task.digest
    (ws / "reports" / "current").unlink()
    (ws / "reports" / "current").symlink_to("../data")  # same files reachable, another link
    assert pack_digest(example_pack) != before
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy, symlinks=True)  # how a run copies the workspace
    assert (copy / "reports" / "current").is_symlink() and os.readlink(copy / "reports" / "current") == "../data"


def test_the_digest_does_not_walk_into_a_link(example_pack: Path) -> None:
    ws = example_pack / "workspace"
    (ws / "big").mkdir()
    (ws / "big" / "f.txt").write_text("x")
    (ws / "alias").symlink_to("big")
    digest = pack_digest(example_pack)
    (ws / "big" / "g.txt").write_text("y")  # changes the folder, not the link
    assert pack_digest(example_pack) != digest  # through big/, once
    (ws / "alias").unlink()
    (ws / "alias").symlink_to("big/")
    assert load_task(example_pack).digest != digest
