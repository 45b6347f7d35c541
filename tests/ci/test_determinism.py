"""Probe-protocol determinism on real CLIs: the same slice twice gives identical verdict vectors
and identical normalized traces (:mod:`ci.determinism`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci.determinism import compare_runs
from tests.conftest import REPO

SLICE = "E1-build-status-001 or O1-ticket-close-error-001"  # by id: new E1/O1 packs must not grow it

# Known, precisely characterised nondeterminism; a cell whose differences match one of these
# signatures completely is reported as an xfail (with the reason), never silently accepted,
# and verdict vectors must agree regardless.
#
# 1. Claude Code 2.1.220 connects MCP servers without blocking (``MCP_CONNECTION_NONBLOCKING``
#    unset): on a ``--resume`` turn its first request can leave before the task's MCP server is
#    connected, so that turn's init record says ``status: pending`` (plus a ``WaitForMcpServers``
#    tool) and the model-visible tool inventory lacks the MCP tools. Accepted: only that race's
#    consequences (init record, inventory, token counts and costs).
RACE_MARK = "/raw_event/mcp_servers/"
RACE_EVENTS = ("(native_event)", "(tool_inventory)", "(token_usage)", "(assistant_message) /raw_event/message/usage",
               "event sequence: insert", "event sequence: delete")
# 2. The gateway recorder (apparatus) sometimes records a streamed response the harness fully
#    received as "response stream closed before the upstream finished (client disconnected)"
#    (about 0.5 % of streamed Codex / reference requests): the trace's provider_request_count
#    then says failed=1. Accepted: only that field, and only when the run's records show it.
DISCONNECT = "client disconnected"
COUNT_FIELD = "(provider_request_count) /failed"


def installed(harness: str) -> bool:
    from harnesses.registry import get_harness

    return get_harness(harness).unavailable_reason() is None


def run_slice(output: Path, harnesses: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TT_NO_REPORTS": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", str(REPO / "tasks"), "-q", "-p", "no:cacheprovider",
                           "-k", SLICE, f"--tt-harness={','.join(harnesses)}", f"--tt-output={output}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1200, check=False)


def explained_by_mcp_race(lines: list[str]) -> bool:
    return any(RACE_MARK in line and "status" in line for line in lines) and all(
        any(mark in line for mark in RACE_EVENTS) for line in lines)


def explained_by_disconnect(cell: str, lines: list[str], outputs: tuple[Path, Path]) -> bool:
    if not all(COUNT_FIELD in line for line in lines):
        return False
    records = [out / "traces" / cell / "gateway" / "requests.jsonl" for out in outputs]
    return any(DISCONNECT in r.read_text(encoding="utf-8") for r in records if r.is_file())


@pytest.mark.slow
def test_probe_slice_twice_is_identical(tmp_path: Path) -> None:
    harnesses = [h for h in ("reference", "codex", "claude_code") if installed(h)]
    assert "reference" in harnesses
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        proc = run_slice(out, harnesses)
        assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    cells = sorted(p.relative_to(a / "traces").as_posix() for p in (a / "traces").glob("*/*/*"))
    assert len(cells) == 2 * len(harnesses), cells
    diffs = compare_runs(a, b, limit=10_000)
    assert [d for d in diffs if "verdicts differ" in d or "only in" in d or "version" in d
            or "run outcome" in d] == []
    by_cell: dict[str, list[str]] = {}
    for line in diffs:
        cell, detail = line.split(": ", 1)
        by_cell.setdefault(cell, []).append(detail)
    known: dict[str, str] = {}
    for cell, lines in by_cell.items():
        if cell.endswith("/claude_code") and explained_by_mcp_race(lines):
            known[cell] = "Claude Code MCP-on-resume race"
        elif explained_by_disconnect(cell, lines, (a, b)):
            known[cell] = "gateway recorded a delivered stream as 'client disconnected'"
    unexplained = {cell: lines for cell, lines in by_cell.items() if cell not in known}
    assert unexplained == {}
    if known:
        pytest.xfail(f"known nondeterminism (verdicts identical, every other trace identical): {known}")
