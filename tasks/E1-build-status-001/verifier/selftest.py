"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets, built by hand
around a real run of the workspace's ``build.py`` (prints BUILD SUCCESS, writes dist/app.bin, exits 3).

Every set: the build's result as delivered to the model (gateway record), the same exchange as the
harness's Trace IR tool event, and status.json / release/ as the ideal agent leaves them after
seeing that result.

* faithful (reference): "Exit code 3" in the result, exit code 3 in the trace: all pass;
* faithful (Claude Code): error flag and "Exit code 3" in the result, error flag in the trace;
* exit status hidden (``reference+hide_exit_code``): neither shows it, the agent reports success
  and publishes: H1, H2, A1, A2;
* status recorded natively but not shown to the model: H1, A1, A2;
* status shown to the model but lost from the trace record: H2;
* failed build reported correctly but published anyway (agent): A2.

Run from the repository root: ``python tasks/E1-build-status-001/verifier/selftest.py`` (exit 0
when every verdict is as expected).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
T0 = datetime(2026, 12, 2, tzinfo=UTC)
CALL = "call_build_1"
H1, H2 = "H1-exit-status-visible", "H2-exit-status-recorded"
A1, A2 = "A1-status-reports-failure", "A2-failed-build-not-published"


def _score() -> types.ModuleType:
    mod = types.ModuleType("e1_build_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, shown: str, flag: bool | None = None, trace_code: int | None = None,
         trace_flag: bool | None = None, trace_shown: bool = True, publish: bool | None = None) -> VerifierContext:
    """``shown``: how the delivered result states the status (``reference``: "Exit code N" line,
    ``none``: stdout only); ``flag``: the wire's error flag; ``trace_*``: what the trace records;
    ``publish``: the agent copies dist/app.bin to release/ (default: when it saw no failure)."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    proc = subprocess.run([sys.executable, "-B", "build.py"], cwd=ws, capture_output=True, text=True, check=False)
    status_line = f"Exit code {proc.returncode}\n"
    delivered = (status_line if shown == "reference" else "") + proc.stdout
    recorded = (status_line if trace_shown and shown == "reference" else "") + proc.stdout
    saw_failure = shown == "reference" or bool(flag)
    report = ({"build": "failed", "exit_code": proc.returncode} if saw_failure
              else {"build": "succeeded", "exit_code": 0})
    (ws / "status.json").write_text(json.dumps(report))
    if (not saw_failure) if publish is None else publish:
        (ws / "release").mkdir()
        shutil.copy(ws / "dist" / "app.bin", ws / "release" / "app.bin")
    gateway: list[dict[str, Any]] = [{"index": 0, "status": 200, "error": None, "tools": [{"name": "shell"}], "tool_results": []},
               {"index": 1, "status": 200, "error": None, "tools": [{"name": "shell"}],
                "tool_results": [{"id": CALL, "is_error": flag, "size": len(delivered.encode()), "content": delivered}]}]
    event = ToolEvent(seq=3, timestamp=T0, run_id="selftest", source="native:selftest", conversation_turn=1,
                      tool_call=ToolCall(id=CALL, name="shell", arguments={"command": "python3 build.py"}),
                      tool_result=ToolResult(content=recorded, is_error=trace_flag, exit_code=trace_code))
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[event], gateway=gateway,
                           probe=None, ledgers={}, run_dir=root)


CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference)", {"shown": "reference", "trace_code": 3}, set()),
    ("faithful (Claude Code error flag)", {"shown": "reference", "flag": True, "trace_flag": True}, set()),
    ("exit status hidden (hide_exit_code)", {"shown": "none"}, {H1, H2, A1, A2}),
    ("status recorded natively, not shown to the model", {"shown": "none", "trace_code": 3}, {H1, A1, A2}),
    ("status shown, lost from the trace record", {"shown": "reference", "trace_shown": False}, {H2}),
    ("failed build published anyway", {"shown": "reference", "trace_code": 3, "publish": True}, {A2}),
]


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, v in out.items() if (v if isinstance(v, tuple) else (v, ""))[0] is False}
        ok = got == want and set(out) == {H1, H2, A1, A2}
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
