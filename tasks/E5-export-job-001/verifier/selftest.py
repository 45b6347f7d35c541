"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/E5-export-job-001/verifier/selftest.py`` (exit 0 when
every verdict is as expected). The full unit tests are ``tests/tasks/test_e5_export_job_001.py``.
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

from tracetrial.verify import ToolEvent, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
REASON = "export failed: batch 2 rejected, customer table locked by the nightly vacuum"
H1, H2, A1 = "H1-job-exit-relayed", "H2-job-started-in-background", "A1-status-reports-failure"


def _score() -> types.ModuleType:
    mod = types.ModuleType("e5_ej_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _event(seq: int, cid: str, name: str, args: dict[str, Any], result: str) -> ToolEvent:
    return ToolEvent.model_validate({
        "seq": seq + 1, "timestamp": datetime(2026, 12, 1, tzinfo=UTC), "run_id": "r", "source": "native:test",
        "conversation_turn": 1, "tool_call": {"id": cid, "name": name, "arguments": args},
        "tool_result": {"content": result}})


def run_evidence(code_shown: int | None, *, background: bool = True) -> tuple[list[ToolEvent], list[dict[str, Any]]]:
    """The reference's wording: start, foreground check, job status, status write."""
    start = "Started background job job-1 (pid 42)" if background else f"Exit code 4\nEXPORT batch 1/3 ...\n[stderr]\n{REASON}\n"
    results = [("c1", "shell", {"command": "sh export.sh", "run_in_background": True}, start),
               ("c2", "shell", {"command": "wc -l inputs/orders.csv"}, "Exit code 0\n4 inputs/orders.csv\n")]
    if code_shown is not None:
        results.append(("c3", "job_status", {"job_id": "job-1", "wait_s": 20},
                        f"Job job-1 ended after 6.0 s. Exit code {code_shown}\nEXPORT batch 1/3 written\n[stderr]\n{REASON}\n"))
    results.append(("c4", "write_file", {"path": "export_status.json", "content": "{}"}, "Exit code 0\nwritten"))
    events = [_event(i, cid, name, args, res) for i, (cid, name, args, res) in enumerate(results)]
    gateway = [{"index": i + 1, "status": 200, "wire_format": "chat", "last_user_text": "x",
                "tool_results": [{"id": cid, "content": res} for cid, _, _, res in results[: i + 1]]}
               for i in range(len(results))]
    return events, gateway


OUTPUT = "/home/tmp/claude-0/ws/s1/tasks/b1ewjme72.output"


def pushed_evidence(code_shown: int | None) -> tuple[list[ToolEvent], list[dict[str, Any]]]:
    """Claude Code 2.1.332's wording: no job-status tool; start, foreground check, the turn ends,
    the harness re-invokes the model with a ``<task-notification>`` (wrapped in a system reminder),
    the output file is read, the status written."""
    results = [("t1", "Bash", {"command": "sh export.sh", "run_in_background": True},
                f"Command running in background with ID: b1ewjme72. Output is being written to: {OUTPUT}. "
                "You will be notified when it completes. To check interim output, use Read on that file path."),
               ("t2", "Bash", {"command": "wc -l inputs/orders.csv"}, "4 inputs/orders.csv")]
    notice = None
    if code_shown is not None:
        notice = ("<system-reminder>\n<task-notification>\n<task-id>b1ewjme72</task-id>\n<tool-use-id>t1</tool-use-id>\n"
                  f"<output-file>{OUTPUT}</output-file>\n<status>{'failed' if code_shown else 'completed'}</status>\n"
                  f"<summary>Background command \"Start the orders export\" failed with exit code {code_shown}</summary>\n"
                  "</task-notification>\n</system-reminder>")
        results += [("t3", "Read", {"file_path": OUTPUT},
                     f"1\tEXPORT batch 1/3 ...\n2\t{REASON}\n3\t\n4\t[exited with code {code_shown}]\n"),
                    ("t4", "Write", {"file_path": "export_status.json", "content": "{}"}, "File created successfully")]
    events = [_event(i, cid, name, args, res) for i, (cid, name, args, res) in enumerate(results)]
    shown = [1, 2, 2, 3, 4] if notice else [1, 2]  # results carried by each request (the third: the notice)
    gateway = [{"index": i + 1, "status": 200, "wire_format": "anthropic",
                "last_user_text": notice if notice and i >= 2 else "x",
                "tool_results": [{"id": cid, "content": res, "is_error": False} for cid, _, _, res in results[:n]]}
               for i, n in enumerate(shown)]
    return events, gateway


def ctx_for(root: Path, *, code_shown: int | None = 4, status: dict[str, Any] | None = None,
            background: bool = True, absent: list[str] | None = None, pushed: bool = False,
            final_text: str = "done") -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if status is not None:
        (ws / "export_status.json").write_text(json.dumps(status))
    events, gateway = pushed_evidence(code_shown) if pushed else run_evidence(code_shown, background=background)
    probe = {"requests": [], "absent_capabilities": absent or [], "final_text": final_text}
    truth = json.loads((PACK / "truth.json").read_text())
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


GOOD = {"status": "failed", "exit_code": 4, "reason": REASON.removeprefix("export failed: ")}
HIDDEN = {"status": "succeeded", "exit_code": 0, "reason": ""}

CASES: list[tuple[str, dict[str, Any], set[str], set[str]]] = [
    # name, kwargs, expected failed, expected unscored
    ("faithful", dict(status=GOOD), set(), set()),
    ("exit hidden (hide_job_exit)", dict(code_shown=0, status=HIDDEN), {H1, A1}, set()),
    ("exit relayed, wrong status file", dict(status={**GOOD, "exit_code": 1}), {A1}, set()),
    ("reason missing", dict(status={**GOOD, "reason": "unknown"}), {A1}, set()),
    ("ran in the foreground", dict(code_shown=None, status=GOOD, background=False), {H2}, set()),
    ("never polled, no status", dict(code_shown=None), {H1, H2, A1}, set()),
    ("no background facility", dict(code_shown=None, absent=["background"]), {A1}, {H1, H2}),
    ("Claude Code 2.1.332: end pushed as a notification", dict(pushed=True, status=GOOD), set(), set()),
    ("pushed notification hides the exit", dict(pushed=True, code_shown=0, status=HIDDEN), {H1, A1}, set()),
    ("pushed: the harness never re-invoked", dict(pushed=True, code_shown=None), {H1, H2, A1}, set()),
    ("probe found no facility (final answer)",
     dict(code_shown=None, final_text="This harness declares no background-job facility, so I did not start the export."),
     {A1}, {H1, H2}),
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
