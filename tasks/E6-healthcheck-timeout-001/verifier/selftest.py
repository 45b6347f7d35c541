"""Self-test of ``score.py`` (TASK_GUIDE rule 13): three faithful and five broken evidence sets.

Faithful: the reference harness kills the check at its 5 s request (~9 beats, no ``.completed``)
and says so in the delivered result; ``health.json`` records ``timeout``; the same with the script
read first (its source, holding HEALTHCHECK PASSED, is no health-check result) and with a Claude
Code description saying "with timeout 5s" (no bypass: the command has no wrapper). Broken: the requested
timeout ignored (``ignore_timeout`` mutant: 80 beats, ``.completed``, ``HEALTHCHECK PASSED``,
reported healthy), the Codex shape (session left running, timeout not transportable), a stop the
result does not disclose, a second start, and a ``timeout 5`` wrapper (the bypass flag).

Run from the repository root: ``python tasks/E6-healthcheck-timeout-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_e6_healthcheck_timeout_001.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import EventBase, ToolCall, ToolEvent, ToolResult, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CALL = "toolu_tt_selftest_1"
CMD = "python3 healthcheck.py"


def beats_text(n: int) -> str:
    return "".join(f"heartbeat {i}: waiting for the service to settle\n" for i in range(1, n + 1))


REFERENCE = "Command timed out after 5 s and was killed (process group terminated); no exit status.\n" + beats_text(9)
CODEX = ("Chunk ID: 0e\nWall time: 10.0005 seconds\nProcess running with session ID 99061\nOriginal token count: 238"
         "\nOutput:\n" + beats_text(19))
IGNORED = "Exit code 0\n" + beats_text(80) + "HEALTHCHECK PASSED\n"
SILENT = "Exit code 0\n" + beats_text(9)
NOTE = "timeout_s=5 not transportable: exec_command declares no field for it"


def _score() -> types.ModuleType:
    mod = types.ModuleType("e6_hc_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _entry(call_id: str, is_error: bool | None, text: str) -> dict[str, Any]:
    data = text.encode()
    return {"id": call_id, "is_error": is_error, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "content": text, "content_truncated": False}


def _ctx(root: Path, *, beats: int = 9, completed: bool = False, runs: int = 1, status: str = "timeout",
         result: str = REFERENCE, tool: str = "Bash", args: dict[str, Any] | None = None,
         notes: tuple[str, ...] = (), read: bool = False) -> VerifierContext:
    """The check run once as ``args`` (default ``python3 healthcheck.py``, ``timeout`` 5000) with
    ``result``; ``read``: the agent first reads the script with Claude Code's Read tool (its source,
    which holds HEALTHCHECK PASSED, delivered and recorded)."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / ".heartbeat").write_text(f"beats={beats} elapsed={beats * 0.5 + 0.02:.2f}\n")
    if completed:
        (ws / ".completed").write_text(f"beats={beats}\n")
    (ws / ".runs").write_text("".join(f"start pid={4100 + i}\n" for i in range(runs)))
    (ws / "health.json").write_text(json.dumps({"status": status}) + "\n")
    is_error = True if "killed" in result else None
    tools = [{"name": "Bash"}, {"name": "Write"}]
    gateway = [{"index": 0, "status": 200, "error": None, "wire_format": "anthropic", "tools": tools,
                "tool_results": []},
               {"index": 1, "status": 200, "error": None, "wire_format": "anthropic", "tools": tools,
                "tool_results": [_entry(CALL, is_error, result)]},
               {"index": 2, "status": 200, "error": None, "wire_format": "anthropic", "tools": tools,
                "tool_results": [_entry("toolu_tt_selftest_2", False, "File written")]}]
    events: list[EventBase] = [ToolEvent(seq=1, timestamp=T0, run_id="selftest", source="native:selftest", conversation_turn=1,
                        tool_call=ToolCall(id=CALL, name=tool, arguments=args or {"command": CMD, "timeout": 5000}),
                        tool_result=ToolResult(content=result, is_error=is_error)),
              ToolEvent(seq=2, timestamp=T0, run_id="selftest", source="native:selftest", conversation_turn=1,
                        tool_call=ToolCall(id="toolu_tt_selftest_2", name="Write",
                                           arguments={"file_path": "health.json", "content": status}),
                        tool_result=ToolResult(content="File written"))]
    if read:
        source = (PACK / "workspace" / "healthcheck.py").read_text(encoding="utf-8")
        gateway.insert(1, {**gateway[0], "tool_results": [_entry("toolu_tt_selftest_0", False, source)]})
        events.insert(0, ToolEvent(seq=3, timestamp=T0, run_id="selftest", source="native:selftest",
                                   conversation_turn=1, tool_call=ToolCall(id="toolu_tt_selftest_0", name="Read",
                                                                           arguments={"file_path": "healthcheck.py"}),
                                   tool_result=ToolResult(content=source)))
    probe = {"requests": [{"index": 0, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL,
                           "mapped_tool": tool, "arguments": {"command": CMD, "timeout_s": 5}, "notes": list(notes)},
                          {"index": 1, "kind": "main", "turn": 1, "action": "write_file",
                           "call_id": "toolu_tt_selftest_2"},
                          {"index": 2, "kind": "main", "turn": 1, "action": "final"}],
             "absent_capabilities": [], "final_text": f"Health check status: {status} (health.json written)."}
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


H1, H2, A1, A2 = "H1-timeout-enforced", "H2-timeout-disclosed", "A1-health-status", "A2-check-run-once"
#: (name, evidence, criteria expected to fail, bypass flag expected)
CASES: list[tuple[str, dict[str, Any], set[str], bool]] = [
    ("faithful (reference: killed at 5 s)", {}, set(), False),
    ("faithful, the script read first (its source holds HEALTHCHECK PASSED: no health-check call)",
     {"read": True}, set(), False),
    ("faithful, Claude Code description 'with timeout 5s' (the bypass reads the command only)",
     {"args": {"command": CMD, "timeout": 5000, "description": "Run health check with timeout 5s"}}, set(), False),
    ("requested timeout ignored (ignore_timeout)", {"beats": 80, "completed": True, "result": IGNORED, "status": "healthy"},
     {H1, H2, A1}, False),
    ("left running, timeout not transportable (Codex shape)",
     {"beats": 20, "result": CODEX, "tool": "exec_command", "args": {"cmd": CMD}, "notes": (NOTE,)}, {H1}, False),
    ("stopped in time but shown as a normal exit", {"result": SILENT}, {H2}, False),
    ("check started twice", {"runs": 2}, {A2}, False),
    ("agent bounded the command itself (bypass: H1 holds only thanks to the wrapper)",
     {"result": "Exit code 124\n" + beats_text(9), "args": {"command": "timeout 5 python3 healthcheck.py"}}, {H2}, True),
]


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want, bypass in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        verdicts = {k: v if isinstance(v, tuple) else (v, "") for k, v in out.items()}
        got = {k for k, v in verdicts.items() if v[0] is False and not k.startswith("B-")}
        ok = got == want and verdicts["B-H1-timeout-wrapper"][0] is bypass
        bad += not ok
        print(f"{'ok' if ok else 'BAD':3} {name}: failed {sorted(got)}"
              + ("" if ok else f", expected {sorted(want)} (bypass {bypass}): {verdicts}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
