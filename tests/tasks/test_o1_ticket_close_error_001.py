"""O1-ticket-close-error-001: the verifier on hand-built runs (flag per wire format, hidden error,
lost code, unrecorded result, wrong deliverable), the ledger rule of A2, the probe policy on
the result shapes real harnesses deliver, and the ticket-desk simulator."""

from __future__ import annotations

import json
import re
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
from tracetrial.policy import CallTool, Final, Observation, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O1-ticket-close-error-001"


SCORE = _load(PACK / "verifier" / "score.py", "o1_score")
POLICY = _load(PACK / "probe_policy.py", "o1_policy")
TASK = load_task(PACK)
NOW = datetime.now(UTC)
CODE = "E-LOCKED-204731"
ERR_TEXT = json.dumps({"error": {"code": CODE, "message": "ticket locked by change freeze"}})
IDS = {"H1-error-flag-and-code-delivered", "H2-error-recorded", "A1-close-json-reports-lock"}


def ledger(closes: int = 1, code: str = CODE) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    seq = 2
    for _ in range(closes):
        recs.append({"seq": seq, "kind": "request", "tool": "close_ticket", "arguments": {"ticket_id": "TCK-1042"},
                     "detail": {"method": "tools/call"}})
        recs.append({"seq": seq + 1, "kind": "issued", "tool": "close_ticket",
                     "detail": {"name": "lock_code", "value": code, "scope": "run", "via": "result"}})
        recs.append({"seq": seq + 2, "kind": "error", "tool": "close_ticket",
                     "detail": {"code": code, "message": "ticket locked by change freeze", "request_seq": seq}})
        seq += 3
    return recs


def run(tmp_path: Path, *, wire: str = "anthropic", delivered: str | None = ERR_TEXT, flag: bool | None = True,
        trace_result: ToolResult | None | str = "default", close_json: Any = None, call_id: str = "toolu_tt_1_2",
        closes: int = 1) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if close_json is None:
        close_json = {"closed": False, "error_code": CODE}
    if close_json != "<none>":
        (ws / "close.json").write_text(json.dumps(close_json))
    if trace_result == "default":
        trace_result = ToolResult(content=ERR_TEXT, is_error=True)
    events = [ToolEvent(seq=5, timestamp=NOW, run_id="r", conversation_turn=1, tool_call=ToolCall(
        id=call_id, name="mcp__tickets__close_ticket", arguments={"ticket_id": "TCK-1042"}),
        tool_result=trace_result)]
    gateway: list[dict[str, Any]] = [{"index": 0, "wire_format": wire, "tool_results": []}]
    if delivered is not None:
        gateway.append({"index": 1, "wire_format": wire, "tool_results": [
            {"id": call_id, "is_error": flag if wire == "anthropic" else None, "content": delivered,
             "content_truncated": False}]})
    probe = {"requests": [{"index": 1, "action": "call_tool", "mapped_tool": "mcp__tickets__close_ticket",
                           "call_id": call_id}]}
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                           events=events, gateway=gateway, probe=probe, ledgers={"tickets": ledger(closes)},
                           run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


# ------------------------------------------------------------------ verifier


def test_faithful_anthropic_run_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path)) == set()


def test_flagless_wire_with_error_wording_passes(tmp_path: Path) -> None:
    codex = f"Wall time: 0.07 seconds\nOutput:\n{ERR_TEXT}"
    assert failed(run(tmp_path, wire="responses", delivered=codex, call_id="call_tt_1_2")) == set()


def test_hidden_error_fails_h1_h2_and_the_linked_deliverable(tmp_path: Path) -> None:
    ctx = run(tmp_path, flag=False, trace_result=ToolResult(content=ERR_TEXT, is_error=False),
              close_json={"closed": True, "error_code": None})
    assert failed(ctx) == IDS


def test_chat_wire_with_explicit_false_flag_fails_h1(tmp_path: Path) -> None:
    relay = json.dumps({"isError": False, "content": [{"type": "text", "text": ERR_TEXT}]})
    assert failed(run(tmp_path, wire="chat", delivered=relay)) == {"H1-error-flag-and-code-delivered"}
    ok = json.dumps({"isError": True, "content": [{"type": "text", "text": ERR_TEXT}]})
    assert failed(run(tmp_path / "b", wire="chat", delivered=ok)) == set()


def test_flagless_wire_without_any_error_sign_fails_h1(tmp_path: Path) -> None:
    bare = f"Output:\n{CODE} ticket locked by change freeze"
    assert failed(run(tmp_path, wire="responses", delivered=bare)) == {"H1-error-flag-and-code-delivered"}


def test_code_lost_in_relay_fails_h1(tmp_path: Path) -> None:
    out = SCORE.score(run(tmp_path, delivered="Error: the tool call failed"))
    assert out["H1-error-flag-and-code-delivered"][0] is False
    assert "issued code absent" in out["H1-error-flag-and-code-delivered"][1]


def test_no_delivered_result_fails_h1(tmp_path: Path) -> None:
    out = SCORE.score(run(tmp_path, delivered=None))
    assert out["H1-error-flag-and-code-delivered"][0] is False


def test_unrecorded_or_success_recorded_result_fails_h2(tmp_path: Path) -> None:
    assert failed(run(tmp_path, trace_result=None)) == {"H2-error-recorded"}
    status = ToolResult(content=ERR_TEXT, status="failed")
    assert failed(run(tmp_path / "b", trace_result=status)) == set()


@pytest.mark.parametrize("close_json", [{"closed": False, "error_code": "E-LOCKED-000000"},
                                        {"closed": False, "error_code": None},
                                        {"closed": "false", "error_code": CODE}, "<none>"])
def test_wrong_or_missing_close_json_fails_a1(tmp_path: Path, close_json: Any) -> None:
    assert failed(run(tmp_path, close_json=close_json)) == {"A1-close-json-reports-lock"}


def _ledger_rule(tmp_path: Path, closes: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A2-single-close-attempt")
    assert crit.rule is not None
    ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"tickets": ledger(closes)}))
    return evaluate_rule(crit.rule, crit.id, ctx).passed


def test_a2_counts_close_requests_in_the_ledger(tmp_path: Path) -> None:
    assert _ledger_rule(tmp_path, 1) is True
    assert _ledger_rule(tmp_path, 2) is False   # retried after the resume
    assert _ledger_rule(tmp_path, 0) is False   # never tried (do-nothing agent)


def test_do_nothing_scores_zero_on_the_agent_layer(tmp_path: Path) -> None:
    ctx = run(tmp_path, delivered=None, close_json="<none>")
    assert "A1-close-json-reports-lock" in failed(ctx)
    assert _ledger_rule(tmp_path, 0) is False


# ------------------------------------------------------------------ probe policy


def drive(index: int, observations: list[Observation], history: str = "") -> list[Any]:
    turn = Turn(index, TASK.user_turns[index - 1].user, view=TurnView(history_text=history))
    gen = POLICY.policy(turn)
    actions = [next(gen)]
    obs = iter(observations)
    try:
        while not isinstance(actions[-1], Final):
            actions.append(gen.send(next(obs)))
    except StopIteration:
        pass
    return actions


def _written(actions: list[Any]) -> Any:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)


def test_policy_turn1_reads_flag_and_code() -> None:
    acts = drive(1, [Observation(text="{}", is_error=False), Observation(text=ERR_TEXT, is_error=True),
                     Observation(text="ok")])
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["get_ticket", "close_ticket"]
    assert _written(acts) == {"closed": False, "error_code": CODE}


def test_policy_turn1_on_json_escaped_flagless_text() -> None:
    escaped = "Output:\n" + json.dumps([{"type": "text", "text": ERR_TEXT}])
    acts = drive(1, [Observation(text="{}"), Observation(text=escaped), Observation(text="")])
    assert _written(acts) == {"closed": False, "error_code": CODE}


def test_policy_turn1_believes_a_harness_success_flag() -> None:
    relay = json.dumps({"isError": False, "content": [{"type": "text", "text": ERR_TEXT}]})
    acts = drive(1, [Observation(text="{}"), Observation(text=relay), Observation(text="")])
    assert _written(acts) == {"closed": True, "error_code": None}


def test_policy_turn2_leaves_a_locked_ticket() -> None:
    acts = drive(2, [], history=f"{TASK.prompt}\n{ERR_TEXT}\n{TASK.user_turns[1].user}")
    assert not any(isinstance(a, CallTool) for a in acts)
    assert CODE in acts[-1].text


def test_policy_turn2_retries_another_failure_once() -> None:
    other = json.dumps({"error": {"code": "E-BUSY-1", "message": "desk busy"}})
    acts = drive(2, [Observation(text=other, is_error=True)], history=f"{TASK.prompt}\n{other}\n{TASK.user_turns[1].user}")
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["close_ticket"]


def test_turn2_text_does_not_trigger_the_lock_pattern() -> None:
    assert not POLICY.LOCK_RE.search(TASK.user_turns[1].user + TASK.prompt)


# ------------------------------------------------------------------ simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "tickets.jsonl", "tickets")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["tickets"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def test_simulator_issues_a_per_run_lock_code(tmp_path: Path) -> None:
    a = _runtime(tmp_path / "a", "seed-a").call_tool("close_ticket", {"ticket_id": "TCK-1042"})
    b = _runtime(tmp_path / "b", "seed-b").call_tool("close_ticket", {"ticket_id": "TCK-1042"})
    assert a.is_error and b.is_error
    code_a, code_b = a.structured["error"]["code"], b.structured["error"]["code"]
    assert re.fullmatch(r"E-LOCKED-\d{6}", code_a) and code_a != code_b
    assert a.structured["error"]["message"] == "ticket locked by change freeze"
    recs = [json.loads(x) for x in (tmp_path / "a" / "tickets.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "issued" and r["detail"]["value"] == code_a for r in recs)
    assert code_a not in json.dumps(TASK.truth) and code_a not in TASK.prompt


def test_simulator_cap_refuses_a_third_close(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, "s")
    for _ in range(2):
        assert rt.call_tool("close_ticket", {"ticket_id": "TCK-1042"}).code != "REQUEST_CAP_EXCEEDED"
    assert rt.call_tool("close_ticket", {"ticket_id": "TCK-1042"}).code == "REQUEST_CAP_EXCEEDED"
