"""``tracetrial rescore --renormalize``: events.json re-derived from the archived native records.

Real cells (the reference harness and, when installed, Claude Code and Codex, on a
multi-turn task) are run once; re-deriving twice must give byte-identical ``events.json``,
``summary.json`` and scores, equal to what the live cell wrote; a tampered archive and one
without per-turn records are refused with a precise message and nothing rewritten.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harnesses.install import tool_bin
from harnesses.rederive import RederiveError, rederive, renormalize_run
from tests.conftest import REPO
from tracetrial.archive import RunPaths, verify_manifest
from tracetrial.trace_io import dump_events

TASK = "C3-freeze-ticket-001"  # three turns, a session resume


def _harnesses() -> list[str]:
    out = ["reference"]
    out += [h for h, b in (("claude_code", "claude"), ("codex", "codex")) if tool_bin(b) is not None]
    return out


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("renorm")
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-p", "no:cacheprovider", "-q",
           f"--tt-output={out}", "-k", TASK, "--tt-harness", ",".join(_harnesses())]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    return out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracetrial_cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


def _snapshot(out: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for run in sorted(out.glob("traces/*/*/*")):
        for rel in ("events.json", "summary.json", "artifacts/llm_judge/combined_score.json", "manifest.json"):
            files[f"{run.relative_to(out)}/{rel}"] = (run / rel).read_bytes()
    return files


def test_renormalize_twice_is_byte_identical_and_equals_the_live_trace(archive: Path) -> None:
    live = _snapshot(archive)
    assert live, "no cells were archived"
    first = _cli("rescore", "--renormalize", str(archive))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "re-derived events.json and rescored" in first.stdout
    once = _snapshot(archive)
    second = _cli("rescore", "--renormalize", str(archive))
    assert second.returncode == 0, second.stdout + second.stderr
    assert _snapshot(archive) == once
    # The normalizers are pure over the archived records: the re-derived trace is the live one.
    for key in live:
        if key.endswith(("events.json", "combined_score.json")):
            assert once[key] == live[key], key
    for run in archive.glob("traces/*/*/*"):
        assert verify_manifest(run).ok


def test_rederive_matches_the_archived_events(archive: Path) -> None:
    for run in sorted(archive.glob("traces/*/*/*")):
        events = rederive(run)
        archived = json.loads(RunPaths(run).events.read_text(encoding="utf-8"))
        assert dump_events(events) == archived, run


def test_a_tampered_archive_is_refused_and_left_alone(archive: Path, tmp_path: Path) -> None:
    run = next(iter(sorted(archive.glob("traces/*/*/reference"))))
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    native = sorted((copy / "native").glob("turn-1.stdout"))[0]
    native.write_bytes(native.read_bytes() + b"{}\n")
    before = (copy / "events.json").read_bytes()
    with pytest.raises(RederiveError, match="manifest does not match"):
        renormalize_run(copy)
    assert (copy / "events.json").read_bytes() == before


def test_an_archive_without_turn_records_says_how_to_fix_it(archive: Path, tmp_path: Path) -> None:
    run = next(iter(sorted(archive.glob("traces/*/*/reference"))))
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    result = json.loads((copy / "result.json").read_text(encoding="utf-8"))
    result["turns"] = []
    (copy / "result.json").write_text(json.dumps(result), encoding="utf-8")
    with pytest.raises(RederiveError, match="predates per-turn records.*--tt-rerun"):
        rederive(copy)
