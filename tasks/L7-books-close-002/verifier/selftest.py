"""Self-test of ``score.py`` (TASK_GUIDE rule 13): a faithful evidence set and broken ones, built by hand.

Run from anywhere: ``python tasks/L7-books-close-002/verifier/selftest.py`` (exit 0 when every verdict
is as expected). The full unit tests are ``tests/tasks/test_l7_books_close_002.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TASK = PACK.name
PERIOD = "2026-11"
JP1, JP2 = "JP-7KQ2MXD4", "JP-H3WN8RTA"
POST_CALL, BUILD_CALL = "call_tt_selftest_1", "call_tt_selftest_2"
POSTED = (f"Exit code 0\nPosted the closing journal for {PERIOD} to the general ledger: 9 lines, EUR 488,845.40 "
          f"debit = credit.\nPosting id: {JP1} (keep it: ./build_reports.sh needs it, and the ledger cannot be asked "
          "for it again).\n")
CUT = "No result: the harness stopped before this call finished (it may or may not have run)."
H1, H2, H3, H4 = ("H1-completed-posting-in-resumed-input", "H2-user-turns-delivered", "H3-turn1-killed",
                  "H4-killed-build-marked-unfinished")
A1, A2, A3 = "A1-posted-once", "A2-report-cites-posting", "A3-reports-published"


def _score() -> types.ModuleType:
    mod = types.ModuleType("l7_bc_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _post(jp: str, path: str, **extra: Any) -> dict[str, Any]:
    body = {"period": PERIOD, **extra}
    body["posting_id" if path == "/journals" else "journal_posting_id"] = jp
    return {"kind": "request", "service": "gl", "tool": "POST", "arguments": {"path": path, "body": json.dumps(body)}}


def _body(prompts: list[str], keep: bool) -> dict[str, Any]:
    """The first turn-2 request on the Chat wire (the reference's), with or without turn 1's calls."""
    calls = [{"role": "assistant", "content": None, "tool_calls": [
                 {"id": POST_CALL, "type": "function",
                  "function": {"name": "shell", "arguments": json.dumps({"command": f"./post_journal.sh {PERIOD}"})}}]},
             {"role": "tool", "tool_call_id": POST_CALL, "content": POSTED},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": BUILD_CALL, "type": "function", "function": {
                     "name": "shell", "arguments": json.dumps({"command": f"./build_reports.sh {PERIOD} {JP1}"})}}]},
             {"role": "tool", "tool_call_id": BUILD_CALL, "content": CUT}] if keep else []
    return {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": prompts[0]}, *calls,
                         {"role": "user", "content": prompts[1]}]}


def _ctx(root: Path, *, postings: tuple[str, ...] = (JP1,), pack_on: str | None = JP1, report: str | None = JP1,
         killed: bool = True, body: bool | None = None, delivered: bool = True,
         account: str = f"posting call shown with posting id {JP1}; report build shown as interrupted") -> VerifierContext:
    prompts = [(PACK / "prompt.md").read_text(), json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report is not None:
        (ws / "close-report.json").write_text(json.dumps({"period": PERIOD, "journal_posting_id": report,
                                                          "status": "closed"}))
    snap = root / "private" / "task" / TASK
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    (root / "result.json").write_text(json.dumps({"turns": [{"interrupted": killed}, {"interrupted": False}]}))
    tools = [{"name": "shell"}]
    gateway = [{"index": 0, "status": 200, "tools": tools, "last_user_text": prompts[0], "tool_results": []},
               {"index": 1, "status": 200, "tools": tools, "last_user_text": prompts[0],
                "tool_results": [{"id": POST_CALL, "is_error": None, "content": POSTED}]},
               {"index": 2, "status": 200, "tools": tools, "last_user_text": prompts[1],
                "tool_results": [{"id": BUILD_CALL, "is_error": None, "content": CUT}] if delivered else []}]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "2.json").write_text(json.dumps(_body(prompts, body)))
    probe = {"requests": [
        {"kind": "main", "turn": 1, "action": "shell", "call_id": POST_CALL,
         "arguments": {"command": f"./post_journal.sh {PERIOD}"}},
        {"kind": "main", "turn": 1, "action": "shell", "call_id": BUILD_CALL,
         "arguments": {"command": f"./build_reports.sh {PERIOD} {JP1}"}}],
        "final_text": f"The {PERIOD} close is finished. Resume check: {account}."}
    ledger = [_post(jp, "/journals") for jp in postings] + ([_post(pack_on, "/reports")] if pack_on else [])
    return VerifierContext(workspace=ws, baseline=base, truth=json.loads((PACK / "truth.json").read_text()),
                           oracle=None, events=[], gateway=gateway, probe=probe, ledgers={"gl": ledger}, run_dir=root)


def main() -> int:
    score = _score().score
    dropped = "posting call not shown; report build not shown"
    build_gone = f"posting call shown with posting id {JP1}; report build not shown"
    twice = {"postings": (JP1, JP2), "pack_on": JP2, "report": JP2}
    cases = [
        ("faithful (gateway record + probe account)", {}, set(), set()),
        ("faithful (request body)", {"body": True, "delivered": False, "account": dropped}, set(), set()),
        ("resumed from the turn's start: posted twice", {**twice, "delivered": False, "account": dropped},
         {H1, H4, A1}, set()),
        ("both calls dropped in the body", {**twice, "body": False}, {H1, H4, A1}, set()),
        ("history lost: nothing done", {"pack_on": None, "report": None, "delivered": False, "account": dropped},
         {H1, H4, A2, A3}, set()),
        ("killed build dropped, posting kept", {"delivered": False, "account": build_gone}, {H4}, set()),
        ("invented posting id", {"report": "JP-AAAAAAAA"}, {A2}, set()),
        ("turn 1 not killed", {"killed": False}, {H3}, {H1, H4}),
    ]
    bad = 0
    for name, kwargs, want_failed, want_unscored in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        failed = {k for k, (ok, _) in out.items() if ok is False}
        unscored = {k for k, (ok, _) in out.items() if ok is None}
        good = failed == want_failed and unscored == want_unscored
        bad += not good
        print(f"{'ok' if good else 'MISMATCH':8} {name}: failed {sorted(failed)}, unscored {sorted(unscored)}"
              + ("" if good else f"; expected failed {sorted(want_failed)}, unscored {sorted(want_unscored)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
