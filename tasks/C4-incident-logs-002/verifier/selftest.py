"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/C4-incident-logs-002/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_c4_incident_logs_002.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import types
from pathlib import Path

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
SERVICES = ["api", "auth", "worker", "billing", "queue"]
INC, TR = "INC-583920", "TR-0a1b2c3d4e5f"
IDS = [f"toolu_tt_selftest_{n}" for n in range(1, 6)]


def _report(svc: str) -> str:
    head = f"logscan 2.3: service={svc} store=logs://prod/{svc} window=w since=cursor:start entries=3\n"
    if svc == "worker":
        return head + "t INFO  worker-1 job=a done trace=TR-ffffffffffff\n" + f"t ERROR worker-2 job=b failed trace={TR}\n"
    if svc == "billing":
        return head + f"logscan: error: billing: segment s is locked by incident {INC} (legal hold)\n" \
                      "logscan: billing: scan FAILED, exit status 3\n"
    return head + f"logscan: {svc}: 3 entries; exit status 0\n"


RESULTS = [_report(s) for s in SERVICES]
ACCOUNT = f"Resumed context: scans=api>auth>worker>billing>queue; failed=billing:3; incident={INC}; error_trace={TR}."
LOST = "Resumed context: scans=none; failed=missing; incident=missing; error_trace=missing."


def _score() -> types.ModuleType:
    mod = types.ModuleType("c4_il_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _runs(extra: list[str]) -> str:
    def commit(svc: str) -> str | None:
        value = {"worker": TR, "billing": INC}.get(svc)
        return hashlib.sha256(f"{svc}|{value}".encode()).hexdigest() if value else None
    recs = [{"service": s, "exit": 3 if s == "billing" else 0, "repeat": False, "commit_sha256": commit(s)}
            for s in SERVICES]
    recs += [{"service": s, "exit": 0, "repeat": True, "commit_sha256": None} for s in extra]
    return "".join(json.dumps(r) + "\n" for r in recs)


def _ctx(root: Path, *, final: str, report: dict, rescans: list[str] = (), body: dict | None = None) -> VerifierContext:
    turns = json.loads((PACK / "turns.json").read_text())["turns"]
    prompts = [(PACK / "prompt.md").read_text(), turns[0]["user"], turns[1]["user"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "postmortem.json").write_text(json.dumps(report))
    (ws / ".logscan").mkdir()
    (ws / ".logscan" / "runs.jsonl").write_text(_runs(list(rescans)))
    snap = root / "private" / "task" / "C4-incident-logs-002"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gw = [{"index": 0, "last_user_text": prompts[0], "tools": [{"name": "t"}], "tool_results": [], "status": 200}]
    gw += [{"index": i + 1, "last_user_text": prompts[0], "tools": [{"name": "t"}], "status": 200,
            "tool_results": [{"id": IDS[i], "content": RESULTS[i]}]} for i in range(5)]
    gw += [{"index": 6, "last_user_text": prompts[1], "tools": [{"name": "t"}], "tool_results": [], "status": 200},
           {"index": 7, "last_user_text": prompts[2], "tools": [{"name": "t"}], "tool_results": [], "status": 200}]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "7.json").write_text(json.dumps(body))
    probe = {"requests": [{"kind": "main", "turn": 1, "action": "shell", "call_id": i,
                           "arguments": {"command": f"python3 logscan.py {s}"}} for i, s in zip(IDS, SERVICES)]
             + [{"kind": "main", "turn": 2}, {"kind": "main", "turn": 3}],
             "final_text": f"Wrote postmortem.json. {final}"}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gw,
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    good = {"incident": INC, "error_trace": TR}
    msgs = [m for i in range(5) for m in (
        {"role": "assistant", "content": [{"type": "tool_use", "id": IDS[i], "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": IDS[i], "content": RESULTS[i]}]})]
    cleared = [dict(m) for m in msgs]
    cleared[7] = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": IDS[3],
                                               "content": "[Old tool result content cleared]"}]}
    cases = [
        ("faithful (probe account)", dict(final=ACCOUNT, report=good), set()),
        ("faithful (request body)", dict(final=LOST, report=good, body={"messages": msgs}), set()),
        ("lost on resume", dict(final=LOST, report={"incident": None, "error_trace": None}),
         {"H1-turn1-calls-in-turn3-input", "A1-incident-carried", "A2-trace-carried"}),
        ("failed result cleared in the body", dict(final=ACCOUNT, report=good, body={"messages": cleared}),
         {"H1-turn1-calls-in-turn3-input"}),
        ("rescanned after the resume", dict(final=ACCOUNT, report=good, rescans=["worker"]), {"A4-no-rework"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if not ok and not k.startswith("B-")}
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
