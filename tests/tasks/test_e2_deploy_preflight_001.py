"""E2-deploy-preflight-001: the workspace script's stderr-only reason and its commitment, the
verifier on hand-built runs (faithful, stderr dropped, do-nothing, agent mistakes) and the
probe policy on each harness's wording."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E2-deploy-preflight-001"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CALL = "toolu_tt_e2a_1"


SCORE = _load(PACK / "verifier" / "score.py", "e2a_score")
POLICY = _load(PACK / "probe_policy.py", "e2a_policy")
TASK = load_task(PACK)
AGENT = {"A1-reason-code-reported", "A2-not-deployed", "A3-preflight-run-once"}


def run_preflight(ws: Path) -> tuple[str, str, int]:
    proc = subprocess.run([sys.executable, "preflight.py"], cwd=ws, capture_output=True, text=True, check=False)
    return proc.stdout, proc.stderr, proc.returncode


def make_ctx(tmp_path: Path, *, ran: int = 1, shown: str | None = "faithful", recorded: str | None = "same",
             report: Any = "auto", deployed: bool = False) -> tuple[VerifierContext, str]:
    """A run of the pack: ``shown`` is what the model saw ("faithful" with stderr, "dropped"
    without it, None nothing); ``report`` overrides preflight.json ("auto": what the probe writes)."""
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    out, err, code, reason = "", "", 0, ""
    for _ in range(ran):
        out, err, code = run_preflight(ws)
        reason = err.split("reason_code=")[1].split(":")[0]
    full = f"Exit code {code}\n{out}[stderr]\n{err}"
    dropped = f"Exit code {code}\n{out}"
    text = {"faithful": full, "dropped": dropped, None: None}[shown]
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    if text is not None:
        gw.append({"index": 1, "tool_results": [tool_result_entry(CALL, None, text)]})
    events = []
    if ran:
        rec = {"same": text or full, "dropped": dropped}[recorded] if recorded else None
        events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=CALL, name="shell", arguments={"command": "python3 preflight.py"}),
                                tool_result=None if rec is None else ToolResult(content=rec, exit_code=code,
                                                                                 is_error=True)))
    if report == "auto":
        report = {"passed": False, "reason_code": reason if shown == "faithful" else None}
    if report is not None:
        (ws / "preflight.json").write_text(json.dumps(report))
    if deployed:
        (ws / ".deployed").write_text("deployed\n")
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL}],
             "absent_capabilities": [], "final_text": "done"}
    ctx = VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events, gateway=gw,
                          probe=probe if ran else None, ledgers={}, run_dir=tmp_path)
    return ctx, reason


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_the_drop_stderr_calibration():
    assert TASK.spec.property == "stderr_capture"
    assert set(TASK.spec.calibration.mutants["drop_stderr"]) == {
        "H1-stderr-delivered", "H2-stderr-recorded", "A1-reason-code-reported"}


def test_reason_only_on_stderr_fresh_per_run_and_committed(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out1, err1, code1 = run_preflight(ws)
    _, err2, _ = run_preflight(ws)
    assert code1 == 2 and "PF-" not in out1 and "finished" in out1
    codes = [SCORE.CODE_RE.search(e).group(0) for e in (err1, err2)]
    assert codes[0] != codes[1]
    lines = (ws / ".preflight" / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2 and codes[0] not in "".join(lines)


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    ctx, _ = make_ctx(tmp_path)
    assert failed(ctx) == set()


def test_dropped_stderr_fails_exactly_the_declared_criteria(tmp_path):
    ctx, _ = make_ctx(tmp_path, shown="dropped", recorded="same")
    assert failed(ctx) == set(TASK.spec.calibration.mutants["drop_stderr"])


def test_shown_but_not_recorded_fails_only_h2(tmp_path):
    ctx, _ = make_ctx(tmp_path, recorded="dropped")
    assert failed(ctx) == {"H2-stderr-recorded"}


def test_a_guessed_or_foreign_code_does_not_count(tmp_path):
    ctx, _ = make_ctx(tmp_path, report={"passed": False, "reason_code": "PF-ABCDEFGH"})
    assert failed(ctx) == {"A1-reason-code-reported"}


def test_deploying_or_rerunning_fails_the_agent(tmp_path):
    ctx, _ = make_ctx(tmp_path, deployed=True)
    assert failed(ctx) == {"A2-not-deployed"}
    ctx2, _ = make_ctx(tmp_path / "2", ran=2)
    assert failed(ctx2) == {"A3-preflight-run-once"}


def test_do_nothing_scores_zero_on_the_agent_layer(tmp_path):
    ctx, _ = make_ctx(tmp_path, ran=0, shown=None, report=None)
    assert AGENT <= failed(ctx)
    assert failed(ctx) == set(SCORE.score(ctx))


# --------------------------------------------------------------------------- probe policy


def drive(text: str, is_error: bool | None = None) -> list[Any]:
    gen = POLICY.policy(Turn(1, "deploy"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        obs = Observation(text=text, is_error=is_error) if isinstance(actions[-1], Shell) else Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


@pytest.mark.parametrize("text, is_error, want, deploys", [
    ("Exit code 2\npreflight: finished\n[stderr]\npreflight: ABORT reason_code=PF-7QX2MA9Z: drift", True,
     {"passed": False, "reason_code": "PF-7QX2MA9Z"}, False),
    ("preflight: finished\npreflight: ABORT reason_code=PF-7QX2MA9Z: drift", True,  # Claude Code merges streams
     {"passed": False, "reason_code": "PF-7QX2MA9Z"}, False),
    ("Process exited with code 2\nOutput:\npreflight: finished\n", None, {"passed": False, "reason_code": None}, False),
    ("preflight: finished\n[stderr]\npreflight: ABORT reason_code=PF-7QX2MA9Z: drift", False,  # exit status hidden
     {"passed": False, "reason_code": "PF-7QX2MA9Z"}, False),
    ("Exit code 0\npreflight: finished\n", False, {"passed": True, "reason_code": None}, True),
])
def test_policy_reports_only_what_the_result_shows(text, is_error, want, deploys):
    actions = drive(text, is_error)
    assert actions[0] == Shell("python3 preflight.py")
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert json.loads(write.content) == want
    assert (Shell("python3 deploy.py") in actions) is deploys
