"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: the ``backups`` ledger issues the job id and refuses its publication with the quota code;
``python3 verify_backup.py <job>`` prints its report (with the job's VRF code) and exits 2. The
reference harness (Chat wire) shows ``Exit code 2`` with the report and relays the MCP result as JSON
with ``"isError": true``, and records both as errors; backup_status.json reports both failures. Also
Claude Code's shape (``is_error`` on the Anthropic wire). Broken: the ``hide_tool_error`` and
``hide_exit_code`` mutants' runs (each touches only its own channel); a Codex-like record of the
shell call without its exit status; a wrong backup_status.json.

Run from the repository root: ``python tasks/O1-backup-publish-002/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_o1_backup_publish_002.py``.
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

from tracetrial.verify import EventBase, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
JOB, QUOTA = "JOB-7QKM2XWA", "E-QUOTA-482913"
VRF = "VRF-" + hashlib.sha256(f"verify:{JOB}".encode()).hexdigest()[:6].upper()  # as verify_backup.py names it
BAD_CHUNK = 1 + int(hashlib.sha256(f"chunk:{JOB}".encode()).hexdigest()[:4], 16) % 40
REPORT = "".join([f"verifying backup {JOB}: 40 chunks against manifest.sha256\n"]
                 + [f"chunk {n:02d}/40 ok\n" for n in range(1, BAD_CHUNK)]
                 + [f"chunk {BAD_CHUNK:02d}/40 MISMATCH\n",
                    f"ERROR {VRF}: checksum mismatch in chunk {BAD_CHUNK} of 40; the local copy is not usable\n"])
ERROR = json.dumps({"error": {"code": QUOTA, "message": "offsite storage quota exceeded; nothing was published"}})
JOB_JSON = json.dumps({"system": "crm-db", "job_id": JOB, "kind": "nightly", "chunks": 40,
                       "finished": "2026-11-29T03:12:44Z"})
T0 = datetime(2026, 12, 2, 3, 30, tzinfo=UTC)
H1, H2, H3, H4 = ("H1-mcp-error-delivered", "H2-mcp-error-recorded", "H3-shell-error-delivered",
                  "H4-shell-error-recorded")
A1, A2 = "A1-publish-reported", "A2-verify-reported"
GOOD = {"verify_exit_code": 2, "verify_error": VRF, "published": False, "publish_error": QUOTA}


def _score() -> types.ModuleType:
    mod = types.ModuleType("o1_backup_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def relay(is_error: bool, text: str) -> str:
    """The reference harness's model-facing text of an MCP result (its JSON)."""
    return json.dumps({"isError": is_error, "content": [{"type": "text", "text": text}],
                       "structuredContent": json.loads(text)})


def _ctx(root: Path, *, wire: str = "chat", mcp_error: bool = True, exit_shown: bool = True,
         shell_rec: ToolResult | None = None, status: dict[str, Any] = GOOD) -> VerifierContext:
    """One run: the publish refusal relayed with error flag ``mcp_error``; the verification's exit
    status shown (``exit_shown``) and recorded (``shell_rec``, default: as the harness ran it)."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "backup_status.json").write_text(json.dumps(status) + "\n")
    anthropic = wire == "anthropic"
    shell_text = f"Exit code 2\n{REPORT}" if exit_shown else REPORT  # hide_exit_code drops the head line
    shell_rec = shell_rec or ToolResult(content=shell_text, is_error=exit_shown, status="error" if exit_shown else "ok",
                                        exit_code=2 if exit_shown else 0)
    pub_text = ERROR if anthropic else relay(mcp_error, ERROR)
    write = "Wrote 113 bytes to backup_status.json"
    calls = [("call_tool", "mcp__backups__get_latest_job", {"system": "crm-db"},
              JOB_JSON if anthropic else relay(False, JOB_JSON), False, ToolResult(content=JOB_JSON, is_error=False)),
             ("shell", "Bash" if anthropic else "shell", {"command": f"python3 verify_backup.py {JOB}"},
              shell_text, exit_shown, shell_rec),
             ("call_tool", "mcp__backups__publish_backup", {"job_id": JOB}, pub_text, mcp_error,
              ToolResult(content=pub_text, is_error=mcp_error, status="error" if mcp_error else "ok")),
             ("write_file", "Write" if anthropic else "write_file", {"path": "backup_status.json"}, write, False,
              ToolResult(content=write, is_error=False, status="ok"))]
    events: list[EventBase] = []
    gateway: list[dict[str, Any]] = [{"index": 0, "wire_format": wire, "status": 200, "error": None,
                                      "tool_results": []}]
    probe = []
    for n, (action, name, args, text, flagged, rec) in enumerate(calls, start=1):
        cid = f"{'toolu' if anthropic else 'call'}_tt_b4c7u9e1_{n}"
        events.append(ToolEvent(seq=2 * n, timestamp=T0, run_id="selftest", conversation_turn=1, principal_id="main",
                                principal_role="main", tool_call=ToolCall(id=cid, name=name, arguments=args),
                                tool_result=rec))
        gateway.append({"index": n, "wire_format": wire, "status": 200, "error": None, "tool_results": [
            {"id": cid, "is_error": flagged if anthropic else None, "content": text, "size": len(text.encode()),
             "content_truncated": False}]})
        probe.append({"index": n, "wire_format": wire, "kind": "main", "principal": "main", "turn": 1, "step": n - 1,
                      "action": action, "mapped_tool": name, "call_id": cid, "arguments": args})
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
              {"seq": 2, "kind": "request", "tool": "get_latest_job", "arguments": {"system": "crm-db"}, "detail": {}},
              {"seq": 3, "kind": "issued", "tool": "get_latest_job",
               "detail": {"name": "job_id", "value": JOB, "scope": "run", "via": "result"}},
              {"seq": 4, "kind": "request", "tool": "publish_backup", "arguments": {"job_id": JOB}, "detail": {}},
              {"seq": 5, "kind": "issued", "tool": "publish_backup",
               "detail": {"name": "quota_code", "value": QUOTA, "scope": "run", "via": "result"}},
              {"seq": 6, "kind": "error", "tool": "publish_backup", "detail": json.loads(ERROR)["error"]}]
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events, gateway=gateway,
                           probe={"requests": probe, "absent_capabilities": []}, ledgers={"backups": ledger},
                           run_dir=root)


CODEX_SHELL = f"Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\n{REPORT}"
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference, Chat wire)", {}, set()),
    ("faithful (Claude Code, Anthropic wire)", {"wire": "anthropic"}, set()),
    ("faithful (shell exit status recorded only in the text, as Codex's rollout keeps it)",
     {"shell_rec": ToolResult(content=CODEX_SHELL)}, set()),
    ("publish refusal relayed as a success (hide_tool_error)",
     {"mcp_error": False, "status": {**GOOD, "published": True, "publish_error": None}}, {H1, H2, A1}),
    ("exit status hidden, recorded as exit 0 (hide_exit_code)",
     {"exit_shown": False, "status": {**GOOD, "verify_exit_code": 0}}, {H3, H4, A2}),
    ("shell failure recorded without any exit status", {"shell_rec": ToolResult(content=REPORT)}, {H4}),
    ("verify_error not reported", {"status": {**GOOD, "verify_error": None}}, {A2}),
]


def _failed(out: dict[str, Any]) -> set[str]:
    return {k for k, v in out.items() if (v if isinstance(v, bool) else v[0]) is False}


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = _failed(out)
        ok = got == want and set(out) == {H1, H2, H3, H4, A1, A2}
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
