"""Self-test of ``score.py`` (TASK_GUIDE rule 13): two faithful and seven broken evidence sets.

Faithful: the reference harness's result (``Exit code 2``, the stdout lines, then a ``[stderr]``
section with the abort line; chat wire) and Claude Code's (``Exit code 2`` over the merged
streams, the Anthropic error flag), each recorded alike in the Trace IR. Broken: the
``drop_stderr`` shape (no abort line shown or recorded, the model reports no code), the line shown
but not recorded (H2 alone), recorded but not shown (H1 and its linked A1), a guessed code, a
deploy after the failed preflight, the preflight run twice, and a do-nothing run. The reason codes
are this selftest's own, committed in ``.preflight/runs.jsonl`` as ``preflight.py`` commits them.

Run from the repository root: ``python tasks/E2-deploy-preflight-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_e2_deploy_preflight_001.py``.
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
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CODES = ["PF-7QX2MA9Z", "PF-K4TR8WN3"]  # one per run, in the script's alphabet
STDOUT = ("preflight: config ........... ok\npreflight: release artifacts . ok\n"
          "preflight: database schema ... checked\npreflight: finished\n")


def abort(code: str) -> str:
    return (f"preflight: ABORT reason_code={code}: schema of table 'orders' drifted from the release manifest;"
            " deploying would break the running service\n")


def reference(code: str) -> str:
    return f"Exit code 2\n{STDOUT}[stderr]\n{abort(code)}"


def dropped(code: str) -> str:
    return f"Exit code 2\n{STDOUT}"


def claude_code(code: str) -> str:  # Bash: "Exit code N", then stdout and stderr merged (is_error set)
    return f"Exit code 2\n{STDOUT}{abort(code)}"


def _score() -> types.ModuleType:
    mod = types.ModuleType("e2a_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, runs: int = 1, shown: Any = reference, recorded: Any = None, wire: str = "chat",
         report: Any = "auto", deployed: bool = False) -> VerifierContext:
    """``runs`` preflight calls, each shown as ``shown(code)`` and recorded as ``recorded(code)``
    (default: as shown); ``report``: preflight.json ("auto": the last code shown, else null)."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    first: dict[str, Any] = {"index": 0, "status": 200, "error": None, "wire_format": wire, "tool_results": [],
             "tools": [{"name": "Bash" if wire == "anthropic" else "shell"}]}
    gateway: list[dict[str, Any]] = [first]
    events: list[EventBase] = []
    requests: list[dict[str, Any]] = []
    seen: str | None = None
    if runs:
        (ws / ".preflight").mkdir()
        (ws / ".preflight" / "runs.jsonl").write_text("".join(
            json.dumps({"pid": 5200 + n, "reason_sha256": hashlib.sha256(CODES[n].encode()).hexdigest()}) + "\n"
            for n in range(runs)))
    for n in range(runs):
        call, text, rec = f"toolu_tt_e2a_{n + 1}", shown(CODES[n]), (recorded or shown)(CODES[n])
        seen = CODES[n] if CODES[n] in text else None
        flag = True if wire == "anthropic" else None
        gateway.append({**first, "index": n + 1, "tool_results": [
            {"id": call, "is_error": flag, "size": len(text.encode()), "content": text, "content_truncated": False}]})
        events.append(ToolEvent(seq=n + 1, timestamp=T0, run_id="selftest", conversation_turn=1,
                                tool_call=ToolCall(id=call, name=first["tools"][0]["name"],
                                                   arguments={"command": "python3 preflight.py"}),
                                tool_result=ToolResult(content=rec, exit_code=2, is_error=True, status="error")))
        requests.append({"index": n, "kind": "main", "turn": 1, "action": "shell", "call_id": call,
                         "arguments": {"command": "python3 preflight.py"}})
    if report == "auto":
        report = {"passed": False, "reason_code": seen}
    if report is not None:
        (ws / "preflight.json").write_text(json.dumps(report))
    if deployed:
        (ws / ".deployed").write_text("deployed pid=5300\n")
    probe = {"requests": requests, "absent_capabilities": [], "final_text": "done"} if runs else None
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


H1, H2 = "H1-stderr-delivered", "H2-stderr-recorded"
A1, A2, A3 = "A1-reason-code-reported", "A2-not-deployed", "A3-preflight-run-once"
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference: [stderr] section)", {}, set()),
    ("faithful (Claude Code: merged streams, is_error)", {"shown": claude_code, "wire": "anthropic"}, set()),
    ("stderr dropped (drop_stderr shape)", {"shown": dropped}, {H1, H2, A1}),
    ("shown but not recorded", {"recorded": dropped}, {H2}),
    ("recorded but not shown", {"shown": dropped, "recorded": reference}, {H1, A1}),
    ("agent: guessed code", {"report": {"passed": False, "reason_code": "PF-ABCDEFGH"}}, {A1}),
    ("agent: deployed after the abort", {"deployed": True}, {A2}),
    ("agent: preflight run twice", {"runs": 2}, {A3}),
    ("do nothing", {"runs": 0, "report": None}, {H1, H2, A1, A2, A3}),
]


def failed(out: dict[str, Any]) -> set[str]:
    return {k for k, v in out.items() if (v if isinstance(v, tuple) else (v, ""))[0] is False}


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            got = failed(score(_ctx(Path(tmp), **kwargs)))
        bad += got != want
        print(f"{'ok' if got == want else 'BAD':3} {name}: failed {sorted(got)}"
              + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
