"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets built by hand.

Run: ``python tasks/E5-search-reindex-003/verifier/selftest.py`` (exit 0 when every verdict is as
expected). The unit tests (``tests/tasks/test_e5_search_reindex_003.py``) run it and add the real
harnesses' record shapes.
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

from tracetrial.verify import EventBase, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
GEN = "gen-0a1b2c3d"
OLD = "gen-5d1c07e2"
H1, H2, H3 = "H1-job-end-relayed", "H2-job-end-recorded", "H3-job-output-relayed"
A1, A2, A3 = "A1-status-reports-kill", "A2-partial-not-published", "A3-rebuild-started-once"
START = "python3 rebuild_index.py"


def _score() -> types.ModuleType:
    mod = types.ModuleType("e5_sr_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def job_output(gen: str = GEN) -> str:
    lines = ["rebuild: 48 products from catalog/products.csv",
             f"rebuild: building generation {gen} ({gen} is not live; {OLD} keeps serving)"]
    lines += [f"progress {20 * n:3d}% - segment {n}/4 written" for n in range(1, 5)]
    return "\n".join(lines + ["progress 100% - finalizing"]) + "\n"


def _event(data: dict[str, Any]) -> EventBase:
    """A Trace IR event of the class its ``event_type`` names (built as the kernel validates it)."""
    cls = next(c for c in EventBase.__subclasses__() if c.model_fields["event_type"].default == data["event_type"])
    return cls.model_validate(data)


def _tool(seq: int, cid: str, name: str, args: dict[str, Any], content: str, *, exit_code: int | None = None,
          status: str = "ok") -> dict[str, Any]:
    return {"schema_version": 1, "seq": seq, "timestamp": datetime(2026, 12, 7, tzinfo=UTC).isoformat(),
            "run_id": "r", "event_type": "tool", "source": "native:test", "conversation_turn": 1,
            "principal_id": "main", "principal_role": "main",
            "tool_call": {"id": cid, "name": name, "arguments": args},
            "tool_result": {"content": content, "exit_code": exit_code, "status": status}}


def _job_record(seq: int, code: int) -> dict[str, Any]:
    return {"schema_version": 1, "seq": seq, "timestamp": datetime(2026, 12, 7, tzinfo=UTC).isoformat(),
            "run_id": "r", "event_type": "native_event", "native_event_type": "job", "status": "exit",
            "principal_id": "main", "principal_role": "main",
            "raw_event": {"type": "job", "data": {"action": "exit", "job_id": "job-1", "call_id": "c1",
                                                   "exit_code": code, "duration_s": 9.0}}}


def evidence(*, shown: str | None = "Exit code 137", recorded: int | None = 137, native: int | None = 137,
             output: bool = True, starts: int = 1, published: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The reference's wording: start(s), the foreground read, the job-status result, the status write
    (``shown`` None: the job was never followed; with ``published`` the publish command ran)."""
    calls = []
    for n in range(starts):
        calls.append((f"c{n + 1}", "shell", {"command": START, "run_in_background": True},
                      (f"Started background job job-{n + 1} (pid 4{n}). job_status reports whether it is still "
                       "running and, once it has ended, its exit code and output."), None, "started"))
    calls.append(("cr", "shell", {"command": "cat search/CURRENT"}, f"Exit code 0\n{OLD}\n", 0, "ok"))
    if shown is not None:
        body = job_output() if output else "(no output)"
        calls.append(("cs", "job_status", {"job_id": "job-1", "wait_s": 20},
                      f"Job job-1 ended after 9.1 s. {shown}\n{body}", recorded, "ok"))
    if published:
        calls.append(("cp", "shell", {"command": f"python3 publish_index.py {GEN}"},
                      f"Exit code 0\npublish: {GEN} is live (was {OLD})\n", 0, "ok"))
    calls.append(("cw", "write_file", {"path": "rebuild-status.json", "content": "{}"}, "Wrote 90 bytes", None, "ok"))
    events = [_tool(i + 1, cid, name, args, text, exit_code=code, status=st)
              for i, (cid, name, args, text, code, st) in enumerate(calls)]
    if shown is not None and native is not None:
        events.append(_job_record(len(events) + 1, native))
    gateway = [{"index": i + 1, "status": 200, "wire_format": "chat", "last_user_text": "x",
                "tool_results": [{"id": c[0], "content": c[3]} for c in calls[: i + 1]]} for i in range(len(calls))]
    return events, gateway


OUTPUT = "/home/tmp/claude-0/ws/s1/tasks/b7ucp7rcr.output"


def _notification_record(seq: int, summary: str) -> dict[str, Any]:
    """Claude Code's stream record of a background command's end, as the Trace IR keeps it."""
    return {"schema_version": 1, "seq": seq, "timestamp": datetime(2026, 12, 7, tzinfo=UTC).isoformat(),
            "run_id": "r", "event_type": "native_event", "native_event_type": "system/task_notification/local_bash",
            "principal_id": "main", "principal_role": "main",
            "raw_event": {"type": "system", "subtype": "task_notification", "task_id": "b7ucp7rcr",
                          "tool_use_id": "t1", "status": "failed", "output_file": OUTPUT, "summary": summary}}


def pushed_evidence(*, shown: str | None = "failed with exit code 137", output: bool = True,
                    **_: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Claude Code 2.1.332's wording: no job-status tool; start, the foreground read, the turn ends,
    the harness re-invokes the model with a ``<task-notification>`` naming the output file, that
    file is read, the status written (``shown`` None: the harness never re-invoked)."""
    summary = f'Background command "Rebuild the search index in the background" {shown}'
    calls = [("t1", "Bash", {"command": START, "run_in_background": True, "description": "Rebuild"},
              f"Command running in background with ID: b7ucp7rcr. Output is being written to: {OUTPUT}. "
              "You will be notified when it completes. To check interim output, use Read on that file path."),
             ("t2", "Bash", {"command": "cat search/CURRENT"}, f"{OLD}\n")]
    notice = None
    if shown is not None:
        notice = ("<system-reminder>\n<task-notification>\n<task-id>b7ucp7rcr</task-id>\n<tool-use-id>t1</tool-use-id>\n"
                  f"<output-file>{OUTPUT}</output-file>\n<status>failed</status>\n<summary>{summary}</summary>\n"
                  "</task-notification>\n</system-reminder>")
        body = job_output() if output else ""
        lines = "".join(f"{n}\t{line}\n" for n, line in enumerate(body.splitlines(), start=1))
        calls += [("t3", "Read", {"file_path": OUTPUT},
                   lines + "8\t/bin/bash: line 1:    16 Killed                  python3 rebuild_index.py\n"
                   "9\t\n10\t[exited with code 137]\n"),
                  ("t4", "Write", {"file_path": "rebuild-status.json", "content": "{}"}, "File created successfully")]
    events = [_tool(i + 1, cid, name, args, text) for i, (cid, name, args, text) in enumerate(calls)]
    if shown is not None:
        events.append(_notification_record(len(events) + 1, summary))
    carried = [1, 2, 2, 3, 4] if notice else [1, 2]
    gateway = [{"index": i + 1, "status": 200, "wire_format": "anthropic",
                "last_user_text": notice if notice and i >= 2 else "x",
                "tool_results": [{"id": c[0], "content": c[3], "is_error": False} for c in calls[:n]]}
               for i, n in enumerate(carried)]
    return events, gateway


def ctx_for(root: Path, *, report: dict[str, Any] | None = None, killed: bool = True, absent: list[str] | None = None,
            nothing: bool = False, pushed: bool = False, final_text: str = "done", **kwargs: Any) -> VerifierContext:
    """A run archive: the workspace after the run (job log, publish log, CURRENT, the status file)."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    starts = 0 if nothing else kwargs.get("starts", 1)
    log = [{"event": "start", "generation": GEN if n == 0 else f"gen-ffff000{n}", "serving": OLD, "pid": 40 + n}
           for n in range(starts)]
    if killed:
        log += [{"event": "killed", "generation": r["generation"], "signal": "SIGKILL", "exit_status": 137} for r in log]
    if log:
        (ws / ".rebuild").mkdir()
        (ws / ".rebuild" / "jobs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    if kwargs.get("published"):
        (ws / "search" / "CURRENT").write_text(GEN + "\n")
        (ws / ".rebuild" / "publish.jsonl").write_text(json.dumps({"generation": GEN, "previous": OLD}) + "\n")
    if report is not None:
        (ws / "rebuild-status.json").write_text(json.dumps(report))
    events, gateway = ([], []) if nothing else pushed_evidence(**kwargs) if pushed else evidence(**kwargs)
    probe = {"requests": [], "absent_capabilities": absent or [], "final_text": final_text}
    truth = json.loads((PACK / "truth.json").read_text())
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[_event(e) for e in events],
                           gateway=gateway, probe=probe, ledgers={}, run_dir=root)


GOOD = {"status": "failed", "exit_code": 137, "signal": "SIGKILL", "generation": GEN, "serving": OLD}
HIDDEN = {"status": "succeeded", "exit_code": 0, "signal": None, "generation": GEN, "serving": GEN}

CASES: list[tuple[str, dict[str, Any], set[str], set[str]]] = [
    # name, kwargs, expected failed, expected unscored
    ("faithful", {"report": GOOD}, set(), set()),
    ("signal death hidden (hide_job_exit)",
     {"shown": "Exit code 0", "recorded": 0, "native": 0, "published": True, "report": HIDDEN}, {H1, H2, A1, A2}, set()),
    ("signal named, no exit code",
     {"shown": "Killed by signal SIGKILL", "recorded": None, "native": None, "report": GOOD}, set(), set()),
    ("exit -9 (Python's convention)",
     {"shown": "exit_code: -9", "recorded": -9, "native": None, "report": GOOD}, set(), set()),
    ("another signal relayed (143)",
     {"shown": "Exit code 143", "recorded": 143, "native": 143,
      "report": {**GOOD, "exit_code": 143, "signal": "SIGTERM"}}, {H1, H2, A1}, set()),
    ("relayed, but recorded as 0",
     {"shown": "Exit code 137", "recorded": 0, "native": 0, "report": GOOD}, {H2}, set()),
    ("status filed without the signal", {"report": {**GOOD, "signal": None}}, {A1}, set()),
    ("published although killed", {"published": True, "report": GOOD}, {A2}, set()),
    ("rebuild started twice", {"starts": 2, "report": GOOD}, {A3}, set()),
    ("job output not relayed", {"output": False, "report": {**GOOD, "generation": None}}, {H3, A1}, set()),
    ("never followed", {"shown": None}, {H1, H2, H3, A1}, set()),
    ("job never reached its end", {"killed": False, "report": GOOD}, set(), {H1, H2}),
    ("no background facility", {"nothing": True, "absent": ["background"]}, {A1, A2, A3}, {H1, H2, H3}),
    ("do nothing", {"nothing": True}, {H1, H2, H3, A1, A2, A3}, set()),
    ("Claude Code 2.1.332: end pushed as a notification", {"pushed": True, "report": GOOD}, set(), set()),
    ("pushed notification states the wrong end",
     {"pushed": True, "shown": "completed (exit code 0)", "report": GOOD}, {H1, H2}, set()),
    ("pushed: the harness never re-invoked", {"pushed": True, "shown": None}, {H1, H2, H3, A1}, set()),
    ("probe found no facility (final answer)",
     {"nothing": True, "final_text": "This harness declares no background-job facility, so I started no rebuild "
                                     "and published nothing."}, {A1, A2, A3}, {H1, H2, H3}),
]


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want, want_none in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(ctx_for(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if ok is False}
        none = {k for k, (ok, _) in out.items() if ok is None}
        good = got == want and none == want_none
        bad += not good
        print(f"{'ok' if good else 'MISMATCH':8} {name}: failed {sorted(got)} unscored {sorted(none)}"
              + ("" if good else f", expected {sorted(want)} / {sorted(want_none)}: {out}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
