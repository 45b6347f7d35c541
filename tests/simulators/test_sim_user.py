"""The scripted user's decisions and the ask-user responder."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from apparatus.simulators import (
    AskUserResponder,
    ClarificationRequest,
    ScriptedUser,
    SimulatorConfigError,
    UserScript,
    read_ledger,
    verify_ledger,
)
from tracetrial.task import TaskPack
from tracetrial.trace import ConversationSimulatorDecisionEvent

#: Final assistant messages in the shape harnesses print them (sample texts, one per turn).
ASSISTANT_TURNS = [
    "I found two escalated tickets (T-1, T-2). Which region should the export go to?",
    "Closing T-1 failed: the API returned ALREADY_CLOSED, so I cannot continue with it.",
    "T-2 is closed with receipt RCPT-XXXXXXXXXX. Which region again?",
]


def test_scripted_user_decisions(pack: TaskPack) -> None:
    user = ScriptedUser.from_pack(pack)
    first = user.decide(ASSISTANT_TURNS[0])
    assert (first.decision, first.next_user_text, first.rule, first.turn) == ("reply", "Use eu-west-3.", 0, 1)
    assert first.reason == "rule 0 (/(?i)which (region|environment)/) matched"
    second = user.decide(ASSISTANT_TURNS[1])
    assert (second.decision, second.rule, second.turn) == ("reply", 2, 2)
    assert second.next_user_text == "Please retry once, then report what failed."
    third = user.decide(ASSISTANT_TURNS[2])  # rule 0 is 'once'; the default would reply, but turns are used up
    assert (third.decision, third.next_user_text, third.rule) == ("end", None, None)
    assert third.reason == "max_turns 3 reached (default would have replied)"
    assert user.decide("anything").reason == "the conversation already ended"


def test_scripted_user_end_rule_and_determinism(pack: TaskPack) -> None:
    texts = ["Which environment?", "All escalated tickets are closed. Done."]
    runs = []
    for _ in range(2):
        user = ScriptedUser.from_pack(pack)
        runs.append([user.decide(t) for t in texts])
    assert runs[0] == runs[1]
    end = runs[0][1]
    assert (end.decision, end.reason, end.rule) == ("end", "the agent reported completion", 1)


def test_scripted_user_empty_message_and_default_end() -> None:
    user = ScriptedUser(UserScript.model_validate({"rules": [{"when": "^$", "reply": "Are you there?"}]}))
    assert user.decide(None).next_user_text == "Are you there?"
    last = user.decide("Some unexpected text")
    assert (last.decision, last.reason) == ("end", "no rule matched")


def test_decision_becomes_trace_event(pack: TaskPack) -> None:
    decision = ScriptedUser.from_pack(pack).decide(ASSISTANT_TURNS[0])
    event = decision.to_event(run_id="run-1", seq=7)
    assert isinstance(event, ConversationSimulatorDecisionEvent)
    dumped = event.model_dump(mode="json")
    assert dumped["event_type"] == "conversation_simulator_decision"
    assert (dumped["decision"], dumped["next_user_text"], dumped["conversation_turn"]) == (
        "reply", "Use eu-west-3.", 1)
    assert dumped["reason"] == decision.reason


def test_invalid_script_is_reported() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        UserScript.model_validate({"rules": [{"when": "x", "reply": "a", "end": True}]})
    with pytest.raises(ValueError, match="not a valid regular expression"):
        UserScript.model_validate({"rules": [{"when": "(", "end": True}]})


def test_ask_user_responder_answers_from_truth_and_logs(pack: TaskPack, tmp_path: Path) -> None:
    responder = AskUserResponder.from_task(pack, tmp_path / "private")
    free = responder.answer(ClarificationRequest(question="Which region should I deploy to?"))
    assert (free.text, free.option, free.matched) == ("eu-west-3", None, "answers.0")
    picked = responder.answer(ClarificationRequest(
        question="Pick a region", options=["us-east-1", "EU-West-3 (Paris)"], request_id="q2",
        raw={"questions": [{"question": "Pick a region", "options": [{"label": "us-east-1"}]}]}))
    assert (picked.text, picked.option) == ("EU-West-3 (Paris)", "EU-West-3 (Paris)")
    other = responder.answer(ClarificationRequest(question="What colour should the chart be?"))
    assert (other.text, other.matched) == ("No preference.", "default")

    ledger = tmp_path / "private" / "ledgers" / "_ask_user.jsonl"
    recs = read_ledger(ledger)
    assert [r["kind"] for r in recs] == ["request", "issued"] * 3
    assert recs[2]["arguments"] == {"questions": [{"question": "Pick a region", "options": [{"label": "us-east-1"}]}]}
    assert recs[3]["detail"] == {"answer": "EU-West-3 (Paris)", "option": "EU-West-3 (Paris)",
                                 "matched": "answers.0", "request_seq": 3}
    assert verify_ledger(ledger).ok


def test_ask_user_without_truth_entry(pack: TaskPack, tmp_path: Path) -> None:
    with pytest.raises(SimulatorConfigError, match="no 'ask_user' entry"):
        AskUserResponder.from_task(replace(pack, truth={}), tmp_path)
