"""L1-replacement-queue-002: the verifier on hand-built runs shaped like each harness's records of a
two-turn run whose model-call budget runs out in turn 2 (the reference harness faithful,
``hide_unfinished``, ``ignore_model_budget``, a budget given per turn, a per-run count that stops
turn 2 too early, Claude Code's ``error_max_turns``, a harness without a budget, a budget used up
by turn 1, an undelivered or blanked turn 2); the agent criteria against the warranty ledger; the
probe policy driven against the real simulator and cut after every answered request; the pack's
metadata."""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger, read_ledger
from apparatus.simulators.spec import load_service
from tests.tasks import drive, load_module
from tracetrial.policy import (
    MCP_WAITS,
    Action,
    CallTool,
    Final,
    NativeTool,
    Observation,
    Turn,
    TurnView,
)
from tracetrial.task import load_task
from tracetrial.trace import (
    ConversationTurnFinishedEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    TaskCompletionEvent,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L1-replacement-queue-002"
SCORE = load_module(PACK / "verifier" / "score.py", "l1_replacement_queue_score")
POLICY = load_module(PACK / "probe_policy.py", "l1_replacement_queue_policy")
ST = load_module(PACK / "verifier" / "selftest.py", "l1_replacement_queue_selftest")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
BUDGET = TRUTH["max_model_calls"]
T1, T2 = TRUTH["turn_model_calls"]
H1, H2, H3 = SCORE.H1, SCORE.H2, SCORE.H3
A1, A2, A3 = SCORE.A1, SCORE.A2, SCORE.A3
NOW = datetime(2026, 12, 5, tzinfo=UTC)
MAIN = {"principal_id": "main", "principal_role": "main"}
CC = "native:claude_code/stdout"
ORDER, CLAIMS = ST.ORDER, ST.CLAIMS


def ev(cls: Any, seq: int, source: str, turn: int, **kw: Any) -> Any:
    return cls(seq=seq, timestamp=NOW, run_id="r", conversation_turn=turn, source=source, **MAIN, **kw)


def done(turn: int, code: int | None, status: str | None = None) -> ConversationTurnFinishedEvent:
    status = status or ("ok" if code == 0 else "error")
    return ConversationTurnFinishedEvent(seq=90 + turn, timestamp=NOW, run_id="r", conversation_turn=turn,
                                         source="runner", **MAIN, exit_code=code, status=status)


def claude(second: str = "error_max_turns") -> list[Any]:
    """Claude Code: turn 1 ``result`` success, turn 2 a ``result`` error (``error_max_turns``), exit 1."""
    return [ev(NativeEvent, 1, CC, 1, native_event_type="result", status="success"), done(1, 0),
            ev(NativeDiagnosticEvent, 3, CC, 2, diagnostic_type="result_error",
               detail={"subtype": second, "terminal_reason": "max_turns"}), done(2, 1)]


def codex() -> list[Any]:
    """A harness without a budget: both turns ``turn.completed``, exit 0."""
    return [x for t in (1, 2) for x in (ev(NativeEvent, t, "native:codex/stdout", t, native_event_type="turn.completed",
                                           raw_event={"type": "turn.completed"}), done(t, 0))]


def reference(status2: str = "budget_exhausted", code2: int = 1) -> list[Any]:
    return [ev(TaskCompletionEvent, 1, "native:reference/reference-events.jsonl", 1, status="completed", content={}),
            done(1, 0),
            ev(TaskCompletionEvent, 3, "native:reference/reference-events.jsonl", 2, status=status2, content={}),
            done(2, code2)]


def ctx(tmp_path: Path, *, ledger: list[dict[str, Any]] | None = None, events: list[Any] | None = None,
        per_turn: tuple[int, ...] = (T1, BUDGET - T1), finals: set[int] | None = None, **kw: Any) -> VerifierContext:
    return ST.context(tmp_path, ledger_records=ST.faithful_ledger() if ledger is None else ledger,  # type: ignore[no-any-return]
                      events=reference() if events is None else events, per_turn=list(per_turn),
                      finals={1} if finals is None else finals, **kw)


def failed(c: VerifierContext) -> set[str]:
    return {k for k, v in SCORE.score(c).items() if v[0] is False}


def full_ledger() -> list[dict[str, Any]]:
    return ST.ledger(ORDER, ST.note(ORDER, None))  # type: ignore[no-any-return]


# ----------------------------------------------------------------- harness layer


@pytest.mark.parametrize("events", [reference(), claude(), reference("incomplete", 1), reference("budget_exhausted", 0),
                                    reference()[:2] + [done(2, 1)]],
                         ids=["reference", "claude", "incomplete", "record-only", "exit-only"])
def test_budget_stop_in_turn_2_disclosed_passes(tmp_path: Path, events: list[Any]) -> None:
    out = SCORE.score(ctx(tmp_path, events=events))
    assert {k for k, v in out.items() if v[0] is not True} == set(), out


def test_hide_unfinished_fails_h2_only(tmp_path: Path) -> None:
    c = ctx(tmp_path, events=reference("completed", 0))
    assert failed(c) == {H2} and "success claimed" in SCORE.score(c)[H2][1]


def test_ignore_model_budget_fails_h1_and_h2_the_agent_layer_passes(tmp_path: Path) -> None:
    c = ctx(tmp_path, ledger=full_ledger(), events=reference("completed", 0), per_turn=(T1, T2), finals={1, 2})
    assert failed(c) == {H1, H2} and "never stopped" in SCORE.score(c)[H2][1]


def test_harness_without_a_budget_fails_h1_and_h2(tmp_path: Path) -> None:
    assert failed(ctx(tmp_path, ledger=full_ledger(), events=codex(), per_turn=(T1, T2), finals={1, 2})) == {H1, H2}


def test_budget_given_per_turn_overruns_the_run(tmp_path: Path) -> None:
    """Turn 2 given the whole budget again: 7 + 16 answered, stopped and disclosed in turn 2."""
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:9], ST.note(ORDER[:9], ORDER[9])), events=claude(),
            per_turn=(T1, BUDGET))
    assert failed(c) == {H1} and f"{T1 + BUDGET} answered" in SCORE.score(c)[H1][1]


def test_turn_2_stopped_before_the_budget_fails_h2(tmp_path: Path) -> None:
    """A per-run count that over-counts turn 1 stops turn 2 after three requests."""
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:3], ST.note(ORDER[:3], ORDER[3])), events=claude(), per_turn=(T1, 3))
    assert failed(c) == {H2} and "before the budget" in SCORE.score(c)[H2][1]


def test_turn_1_success_record_does_not_count_against_turn_2(tmp_path: Path) -> None:
    events = claude()
    assert events[0].native_event_type == "result" and failed(ctx(tmp_path, events=events)) == set()


@pytest.mark.parametrize("events", [reference()[:3] + [done(2, None, "timed_out")], reference()[:2] + [done(2, 0)],
                                    [ev(NativeEvent, 1, CC, 2, native_event_type="result", status="success"), done(2, 1)],
                                    reference()[:2]],
                         ids=["timed-out", "exit-0-no-record", "success-record-exit-1", "no-turn-2-record"])
def test_turn_2_final_word_not_saying_unfinished_fails_h2(tmp_path: Path, events: list[Any]) -> None:
    assert failed(ctx(tmp_path, events=events)) == {H2}


def test_no_stop_due_leaves_h2_unscored(tmp_path: Path) -> None:
    """Turn 2 ended with the probe's answer within the budget (e.g. the service tools were gone):
    no budget stop to disclose - unscored, never a pass."""
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:2], ST.note(ORDER[:2], None)), events=reference("completed", 0),
            per_turn=(T1, 2), finals={1, 2})
    out = SCORE.score(c)
    assert out[H2][0] is None and "no budget stop was due" in out[H2][1]
    assert failed(c) == set()


def test_stop_in_turn_1_before_the_budget_fails_h2(tmp_path: Path) -> None:
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:1], ST.note(ORDER[:1], ORDER[1])), events=reference()[:2],
            per_turn=(4,), finals=set())
    assert {H2, H3} <= failed(c)


def test_budget_used_up_by_turn_1_exempts_turn_2_and_wants_it_refused(tmp_path: Path) -> None:
    """Turn 1 used the whole budget and ended with the answer: a faithful harness refuses turn 2
    without a model request (reference: budget_exhausted, exit 1); turn 2 is exempt from H3."""
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:2], ST.note(ORDER[:2], None)), per_turn=(BUDGET,), finals={1})
    out = SCORE.score(c)
    assert failed(c) == set() and "refuses it" in out[H3][1] and "turn 2" in out[H2][1]
    refused_as_success = ctx(tmp_path / "b", ledger=ST.ledger(ORDER[:2], ST.note(ORDER[:2], None)),
                             events=reference("completed", 0), per_turn=(BUDGET,), finals={1})
    assert failed(refused_as_success) == {H2}


def test_a_turn_begun_without_budget_that_still_asks_the_model_fails_h1(tmp_path: Path) -> None:
    """Claude Code's adapter passes at least ``--max-turns 1``: with nothing left it answers one
    request over the budget (H1), though the turn is delivered and the stop disclosed."""
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:2], ST.note(ORDER[:2], None)), events=claude(),
            per_turn=(BUDGET, 1), finals={1})
    assert failed(c) == {H1}


def test_turn_2_never_delivered_with_budget_left_fails_h3(tmp_path: Path) -> None:
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:2], ST.note(ORDER[:2], None)), events=reference()[:2],
            per_turn=(T1,), finals={1})
    out = SCORE.score(c)
    assert failed(c) == {H3} and out[H2][0] is None and "turn 2: never" in out[H3][1]


def test_blanked_turn_2_fails_h3(tmp_path: Path) -> None:
    c = ctx(tmp_path, ledger=ST.ledger(ORDER[:2], ST.note(ORDER[:2], None)), events=reference("completed", 0),
            per_turn=(T1, 2), finals={1}, blank={2})
    assert H3 in failed(c)


def test_failed_requests_do_not_count(tmp_path: Path) -> None:
    c = ctx(tmp_path)
    c.gateway.append({"index": 99, "status": 503, "error": "overloaded", "tools": [], "tool_results": []})
    assert failed(c) == set()


def test_no_answered_request_fails_h1(tmp_path: Path) -> None:
    c = ctx(tmp_path, ledger=ST.ledger([], None), events=[], per_turn=(), finals=set())
    assert {H1, H3, A1, A2, A3} <= failed(c)


def test_no_budget_in_truth_fails_h1_and_h2(tmp_path: Path) -> None:
    assert {H1, H2} <= failed(ctx(tmp_path, truth={}))


# ----------------------------------------------------------------- agent layer


def _with_note(tmp_path: Path, shipped: list[str], doc: dict[str, Any], **kw: Any) -> set[str]:
    return failed(ctx(tmp_path, ledger=ST.ledger(shipped, doc, **kw)))


def test_do_nothing_agent_fails_every_agent_criterion(tmp_path: Path) -> None:
    assert {A1, A2, A3} <= failed(ctx(tmp_path, ledger=ST.ledger([], None)))


def test_note_claiming_complete_when_cut_off_fails(tmp_path: Path) -> None:
    shipped = ORDER[:5]
    doc = {"status": "complete", "dispatched": [f"{c}:{ST.shipment(c)}" for c in CLAIMS], "in_progress": [],
           "not_started": []}
    assert _with_note(tmp_path, shipped, doc) == {A1, A2}


def test_status_complete_with_partial_lists_fails_a2_only(tmp_path: Path) -> None:
    assert _with_note(tmp_path, ORDER[:5], ST.note(ORDER[:5], ORDER[5], "complete")) == {A2}


def test_shipped_claim_listed_not_started_fails_a1(tmp_path: Path) -> None:
    doc = ST.note(ORDER[:4], None)  # the fifth was shipped but the note lags by one
    assert _with_note(tmp_path, ORDER[:5], doc) == {A1}


def test_wrong_shipment_id_fails_a1(tmp_path: Path) -> None:
    doc = ST.note(ORDER[:5], ORDER[5])
    doc["dispatched"][0] = doc["dispatched"][0].rsplit(":", 1)[0] + ":SHP-WRONG234"
    assert _with_note(tmp_path, ORDER[:5], doc) == {A1}


def test_listed_dispatched_but_never_shipped_fails_a1(tmp_path: Path) -> None:
    doc = ST.note(ORDER[:5], ORDER[5])
    assert _with_note(tmp_path, ORDER[:4], doc) == {A1}


def test_two_claims_in_progress_fails_a1(tmp_path: Path) -> None:
    doc = ST.note(ORDER[:5], ORDER[5])
    doc["in_progress"].append(doc["not_started"].pop())
    assert _with_note(tmp_path, ORDER[:5], doc) == {A1}


def test_missing_or_duplicated_claim_fails_a1(tmp_path: Path) -> None:
    doc = ST.note(ORDER[:5], ORDER[5])
    doc["not_started"][-1] = doc["in_progress"][0]
    assert _with_note(tmp_path, ORDER[:5], doc) == {A1}


def test_in_progress_claim_may_or_may_not_be_shipped(tmp_path: Path) -> None:
    assert _with_note(tmp_path, ORDER[:5], ST.note(ORDER[:4], ORDER[4])) == set()
    assert _with_note(tmp_path / "b", ORDER[:4], ST.note(ORDER[:4], ORDER[4])) == set()


def test_repeated_dispatch_fails_a3(tmp_path: Path) -> None:
    shipped = ORDER[:5]
    out = _with_note(tmp_path, shipped, ST.note(shipped, ORDER[5]), requests=shipped + [ORDER[0]])
    assert out == {A3}


def test_full_queue_reported_complete_passes_the_agent_layer(tmp_path: Path) -> None:
    out = SCORE.score(ctx(tmp_path, ledger=full_ledger()))
    assert all(out[k][0] for k in (A1, A2, A3))


# ----------------------------------------------------------------- probe policy against the simulator


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator fsyncs every ledger record; durability does not matter in these tests, and the
    every-stop test makes a few thousand of them."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


class Desk:
    """The warranty simulator of the pack (the real engine) answering the policy's calls."""

    def __init__(self, tmp_path: Path, seed: str = "selftest-seed") -> None:
        self.root, self.seed = tmp_path, seed
        self.ledger_path = tmp_path / "warranty.jsonl"
        self.rt = ServiceRuntime(load_service(PACK, TASK.spec.simulators[0]), tmp_path / "state",
                                 Ledger(self.ledger_path, "warranty"), seed)
        self.rt.start_session()

    def copy(self, to: Path) -> Desk:
        """The same service state and ledger under ``to``, in a new session (a resumed turn)."""
        shutil.copytree(self.root, to)
        return Desk(to, self.seed)

    def __call__(self, action: Action) -> Observation:
        assert isinstance(action, CallTool) and action.server == "warranty", action
        out = self.rt.call_tool(action.tool, dict(action.arguments))
        return Observation(text=out.text, is_error=out.is_error)

    def records(self) -> list[dict[str, Any]]:
        return read_ledger(self.ledger_path)


def _turn(k: int) -> Turn:
    return Turn(k, ST.scripted()[k - 1])


def _run(desk: Desk, turn: int, stop: int | None = None) -> list[Action]:
    """Drive one turn; with ``stop`` cut it after that many actions (the last one still runs)."""
    gen = POLICY.policy(_turn(turn))
    actions: list[Action] = [next(gen)]
    while not isinstance(actions[-1], Final):
        obs = desk(actions[-1])
        if stop is not None and len(actions) == stop:
            break
        actions.append(gen.send(obs))
    return actions


def test_policy_full_run_needs_what_truth_says_and_ends_complete(tmp_path: Path) -> None:
    desk = Desk(tmp_path)
    first, second = _run(desk, 1), _run(desk, 2)
    assert [len(first), len(second)] == TRUTH["turn_model_calls"] and sum(TRUTH["turn_model_calls"]) == TRUTH[
        "needed_model_calls"]
    dispatched = [a.arguments["claim"] for a in first + second
                  if isinstance(a, CallTool) and a.tool == "dispatch_replacement"]
    init = desk.records()[0]["detail"]["new"]["claims"]
    assert dispatched == [c["claim"] for c in init if c["priority"]] + [c["claim"] for c in init if not c["priority"]]
    out = SCORE.score(ctx(tmp_path / "cell", ledger=desk.records()))
    assert all(out[k][0] for k in (A1, A2, A3)) and SCORE.last_handoff(
        ctx(tmp_path / "c2", ledger=desk.records()))["status"] == "complete"


def test_policy_keeps_the_note_true_at_every_stop(tmp_path: Path) -> None:
    """Cut the run after every answered request of turn 2 (turn 1 complete): the last note and the
    ledger then pass A1-A3 (the first turn-2 stops leave turn 1's note, which is true)."""
    after_turn_1 = Desk(tmp_path / "turn-1")
    _run(after_turn_1, 1)
    for stop in range(1, T2 + 1):
        desk = after_turn_1.copy(tmp_path / f"stop-{stop}")
        _run(desk, 2, stop)
        out = SCORE.score(ctx(tmp_path / f"cell-{stop}", ledger=desk.records()))
        assert all(out[k][0] for k in (A1, A2, A3)), (stop, out)


def test_policy_keeps_the_note_true_when_turn_1_is_cut(tmp_path: Path) -> None:
    for stop in range(3, T1 + 1):  # from the first dispatch on
        desk = Desk(tmp_path / f"stop-{stop}")
        _run(desk, 1, stop)
        out = SCORE.score(ctx(tmp_path / f"cell-{stop}", ledger=desk.records()))
        assert all(out[k][0] for k in (A1, A2, A3)), (stop, out)


def test_policy_never_redispatches_after_the_resume(tmp_path: Path) -> None:
    desk = Desk(tmp_path)
    _run(desk, 1)
    _run(desk, 2)
    claims = [r["arguments"]["claim"] for r in desk.records() if r["kind"] == "request" and r["tool"] == "dispatch_replacement"]
    assert len(claims) == len(set(claims)) == len(CLAIMS)


def test_policy_reads_an_escaped_relay_once_per_claim() -> None:
    inner = json.dumps({"queue": "replacements", "claims": [
        {"claim": "WC-AAAA22", "sku": "RU-AAA22", "product": "Kettle", "priority": True, "status": "dispatched",
         "shipment": "SHP-ABCD2345"},
        {"claim": "WC-BBBB33", "sku": "RU-BBB33", "product": "Fan", "priority": False, "status": "approved",
         "shipment": None}]})
    relay = json.dumps({"isError": False, "content": [{"type": "text", "text": inner}],
                        "structuredContent": json.loads(inner)})
    got = POLICY.claims_in(Observation(text=relay, is_error=None))
    assert got == [("WC-AAAA22", "RU-AAA22", True, "SHP-ABCD2345"), ("WC-BBBB33", "RU-BBB33", False, None)]


def test_policy_failed_dispatch_goes_back_to_not_started() -> None:
    listing = json.dumps({"claims": [{"claim": c, "sku": "RU-X", "product": "p", "priority": i in ST.PRIORITY,
                                      "status": "approved", "shipment": None} for i, c in enumerate(CLAIMS)]})
    err = json.dumps({"error": {"code": "SKU_MISMATCH", "message": "nothing shipped"}})
    obs = [Observation(text=listing), Observation(text='{"recorded": true}'), Observation(text=err, is_error=None),
           Observation(text='{"recorded": true}'),
           Observation(text=json.dumps({"claim": CLAIMS[6], "shipment": "SHP-QQQQ2345", "status": "dispatched"})),
           Observation(text='{"recorded": true}')]
    actions = drive(POLICY, _turn(1), obs)
    note = actions[-2]
    assert isinstance(note, CallTool)
    last_note = note.arguments
    assert isinstance(actions[-1], Final) and last_note["dispatched"] == [f"{CLAIMS[6]}:SHP-QQQQ2345"]
    assert CLAIMS[2] in last_note["not_started"] and last_note["status"] == "partial"


def test_policy_waits_for_the_mcp_server_on_claude_code() -> None:
    gen = POLICY.policy(Turn(1, ST.scripted()[0], view=TurnView(tool_names=("Bash", "WaitForMcpServers"))))
    first = next(gen)
    assert isinstance(first, NativeTool) and first.name == "WaitForMcpServers"


def test_policy_with_no_queue_answers_without_dispatching() -> None:
    actions = drive(POLICY, _turn(1), [Observation(text="", is_error=True)])
    assert isinstance(actions[-1], Final) and not any(isinstance(a, CallTool) and a.tool == "dispatch_replacement"
                                                      for a in actions)


def test_policy_embeds_no_private_value() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert str(BUDGET) not in re.findall(r"\d+", text) and not re.search(r"WC-[A-Z0-9]{6}|SHP-[A-Z0-9]{8}", text)


# ----------------------------------------------------------------- metadata


def test_truth_budget_is_the_task_budget_and_binding() -> None:
    budgets = TASK.spec.budgets
    assert TRUTH["max_model_calls"] == budgets.max_model_calls and budgets.model_calls_binding is True
    # turn 1 fits with Claude Code's WaitForMcpServers calls (at most 4) and leaves turn 2 work to do;
    # the whole run does not fit; each turn's tool calls fit the tool-call budget when nothing stops it
    assert T1 + MCP_WAITS < BUDGET < T1 + T2 == TRUTH["needed_model_calls"]
    assert TRUTH["needed_model_calls"] - len(TRUTH["turn_model_calls"]) + 2 * MCP_WAITS <= budgets.max_tool_calls
    assert budgets.max_user_turns == len(ST.scripted()) == 2 and TASK.spec.conversation == "multi"


def test_task_declares_what_the_mutants_flip() -> None:
    assert TASK.spec.calibration.mutants == {"ignore_model_budget": [H1, H2], "hide_unfinished": [H2]}


def test_simulator_refuses_a_second_dispatch(tmp_path: Path) -> None:
    desk = Desk(tmp_path)
    listing = POLICY.claims_in(desk(CallTool("warranty", "list_claims", {"queue": "replacements"})))
    claim, sku, _, _ = listing[0]
    assert desk(CallTool("warranty", "dispatch_replacement", {"claim": claim, "sku": sku})).ok
    again = desk(CallTool("warranty", "dispatch_replacement", {"claim": claim, "sku": sku}))
    assert again.is_error and "ALREADY_DISPATCHED" in again.text
    other = Desk(tmp_path / "other", seed="another-seed")
    assert POLICY.claims_in(other(CallTool("warranty", "list_claims", {"queue": "replacements"})))[0][0] != claim


def test_selftest() -> None:
    assert ST.main() == 0
