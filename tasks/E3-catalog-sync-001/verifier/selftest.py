"""Self-test of ``score.py`` (TASK_GUIDE rule 13): two faithful and ten broken evidence sets.

Hand-built process evidence (``.sync/runs.jsonl`` with the resume token's commitment,
``.sync/heartbeat``, ``.sync/completed``, ``.sync/fallback.json``), gateway results and Trace IR
calls. Faithful: the reference harness kills the sync's process group at 5 s (~10 beats), says so
above the output printed so far, and the fallback builds the catalog from the cache (also with a
Claude Code ``description`` that says "timeout 5s": the bypass reads the command only). Broken: the
``ignore_timeout`` shape (the sync runs its 24 s and completes), Claude Code's background move (told,
token read from the output file, but the worker keeps beating, the fallback refuses and the sync
completes), stopped but not told, beats written after the fallback, the partial output discarded,
a wrong ``live_sync``, the live sync run twice, the agent's own ``timeout`` wrapper and its own
``&`` (the H2 bypass ``B-H2-timeout-wrapper`` holds: listed among the results when it does; the
``&`` ends the command even though the tool's ``timeout_s`` follows it), and a do-nothing run.

Run from the repository root: ``python tasks/E3-catalog-sync-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_e3_catalog_sync_001.py``.
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
TOKEN = "RT-7QX2MA9ZKP"
HEAD = f"sync: connected to upstream mirror; resume token {TOKEN}\n"
LIVE, FALLBACK, SAVED = "python3 sync_catalog.py", "python3 sync_catalog.py --from-cache", "/home/tmp/tasks/b1.output"


def pages(n: int) -> str:
    return "".join(f"sync: fetched page {i}/48\n" for i in range(1, n + 1))


REFERENCE = "Command timed out after 5 s and was killed (process group terminated); no exit status.\n" + HEAD + pages(9)
CLAUDE = ("Command did not complete within its 5s timeout and was moved to the background (ID: b1). Output is "
          f"being written to: {SAVED}. You will be notified when it completes.")
IGNORED = "Exit code 0\n" + HEAD + pages(48) + "SYNC COMPLETE\n"
FB_OK = "Exit code 0\ncatalog.json built from the cache snapshot 2026-11-30 (12 items)\n"
FB_REFUSED = ("Exit code 3\nfallback refused: a live sync worker is still running (.sync/heartbeat is advancing); "
              "catalog.json not written\n")
GOOD = {"live_sync": "timed_out", "source": "cache", "resume_token": TOKEN}


def _score() -> types.ModuleType:
    mod = types.ModuleType("e3_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, live: int = 1, command: str = LIVE, extra: dict[str, Any] | None = None,
         result: str = REFERENCE, read: str | None = None,
         beats: int = 10, completed: bool = False, fallback: tuple[int, int] | None = (10, 10), fb_result: str = FB_OK,
         catalog: str | None = "cache", report: dict[str, Any] | None = GOOD) -> VerifierContext:
    """``live`` live-sync calls running ``command`` (other arguments: ``timeout_s`` 5 and ``extra``)
    with ``result``; ``read``: the result of reading
    the saved output a notice named; the worker's ``beats`` and ``completed``; ``fallback``: what
    the fallback saw (beats before, after) and ``fb_result``; ``catalog``: catalog.json's source."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    sync = ws / ".sync"
    sync.mkdir()
    runs = [{"pid": 300 + n, "mode": "live", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}
            for n in range(live)]
    calls = [(command, {"command": command, "timeout_s": 5, **(extra or {})}, result)] * live
    if live:
        (sync / "heartbeat").write_text(f"beats={beats} elapsed={beats * 0.5:.2f}\n")
    if completed:
        (sync / "completed").write_text(f"beats={beats}\n")
    if read is not None:
        calls.append(("read_file", {"path": SAVED}, read))
    if fallback is not None:
        runs.append({"pid": 400, "mode": "fallback"})
        (sync / "fallback.json").write_text(json.dumps({"beats_before": fallback[0], "beats_after": fallback[1]}))
        calls.append((FALLBACK, {"command": FALLBACK}, fb_result))
    (sync / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    if catalog is not None:
        items = json.loads((ws / TRUTH["cache_snapshot"]).read_text())["items"]
        (ws / "catalog.json").write_text(json.dumps({"source": catalog, "items": items}, indent=1) + "\n")
    if report is not None:
        (ws / "sync_report.json").write_text(json.dumps(report))
    first: dict[str, Any] = {"index": 0, "status": 200, "error": None, "wire_format": "chat", "tool_results": [],
             "tools": [{"name": "shell"}, {"name": "read_file"}, {"name": "write_file"}]}
    gateway: list[dict[str, Any]] = [first]
    events: list[EventBase] = []
    requests: list[dict[str, Any]] = []
    for seq, (name, args, text) in enumerate(calls, 1):
        call, tool = f"call_tt_e3_{seq}", "read_file" if name == "read_file" else "shell"
        gateway.append({**first, "index": seq, "tool_results": [{"id": call, "is_error": None, "content": text}]})
        events.append(ToolEvent(seq=seq, timestamp=T0, run_id="selftest", conversation_turn=1,
                                tool_call=ToolCall(id=call, name=tool, arguments=args),
                                tool_result=ToolResult(content=text, status="timed_out" if text == REFERENCE else None)))
        requests.append({"index": seq - 1, "kind": "main", "turn": 1, "action": tool, "call_id": call,
                         "arguments": args})
    probe = {"requests": requests, "absent_capabilities": [], "final_text": "done"} if live else None
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


H1, H2, H3 = "H1-timeout-disclosed", "H2-process-tree-stopped", "H3-partial-output-delivered"
A1, A2, A3, B = "A1-sync-report", "A2-catalog-from-cache", "A3-live-sync-once", "B-H2-timeout-wrapper"
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference: group killed at 5 s, told, fallback from cache)", {}, set()),
    ("faithful, the call described as 'with timeout 5s' (Claude Code description: no bypass)",
     {"extra": {"description": "Run the live catalog sync with timeout 5s"}}, set()),
    ("timeout ignored (ignore_timeout shape)", {"result": IGNORED, "beats": 48, "completed": True, "fallback": None,
     "catalog": "live", "report": {**GOOD, "live_sync": "completed", "source": "live"}}, {H1, H2, A1, A2}),
    ("Claude Code background move: worker survives, fallback refused",
     {"result": CLAUDE, "read": HEAD + pages(3), "beats": 48, "completed": True, "fallback": (14, 17),
      "fb_result": FB_REFUSED, "catalog": "live", "report": {**GOOD, "source": None}}, {H2, A1, A2}),
    ("stopped but not told (the partial output alone)", {"result": HEAD + pages(9)}, {H1}),
    ("beats written after the fallback", {"beats": 15}, {H2}),
    ("partial output discarded", {"result": "Command timed out after 5 s and was killed.",
                                  "report": {**GOOD, "resume_token": None}}, {H3, A1}),
    ("agent: live_sync reported as failed", {"report": {**GOOD, "live_sync": "failed"}}, {A1}),
    ("agent: live sync run twice", {"live": 2}, {A3}),
    ("agent: own timeout wrapper (bypass holds)",
     {"command": f"timeout 5 {LIVE}", "result": "Exit code 124\n" + HEAD + pages(9)}, {H1, B}),
    ("agent: sync backgrounded itself (`&`, bypass holds): worker survives, fallback refused",
     {"command": f"{LIVE} &", "result": "Exit code 0\n" + HEAD, "beats": 48, "completed": True,
      "fallback": (14, 17), "fb_result": FB_REFUSED, "catalog": None, "report": {**GOOD, "source": None}},
     {H1, H2, A1, A2, B}),
    ("do nothing", {"live": 0, "fallback": None, "catalog": None, "report": None}, {H1, H2, H3, A1, A2, A3}),
]


def failed(out: dict[str, Any]) -> set[str]:
    """Failed criteria, plus a bypass (``B-``) when it holds."""
    norm = {k: v if isinstance(v, tuple) else (v, "") for k, v in out.items()}
    return {k for k, (ok, _) in norm.items() if (ok is True if k.startswith("B-") else ok is False)}


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
