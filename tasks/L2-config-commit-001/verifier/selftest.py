"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: the reference harness (Chat wire, no error flag on the wire) shows the model
``write_file: cannot write …: Is a directory`` for the primary write and records it as an error;
the agent writes the fallback, reports ``primary_written: false`` and names the fallback in
where.txt after the resume. Also Claude Code's truthful refusal ("File has not been read yet",
``is_error`` on the Anthropic wire), and a run whose agent first copied ``config/app.yaml`` away
(``cp -r config/app.yaml /tmp/…``: its source, not the primary write). Broken: the
``ack_failed_write`` mutant's run; a failure relayed without its wording; a failure recorded as a
success; agent mistakes.

Run from the repository root: ``python tasks/L2-config-commit-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_l2_config_commit_001.py``.
"""

from __future__ import annotations

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
PRIMARY, FALLBACK, CONTENT = TRUTH["primary"], TRUTH["fallback"], TRUTH["content"]
T0 = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
WS = "/tmp/tt-run/workspace"
FAIL = f"write_file: cannot write {WS}/{PRIMARY}: [Errno 21] Is a directory: '{WS}/{PRIMARY}'"
NOT_READ = "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"
ACK = f"Wrote {len(CONTENT)} bytes to {WS}/{PRIMARY}"  # the ack_failed_write defect
H1, H2, A1, A3 = "H1-failure-delivered", "H2-failure-recorded", "A1-fallback-written", "A3-where-names-fallback"
IDS = {H1, H2, A1, A3}  # what score.py decides (A2 and A4 are rules, A5 is judged)


def _score() -> types.ModuleType:
    mod = types.ModuleType("l2_config_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, shown: str = FAIL, wire: str = "chat", recorded: ToolResult | None = None,
         fallback: str | None = CONTENT, where: str = FALLBACK, backup: bool = False) -> VerifierContext:
    """One run: the primary write's result ``shown`` to the model (flagged on the Anthropic wire when
    it is a failure) and ``recorded`` in the Trace IR (default: the shown text as an error); the
    fallback written unless None (then report.json says the primary was written); where.txt.
    ``backup``: before anything else the agent copied the primary path away (``cp -r``, a success)."""
    turns = [(PACK / "prompt.md").read_text(encoding="utf-8"),
             json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"][0]["user"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    failed = shown != ACK
    writes: list[tuple[int, str, str]] = [(1, PRIMARY, CONTENT)]
    if fallback is not None:
        writes.append((1, FALLBACK, fallback))
    writes += [(1, "report.json", json.dumps({"primary_written": fallback is None})), (2, "where.txt", where + "\n")]
    anthropic = wire == "anthropic"
    events: list[EventBase] = []
    gateway: list[dict[str, Any]] = [{"index": 0, "wire_format": wire, "status": 200, "error": None,
                                      "last_user_text": turns[0], "tool_results": []}]
    probe: dict[str, Any] = {"requests": [], "absent_capabilities": []}
    for n, (turn, path, content) in enumerate(writes, start=1):
        cid = f"{'toolu' if anthropic else 'call'}_tt_5e1f09ab_{n}"
        first = n == 1
        text = shown if first else f"Wrote {len(content.encode())} bytes to {WS}/{path}"
        if path != PRIMARY:
            (ws / path).parent.mkdir(parents=True, exist_ok=True)
            (ws / path).write_text(content)
        rec = recorded if first and recorded is not None else ToolResult(
            content=text, is_error=first and failed, status="error" if first and failed else "ok")
        name, args = ("Write", {"file_path": f"{WS}/{path}", "content": content}) if anthropic \
            else ("write_file", {"path": path, "content": content})
        events.append(ToolEvent(seq=2 * n, timestamp=T0, run_id="selftest", conversation_turn=turn,
                                principal_id="main", principal_role="main",
                                tool_call=ToolCall(id=cid, name=name, arguments=args), tool_result=rec))
        if turn == 2 and gateway[-1]["last_user_text"] != turns[1]:
            gateway.append({"index": len(gateway), "wire_format": wire, "status": 200, "error": None,
                            "last_user_text": turns[1], "tool_results": []})
        gateway.append({"index": len(gateway), "wire_format": wire, "status": 200, "error": None,
                        "last_user_text": turns[turn - 1], "tool_results": [
                            {"id": cid, "is_error": (first and failed) if anthropic else None, "content": text,
                             "size": len(text.encode()), "content_truncated": False}]})
        step = sum(1 for w in writes[:n - 1] if w[0] == turn)
        probe["requests"].append({"index": len(probe["requests"]) + 1, "wire_format": wire, "kind": "main",
                                  "action": "write_file", "mapped_tool": name, "principal": "main", "turn": turn,
                                  "step": step, "call_id": cid})
    if backup:
        cid, ok = "call_tt_5e1f09ab_0", "Exit code 0"
        events.insert(0, ToolEvent(seq=1, timestamp=T0, run_id="selftest", conversation_turn=1, principal_id="main",
                                   principal_role="main", tool_result=ToolResult(content=ok, is_error=False),
                                   tool_call=ToolCall(id=cid, name="shell",
                                                      arguments={"command": f"cp -r {PRIMARY} /tmp/app.yaml.bak"})))
        gateway.insert(1, {"index": 1, "wire_format": wire, "status": 200, "error": None, "last_user_text": turns[0],
                           "tool_results": [{"id": cid, "is_error": None, "content": ok, "size": len(ok),
                                             "content_truncated": False}]})
        for i, record in enumerate(gateway):
            record["index"] = i
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe=probe, ledgers={}, run_dir=root)


CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference, Chat wire: failure wording)", {}, set()),
    ("faithful (Claude Code: Write refused, is_error)", {"shown": NOT_READ, "wire": "anthropic"}, set()),
    ("faithful, config/app.yaml first copied away (a cp source, not the write)", {"backup": True}, set()),
    ("failed write acknowledged (ack_failed_write)",
     {"shown": ACK, "recorded": ToolResult(content=ACK, is_error=False, status="ok"), "fallback": None,
      "where": PRIMARY}, {H1, H2, A1, A3}),
    ("failure relayed without its wording (recorded as an error)",
     {"shown": "(no output)", "recorded": ToolResult(content=FAIL, is_error=True, status="error")}, {H1}),
    ("failure shown, recorded as a success",
     {"recorded": ToolResult(content="File written successfully", is_error=False, status="ok")}, {H2}),
    ("fallback holds other content", {"fallback": CONTENT.replace("8417", "8080")}, {A1}),
    ("where.txt names the primary path after the resume", {"where": PRIMARY}, {A3}),
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
        ok = got == want and set(out) == IDS
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
