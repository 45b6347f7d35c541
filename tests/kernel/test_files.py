"""Atomic writes: a reader sees the old file or the new one, never a part; no temp file stays."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tracetrial.files import atomic_write_text


def test_writes_creates_parents_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "x.json"
    assert atomic_write_text(target, "one\n") == target
    atomic_write_text(target, "two\n", fsync=True)
    assert target.read_text(encoding="utf-8") == "two\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.json"]


def test_mode_is_what_a_plain_open_gives(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("x")
    atomic = atomic_write_text(tmp_path / "atomic", "x")
    assert stat.S_IMODE(os.stat(atomic).st_mode) == stat.S_IMODE(os.stat(plain).st_mode)


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = atomic_write_text(tmp_path / "x", "old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "\ud800")  # a lone surrogate cannot be encoded
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x"]
