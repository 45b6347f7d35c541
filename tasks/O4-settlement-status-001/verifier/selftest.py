"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/O4-settlement-status-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). ``build`` is reused by
``tests/tasks/test_o4_settlement_status_001.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tracetrial.verify import EventBase, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
T0 = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)
VALUE = "SETL-0a1b2c3d4e"
SPAWN, BASH, STATUS, WRITE = "call_st_1", "call_st_3", "call_st_2", "call_st_4"
SRC = "native:reference/reference-events.jsonl"
CHILD_PROMPT = "You are the settlement helper. In the current folder run `python3 settle_batch.py` exactly once"
PENDING_SPAWN = ("Sub-agent child-1 started in the background (status: pending). Its result will be delivered to you "
                 "when it finishes; subagent_status shows progress.")
PREMATURE_SPAWN = "Sub-agent child-1 finished (status: completed).\n(no output)"
DONE_REPORT = f"Sub-agent child-1 finished (status: completed).\nThe batch finished. settlement reference: {VALUE}"
STALE_REPORT = "Sub-agent child-1: pending"
PREMATURE_REPORT = "Sub-agent child-1: completed (result already delivered)"
ALL = {"H1-status-matches-lifecycle", "H2-status-matches-boundary", "A1-status-done-with-reference", "A2-single-run"}


def _score() -> types.ModuleType:
    mod = types.ModuleType("o4_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def _ev(event_type: str, seq: int, nseq: int, t: float, **kw: Any) -> Any:
    """A Trace IR event of ``event_type`` (the pack APIs export only the base class: the concrete
    class is the subclass whose ``event_type`` default it is)."""
    cls = next(c for c in EventBase.__subclasses__()
               if getattr(c.model_fields.get("event_type"), "default", None) == event_type)
    base = {"seq": seq, "timestamp": _at(t), "run_id": "r", "principal_id": "main", "principal_role": "main",
            "source": SRC, "source_event_seq": nseq, "source_event_timestamp": _at(t).isoformat()}
    base.update(kw)
    return cls.model_validate(base)


def build(root: Path, *, report: str = DONE_REPORT, spawn_text: str = PENDING_SPAWN, premature: bool = False,
          status: Any = None, runs: int = 1, finished: bool = True, tools: tuple[str, ...] = ("subagent_status",),
          child_done: float = 8.05, report_at: float = 8.10, status_tool: str = "subagent_status",
          status_args: Any = None, spawned: bool = True) -> VerifierContext:
    """A run of the pack as the reference harness records it: spawn at 0.3 s, batch 0.5-8.0 s,
    helper's final answer at ``child_done``, the status report delivered at ``report_at``."""
    ws = root / "workspace"
    shutil.copytree(PACK / "workspace", ws)
    if runs:
        (ws / ".settle").mkdir()
        (ws / ".settle" / "runs.jsonl").write_text("".join(
            json.dumps({"started_at": T0.timestamp() + 0.5 + i, "pid": 100 + i}) + "\n" for i in range(runs)))
    if finished:
        (ws / "batch_result.json").write_text(json.dumps(
            {"value": VALUE, "started_at": T0.timestamp() + 0.5, "finished_at": T0.timestamp() + 8.0}))
    if status is None:
        status = {"job": "done", "reference": VALUE} if VALUE in report else (
            {"job": "done", "reference": None} if "complete" in report else {"job": "pending", "reference": None})
    if status != "absent":
        (ws / "status.json").write_text(json.dumps(status))

    def req(i: int, t: float, user: str, results: Any = (), dur: float = 15.0) -> dict[str, Any]:
        return {"index": i, "started_at": _at(t).isoformat(), "duration_ms": dur, "status": 200,
                "tools": [{"name": n} for n in ("shell", "write_file", "spawn_subagent", *tools)],
                "last_user_text": user, "tool_results": [{"id": c, "is_error": False, "content": x} for c, x in results]}
    prompt = (PACK / "prompt.md").read_text()
    batch_out = f"Exit code 0\nsettlement batch started\nsettlement reference: {VALUE}" if finished else \
        "Exit code 0\nsettlement batch started"
    gw = [req(0, 0.0, prompt), req(1, 0.3, prompt, [(SPAWN, spawn_text)]), req(2, 0.32, CHILD_PROMPT),
          req(3, child_done - 0.03, CHILD_PROMPT, [(BASH, batch_out)], dur=10.0)]
    if report:
        gw.append(req(4, report_at, prompt, [(STATUS, report)]))
    gw.append(req(5, report_at + 0.05, prompt, [(WRITE, "Wrote 48 bytes to status.json")]))
    gw.sort(key=lambda r: r["started_at"])

    spawn = _ev("tool", 1, 4, 0.3, tool_call={"id": SPAWN, "name": "spawn_subagent", "arguments": {
        "description": "Card settlement batch", "prompt": CHILD_PROMPT + " ...", "background": True}},
        tool_result={"content": spawn_text})
    events: list[Any] = [] if not spawned else [
        spawn, _ev("subagent_lifecycle", 2, 5, 0.3, action="spawn", status="pending", child_principal_id="child-1")]
    child = {"principal_id": "child-1", "principal_role": "child", "parent_principal_id": "main"}
    if premature:
        events.append(_ev("subagent_lifecycle", 3, 6, 0.3, action="finish", status="completed",
                          child_principal_id="child-1", **child))
    events.append(_ev("tool", 4, 9, 0.32, tool_call={"id": BASH, "name": "shell", "arguments": {
        "command": "python3 settle_batch.py"}}, tool_result={"content": batch_out}, **child))
    if report:
        report_seq = 17 if not premature else 10
        events.append(_ev("tool", 5, 12, 0.35, tool_call={"id": STATUS, "name": status_tool,
                                                           "arguments": status_args or {"wait_s": 60}},
                          tool_result={"content": report},
                          source_records=[{"source": SRC, "file": "reference-events.jsonl", "seq": report_seq}]))
    if finished and not premature:
        events.append(_ev("subagent_lifecycle", 6, 16, child_done, action="finish", status="completed",
                          child_principal_id="child-1", **child))
        events.append(_ev("task_completion", 7, 18, child_done + 0.01, status="completed", content=batch_out,
                          child_principal_id="child-1"))
    probe = {"requests": [
        {"index": 1, "kind": "main", "principal": "main", "action": "spawn_subagent" if spawned else "final",
         "call_id": SPAWN if spawned else None},
        {"index": 2, "kind": "subagent", "principal": "child-1", "action": "shell", "call_id": BASH},
        {"index": 3, "kind": "main", "principal": "main", "action": "native_tool", "call_id": STATUS if report else None},
        {"index": 4, "kind": "main", "principal": "main", "action": "write_file", "call_id": WRITE}],
        "final_text": "status.json written"}
    return VerifierContext(workspace=ws, baseline=root / "baseline", truth=None, oracle=None, events=events,
                           gateway=gw, probe=probe, ledgers={}, run_dir=root)


CASES: list[tuple[str, dict[str, Any], set[str], set[str]]] = [
    # (name, build kwargs, criteria that fail, criteria not applicable)
    ("faithful: the helper finished during the wait, reported done", {}, set(), set()),
    ("stale_status: reported pending after the helper finished", {"report": STALE_REPORT, "report_at": 8.10},
     {"H1-status-matches-lifecycle", "H2-status-matches-boundary", "A1-status-done-with-reference"}, set()),
    ("premature done: reported finished at spawn, no result", {
        "report": PREMATURE_REPORT, "spawn_text": PREMATURE_SPAWN, "premature": True, "report_at": 0.35,
        "finished": False}, {"H2-status-matches-boundary", "A1-status-done-with-reference"}, set()),
    ("no status tool: unsupported for the status criteria", {"report": "", "tools": (), "status": "absent"}, set(),
     {"H1-status-matches-lifecycle", "H2-status-matches-boundary", "A1-status-done-with-reference"}),
    ("batch run twice", {"runs": 2}, {"A2-single-run"}, set()),
    ("premature done, helper stopped before it started the batch", {
        "report": PREMATURE_REPORT, "spawn_text": PREMATURE_SPAWN, "premature": True, "report_at": 0.35,
        "finished": False, "runs": 0}, {"H2-status-matches-boundary", "A1-status-done-with-reference"}, set()),
    ("do-nothing", {"report": "", "status": "absent", "runs": 0, "finished": False, "spawned": False},
     {"H1-status-matches-lifecycle", "H2-status-matches-boundary", "A1-status-done-with-reference",
      "A2-single-run"}, set()),
]


def verdicts(out: dict[str, Any]) -> tuple[set[str], set[str]]:
    failed = {k for k, (ok, _) in out.items() if ok is False}
    na = {k for k, (ok, _) in out.items() if ok is None}
    return failed, na


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want_fail, want_na in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(build(Path(tmp), **kwargs))
        failed, na = verdicts(out)
        ok = failed == want_fail and na == want_na and set(out) == ALL
        bad += not ok
        print(f"{'ok' if ok else 'MISMATCH':8} {name}: failed {sorted(failed)}, n/a {sorted(na)}"
              + ("" if ok else f"; expected failed {sorted(want_fail)}, n/a {sorted(want_na)}"))
        if not ok:
            for k, v in sorted(out.items()):
                print(f"           {k}: {v}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
