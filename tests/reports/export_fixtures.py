"""Inputs for the export tests: a hand-built cell (fast) and real probe cells (slow, run once).

The hand-built cell is what a Claude-Code-like harness leaves in an archive: a main agent that
declares tools at the provider boundary, runs a tool, spawns a sub-agent through a tool call,
compacts its context and answers; the gateway saw one request per model call.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reports.export.calls import CellArchive
from tests.conftest import REPO
from tracetrial.results import CellIdentity, ResultRecord
from tracetrial.trace import (
    AssistantMessageEvent,
    ContextCompactionEvent,
    ConversationTurnStartedEvent,
    EventBase,
    RunStartedEvent,
    SubagentLifecycleEvent,
    ToolCall,
    ToolDeclaration,
    ToolEvent,
    ToolInventoryEvent,
    ToolResult,
)

RUN = "T1-demo-001--fake-probe--0001"
SECRET = "sk-tt-planted-secret-9f8e7d6c5b4a"
T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
TOOLS = [ToolDeclaration(name="Bash", description="run a command", input_schema={"type": "object"}),
         ToolDeclaration(name="Agent", description="start a helper", input_schema={"type": "object"})]


def _record(index: int, results: list[str], *, tools: list[str] | None = None) -> dict[str, Any]:
    return {
        "index": index, "run_id": RUN, "path": "/v1/messages", "wire_format": "anthropic", "model": "probe",
        "stream": True, "started_at": (T0 + timedelta(seconds=index)).isoformat(), "duration_ms": 100.0,
        "status": 200, "error": None,
        "tools": [{"name": n, "type": "function", "description": None, "input_schema": {}, "namespace": None}
                  for n in (tools or ["Bash", "Agent"])],
        "inventory_present": True, "inventory_complete": True, "inventory_fingerprint": "f",
        "tool_results": [{"id": r, "is_error": False, "size": 1, "sha256": "0", "content": "x",
                          "content_truncated": False} for r in results],
        "usage": {"input_tokens": 100 + index, "output_tokens": 10, "cache_read_tokens": 40,
                  "cache_write_tokens": 5, "reasoning_tokens": None},
        "body_sha256": "0", "last_user_text": f"user text {index} {SECRET}",
    }


def fake_cell(root: Path | None = None) -> CellArchive:
    """Main: Bash(c1) -> Agent(c2, spawns child 'c2') -> compaction -> answer; child: Bash(c3) -> answer."""
    base: dict[str, Any] = {"run_id": RUN, "timestamp": T0, "source": "native:fake/stdout"}
    main: dict[str, Any] = {**base, "principal_id": "main", "principal_role": "main"}
    child: dict[str, Any] = {**base, "principal_id": "c2", "parent_principal_id": "main", "principal_role": "child"}
    events: list[EventBase] = [
        RunStartedEvent(seq=1, **{**base, "source": "runner"}),
        ConversationTurnStartedEvent(seq=2, user_text="do the job", **{**base, "source": "runner"}),
        ToolEvent(seq=3, tool_call=ToolCall(id="c1", name="Bash", arguments={"command": f"echo {SECRET}"}),
                  tool_result=ToolResult(content=f"out {SECRET}", exit_code=0), **main),
        ToolEvent(seq=4, tool_call=ToolCall(id="c2", name="Agent", arguments={"prompt": "help"}),
                  tool_result=ToolResult(content="helper done"), **main),
        SubagentLifecycleEvent(seq=5, action="started", child_principal_id="c2", **child),
        ToolEvent(seq=6, tool_call=ToolCall(id="c3", name="Bash", arguments={"command": "ls"}),
                  tool_result=None, **child),
        AssistantMessageEvent(seq=7, content="child answer", content_kind="text", **child),
        ContextCompactionEvent(seq=8, native_event_type="compact_boundary", trigger="auto",
                               summary="summary of the work so far", summary_present=True, **main),
        AssistantMessageEvent(seq=9, content="thinking hard", content_kind="reasoning", **main),
        AssistantMessageEvent(seq=10, content="all done", content_kind="text", **main),
        ToolInventoryEvent(seq=11, model_visible=True, complete=True, scope="request", tools=TOOLS,
                           **{**base, "source": "gateway"}),
    ]
    records = [_record(0, []), _record(1, ["c1"]), _record(2, [], tools=["Bash"]),
               _record(3, ["c3"], tools=["Bash"]), _record(4, ["c2"])]
    result = ResultRecord(identity=CellIdentity(run_id=RUN, task_id="T1-demo-001", task_revision=1,
                                                harness="fake", harness_version="1.0", model="probe",
                                                protocol="probe"), status="completed")
    return CellArchive(root=root or Path("/nonexistent"), result=result, summary=None, events=events,
                       records=records)


CELLS_K = "C3-freeze-ticket-001 or L4-pending-report-001 or O1-ticket-close-error-001"
HARNESSES = "reference,claude_code,codex"


@functools.cache
def probe_archive() -> Path:
    """Real probe cells (three tasks on three harnesses), run once per test process."""
    out = Path(tempfile.mkdtemp(prefix="tt-export-cells-"))
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-p", "no:cacheprovider", "-q",
           f"--tt-output={out}", "-k", CELLS_K, "--tt-harness", HARNESSES]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1500, check=False,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    # Exit code 1 = some cell failed a criterion: the archive is still what we export.
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert list(out.glob("traces/*/*/*/events.json")), proc.stdout[-3000:]
    return out
