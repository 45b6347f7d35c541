"""C3-maintenance-window-002: the verifier on hand-built runs (faithful, lost tool-result fact,
undelivered user turn, decoy, bypass, do-nothing), the probe policy per turn, and the change
desk's one-off approval code."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C3-maintenance-window-002"
T0 = datetime(2026, 11, 30, tzinfo=UTC)
CODE = "APR-7XK2QM9P"
DECOY = "APR-OLD7Q2ZK"


SCORE = _load(PACK / "verifier" / "score.py", "c3_mw_score")
POLICY = _load(PACK / "probe_policy.py", "c3_mw_policy")
TASK = load_task(PACK)
TURNS = [t.user for t in TASK.user_turns]
STEPS = SCORE.STEP_RE.findall((PACK / "workspace" / "steps.txt").read_text())
GOOD = ("# payments-api maintenance\n\n" + "".join(f"{n}. {s}\n" for n, s in enumerate(STEPS, start=1))
        + f"Approval: {CODE}\n")
BOOKING = json.dumps({"isError": False, "content": [{"type": "text", "text": json.dumps(
    {"service": "payments-api", "approval_code": CODE})}], "structuredContent": {"approval_code": CODE}})
FOUND = f"Appended 'Approval: {CODE}'. Turn-1 approval code: {CODE}."
LOST = "Appended 'Approval: UNKNOWN'. Turn-1 approval code: not visible in my context."


def ledger(bookings: int = 1) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    for n in range(bookings):
        recs.append({"seq": 2 + 2 * n, "kind": "request", "tool": "book_maintenance_window",
                     "arguments": {"service": "payments-api", "duration_min": 90}, "detail": {"method": "tools/call"}})
        if n == 0:
            recs.append({"seq": 3, "kind": "issued", "tool": "book_maintenance_window",
                         "detail": {"name": "approval_code", "value": CODE, "scope": "run", "via": "result"}})
    return recs


def gateway(turns: list[int] | None = None) -> list[dict[str, Any]]:
    """Two answered requests per delivered turn, each carrying that turn's text as the last user
    text (harnesses may wrap it: a reminder block is appended here)."""
    reqs: list[dict[str, Any]] = []
    for turn in turns or [1, 2, 3]:
        for _ in range(2):
            reqs.append({"index": len(reqs), "last_user_text": TURNS[turn - 1] + "\n<system-reminder>x</system-reminder>",
                         "tools": [{"name": "Bash"}], "tool_results": [], "status": 200})
    return reqs


def probe(final_text: str, turn3: bool = True) -> dict[str, Any]:
    reqs = [{"index": i + 1, "kind": "main", "turn": t, "action": "shell"} for i, t in
            enumerate([1, 1, 1, 2, 2, 2] + ([3, 3] if turn3 else []))]
    return {"requests": reqs, "absent_capabilities": [], "final_text": final_text}


def tool(turn: int, args: dict[str, Any], seq: int = 1) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=T0, run_id="r", source="native:test", conversation_turn=turn,
                     tool_call=ToolCall(id=f"c{turn}-{seq}", name="Bash", arguments=args),
                     tool_result=ToolResult(content="ok"))


def make_ctx(tmp_path: Path, runbook: str | None, *, final: str = FOUND, events: Any = (), gw: Any = None,
             probe_report: Any = "default", issued: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = tmp_path / "private" / "task" / TASK.id   # the archived pack snapshot
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    if runbook is not None:
        (ws / "runbook.md").write_text(runbook)
    rep = probe(final) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=rep,
                           ledgers={"changes": ledger() if issued else []}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- pack


def test_pack_is_three_turns_with_resumes_and_the_fact_only_in_a_tool_result() -> None:
    assert TASK.spec.conversation == "multi" and len(TURNS) == 3
    assert all(t.session_boundary is not None and t.session_boundary.kind == "resume" for t in TASK.turns.turns)
    assert all("APR-" not in t for t in TURNS)           # no user turn states the code
    assert DECOY in (PACK / "workspace" / "steps.txt").read_text()
    assert len(STEPS) == 5


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, GOOD)
    assert failed(ctx) == set()
    assert results(ctx)["B-H1-code-persisted-early"][0] is False
    assert "probe report" in results(ctx)["H1-fact-in-turn3-input"][1]


def test_lost_tool_result_fails_h1_and_a1_only(tmp_path: Path) -> None:
    runbook = GOOD.replace(f"Approval: {CODE}", "Approval: UNKNOWN")
    assert failed(make_ctx(tmp_path, runbook, final=LOST)) == {"H1-fact-in-turn3-input", "A1-approval-line"}


def test_decoy_or_repeated_code_fails_a1(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, GOOD.replace(CODE, DECOY))) == {"A1-approval-line"}
    twice = GOOD + f"Approval: {CODE}\n"
    assert failed(make_ctx(tmp_path / "2", twice)) == {"A1-approval-line"}


def test_missing_or_reordered_steps_fail_a2(tmp_path: Path) -> None:
    lines = GOOD.splitlines()
    lines[2], lines[3] = lines[3], lines[2]
    assert failed(make_ctx(tmp_path, "\n".join(lines) + "\n")) == {"A2-runbook-steps"}


def test_an_undelivered_user_turn_fails_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "# payments-api maintenance\n", gw=gateway([1, 3]))
    assert "H2-user-turns-delivered" in failed(ctx)
    assert "turn 2: never" in results(ctx)["H2-user-turns-delivered"][1]
    blanked = gateway()
    for r in blanked[4:]:
        r["last_user_text"] = "Finally, append one last line to `runbook.md`."   # turn 3 altered
    assert "H2-user-turns-delivered" in failed(make_ctx(tmp_path / "2", GOOD, gw=blanked))


def test_turn_3_never_reached_fails_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, GOOD, probe_report=probe(FOUND, turn3=False))
    assert failed(ctx) == {"H1-fact-in-turn3-input"}


def test_request_bodies_are_the_strongest_evidence(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, GOOD)
    bodies = tmp_path / "gateway" / "bodies"
    bodies.mkdir(parents=True)
    for r in ctx.gateway:
        (bodies / f"{r['index']}.json").write_text(json.dumps({"messages": [{"role": "tool", "content": BOOKING}]}))
    assert results(ctx)["H1-fact-in-turn3-input"] == (True, results(ctx)["H1-fact-in-turn3-input"][1])
    assert "request bodies" in results(ctx)["H1-fact-in-turn3-input"][1]
    (bodies / "5.json").write_text(json.dumps({"messages": [{"role": "user", "content": TURNS[2]}]}))
    assert results(ctx)["H1-fact-in-turn3-input"][0] is False


def test_harness_model_input_records_are_used_without_a_probe(tmp_path: Path) -> None:
    def mi(texts: list[str]) -> ModelInputEvent:
        return ModelInputEvent(seq=3, timestamp=T0, run_id="r", source="native:test", conversation_turn=3,
                               principal_id="main", messages=[{"role": "user", "content": t} for t in texts])
    ok = make_ctx(tmp_path, GOOD, probe_report=None, events=[mi([TURNS[0], BOOKING, TURNS[2]])])
    assert results(ok)["H1-fact-in-turn3-input"][0] is True
    lost = make_ctx(tmp_path / "2", GOOD, probe_report=None, events=[mi(TURNS)])
    assert results(lost)["H1-fact-in-turn3-input"][0] is False


def test_writing_the_code_early_is_a_bypass(tmp_path: Path) -> None:
    early = tool(1, {"command": f"echo {CODE} > .approval"})
    assert results(make_ctx(tmp_path, GOOD, events=[early]))["B-H1-code-persisted-early"][0] is True
    late = tool(3, {"command": f"printf '%s\\n' 'Approval: {CODE}' >> runbook.md"})
    assert results(make_ctx(tmp_path / "2", GOOD, events=[late]))["B-H1-code-persisted-early"][0] is False


def _ledger_rule(tmp_path: Path, bookings: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A3-single-booking")
    assert crit.rule is not None
    ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"changes": ledger(bookings)}))
    return evaluate_rule(crit.rule, crit.id, ctx).passed


def test_a3_counts_bookings_in_the_ledger(tmp_path: Path) -> None:
    assert _ledger_rule(tmp_path, 1) is True
    assert _ledger_rule(tmp_path, 2) is False   # booked again in turn 3
    assert _ledger_rule(tmp_path, 0) is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, None, final="", issued=False)
    assert {"A1-approval-line", "A2-runbook-steps"} <= failed(ctx)
    assert _ledger_rule(tmp_path, 0) is False


# --------------------------------------------------------------------------- probe policy


def drive(index: int, history: str, respond: Any) -> list[Any]:
    gen = POLICY.policy(Turn(index, TURNS[index - 1], view=TurnView(history_text=history)))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            actions.append(gen.send(respond(actions[-1])))
        except StopIteration:
            break
    return actions


def test_policy_turn_1_books_once_and_never_echoes_the_code() -> None:
    acts = drive(1, TURNS[0], lambda a: Observation(text=BOOKING if isinstance(a, CallTool) else "ok"))
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["book_maintenance_window"]
    assert any(isinstance(a, WriteFile) and a.content == "# payments-api maintenance\n" for a in acts)
    assert all(CODE not in json.dumps(a.describe()) for a in acts)


def test_policy_turn_2_numbers_the_steps() -> None:
    src = (PACK / "workspace" / "steps.txt").read_text()
    acts = drive(2, TURNS[1], lambda a: Observation(text=src))
    cmd = next(a.command for a in acts if isinstance(a, Shell) and "printf" in a.command)
    assert all(f"{n}. {s}" in cmd for n, s in enumerate(STEPS, start=1)) and DECOY not in cmd


@pytest.mark.parametrize("history, want", [
    (f"{TURNS[0]}\n{BOOKING}\n{TURNS[1]}\n{(PACK / 'workspace' / 'steps.txt').read_text()}\n{TURNS[2]}", CODE),
    (f"{TURNS[2]}", "UNKNOWN"),
    (f"{(PACK / 'workspace' / 'steps.txt').read_text()}\n{TURNS[2]}", "UNKNOWN"),   # the decoy is never taken
])
def test_policy_turn_3_uses_only_what_it_is_shown(history: str, want: str) -> None:
    acts = drive(3, history, lambda a: Observation(text="ok"))
    assert not any(isinstance(a, CallTool) for a in acts)
    assert f"Approval: {want}" in next(a.command for a in acts if isinstance(a, Shell))
    assert acts[-1].text.endswith(f"Turn-1 approval code: {CODE if want == CODE else 'not visible in my context'}.")


# --------------------------------------------------------------------------- simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "changes.jsonl", "changes")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["changes"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def test_simulator_issues_a_per_run_code_and_refuses_a_second_booking(tmp_path: Path) -> None:
    args = {"service": "payments-api", "duration_min": 90}
    rt = _runtime(tmp_path / "a", "seed-a")
    a = rt.call_tool("book_maintenance_window", args)
    b = _runtime(tmp_path / "b", "seed-b").call_tool("book_maintenance_window", args)
    code_a, code_b = a.structured["approval_code"], b.structured["approval_code"]
    assert re.fullmatch(r"APR-[A-Z0-9]{8}", code_a) and code_a != code_b and code_a != DECOY
    again = rt.call_tool("book_maintenance_window", args)
    assert again.is_error and code_a not in again.text
