"""Every adapter's ``collect()`` runs on the host after the confined process ended, over
folders the agent could write (HOME, CODEX_HOME, the session and log folders, TMPDIR). A
symlink planted there — to a file or to a folder — must never make the host-side copy archive
a host file the sandbox never showed (another pack's truth, the gateway key, a user's files)
as the harness's record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apparatus.sandbox.policy import copy_record, is_record, is_record_folder
from harnesses.claude_code.adapter import ClaudeCodeAdapter
from harnesses.codex.adapter import CodexAdapter
from harnesses.deepseek.adapter import DeepSeekAdapter
from harnesses.openclaw.adapter import OpenClawAdapter
from tests.harnesses.capture import base_url, run_context

SECRET = "tt-host-private-3b1f"


def _host_files(tmp_path: Path) -> tuple[Path, Path]:
    """A private host file and a private host folder outside the run's scratch."""
    host = tmp_path / "host-private"
    (host / "dir").mkdir(parents=True)
    (host / "truth.json").write_text(f'{{"secret": "{SECRET}"}}\n', encoding="utf-8")
    (host / "dir" / "notes.jsonl").write_text(f'{{"secret": "{SECRET}"}}\n', encoding="utf-8")
    return host / "truth.json", host / "dir"


def _archived(native: Path) -> str:
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in native.rglob("*") if p.is_file())


def test_record_checks(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    (scratch / "real").mkdir(parents=True)
    (scratch / "real" / "a.jsonl").write_text("{}\n", encoding="utf-8")
    outside, folder = _host_files(tmp_path)
    os.symlink(outside, scratch / "link.jsonl")
    os.symlink(folder, scratch / "linkdir")
    os.symlink(scratch / "real", scratch / "inside")  # a link that stays inside is still not followed
    assert is_record(scratch / "real" / "a.jsonl", scratch)
    assert not is_record(scratch / "link.jsonl", scratch)
    assert not is_record(scratch / "linkdir" / "notes.jsonl", scratch)  # through a symlinked folder
    assert not is_record(scratch / "missing.jsonl", scratch)
    os.mkfifo(scratch / "fifo")
    assert not is_record(scratch / "fifo", scratch)  # never opened: a FIFO would block the host
    assert is_record_folder(scratch / "real", scratch) and not is_record_folder(scratch / "linkdir", scratch)
    assert not is_record_folder(scratch / "inside", scratch)
    assert copy_record(scratch / "link.jsonl", tmp_path / "out" / "x", scratch) is None
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["claude_code", "codex", "deepseek", "openclaw"])
def test_collect_never_follows_a_planted_symlink(name: str, tmp_path: Path) -> None:
    adapter = {"claude_code": ClaudeCodeAdapter, "codex": CodexAdapter, "deepseek": DeepSeekAdapter,
               "openclaw": OpenClawAdapter}[name]()
    ctx = run_context(tmp_path / "run", url=base_url("http://127.0.0.1:9", adapter.wire_format, "r1"))
    outside, folder = _host_files(tmp_path)
    home = ctx.home
    plants: list[tuple[Path, Path]] = []  # (link, target) in every folder collect() reads
    if name == "claude_code":
        project = home / ".claude" / "projects" / "p"
        project.mkdir(parents=True)
        (project / "real.jsonl").write_text('{"type": "user"}\n', encoding="utf-8")
        (project / "real").mkdir()
        plants += [(project / "stolen.jsonl", outside), (project / "real" / "subagents", folder),
                   (project / "real" / "tool-results.txt", outside)]
        linked = home / ".claude" / "projects" / "linked"
        plants.append((linked, folder))
    elif name == "codex":
        day = home / ".codex" / "sessions" / "2026" / "12" / "02"
        day.mkdir(parents=True)
        (day / "rollout-2026-12-02T00-00-00-real.jsonl").write_text("{}\n", encoding="utf-8")
        plants += [(day / "rollout-2026-12-02T00-00-01-stolen.jsonl", outside),
                   (home / ".codex" / "archived_sessions", folder)]
    elif name == "deepseek":
        session = home / "dsh-sessions" / "a" / "s1"
        session.mkdir(parents=True)
        plants += [(session / "session.jsonl.zstd", outside), (session / "extra.jsonl", outside)]
        (home / "tmp" / "dsh-subprocess-1").mkdir(parents=True)
        plants += [(home / "tmp" / "dsh-subprocess-1" / "out.txt", outside), (home / "tmp" / "dsh-subprocess-2", folder)]
    else:
        agent = home / "openclaw-state" / "agents" / "main" / "agent"
        agent.mkdir(parents=True)
        plants += [(agent / "openclaw-agent.sqlite", outside), (home / "openclaw-logs", folder)]
    for link, target in plants:
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)
    copied = adapter.collect(ctx)
    assert SECRET not in _archived(ctx.paths.native)
    assert all(not p.is_symlink() for p in copied)
    if name == "claude_code":
        assert [p.name for p in copied] == ["real.jsonl"]
    if name == "codex":
        assert [p.name for p in copied] == ["rollout-2026-12-02T00-00-00-real.jsonl"]
