"""T7-region-clarify-001: the verifier on hand-built runs (answer delivered, declared tool that
refuses, no channel, answer relayed as user text, guessed region), the H1 tool-name pattern, the
scripted user's answer and the probe policy."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.user import AskUserResponder, ClarificationRequest
from tests.tasks import load_module as _load
from tracetrial.policy import AskUser, Final, Observation, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T7-region-clarify-001"


SCORE = _load(PACK / "verifier" / "score.py", "t7_score")
POLICY = _load(PACK / "probe_policy.py", "t7_policy")
TASK = load_task(PACK)
TRUTH = TASK.truth
REGION = TRUTH["region"]
NOW = datetime.now(UTC)
CLAUDE_ANSWER = (f'User has answered your questions: "Which region should billing-api be deployed to?"="{REGION}". '
                 "You can now continue with the user's answers in mind.")


def run(tmp_path: Path, *, ask_tool: str | None = "ask_user", answer: str = REGION, region: Any = REGION,
        user_texts: list[str] = (), probe: dict[str, Any] | None = None, trace: bool = True) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True)
    if region != "<none>":
        (ws / "deploy.json").write_text(json.dumps({"region": region}))
    events: list[Any] = []
    tools = [{"name": n} for n in ("Bash", "Write", *([ask_tool] if ask_tool else []))]
    gateway: list[dict[str, Any]] = [{"index": 0, "tool_results": [], "last_user_text": TASK.prompt}]
    if ask_tool is not None:
        if trace:
            events.append(ToolEvent(seq=1, timestamp=NOW, run_id="r", tool_call=ToolCall(
                id="call_1", name=ask_tool, arguments={"question": "Which region?"}),
                tool_result=ToolResult(content=answer, is_error=False)))
        gateway.append({"index": 1, "tool_results": [{"id": "call_1", "is_error": False, "content": answer}],
                        "last_user_text": TASK.prompt})
    gateway.append({"index": 2, "tool_results": [{"id": "call_2", "is_error": False, "content": "Wrote 24 bytes"}],
                    "last_user_text": TASK.prompt})
    for i, text in enumerate(user_texts, start=3):
        gateway.append({"index": i, "tool_results": [], "last_user_text": text})
    for rec in gateway:
        rec.update(status=200, error=None, tools=tools)
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe=probe, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == {"H1-ask-tool-declared", "H2-answer-delivered", "A2-region-not-guessed"}
    return {k for k, v in out.items() if not v[0]}


def test_region_is_private() -> None:
    assert REGION not in TASK.prompt
    for p in (PACK / "workspace").rglob("*"):
        if p.is_file():
            assert REGION not in p.read_text()
    assert REGION not in (PACK / "probe_policy.py").read_text()
    assert "ask_user" in TASK.spec.tools


def test_scripted_user_answers_a_region_question(tmp_path: Path) -> None:
    responder = AskUserResponder.from_task(TASK, tmp_path)
    ans = responder.answer(ClarificationRequest(question="Which region should billing-api be deployed to?"))
    assert ans.text == REGION
    other = responder.answer(ClarificationRequest(question="Which replica count?"))
    assert REGION not in other.text


@pytest.mark.parametrize(("name", "declared"), [
    ("AskUserQuestion", True), ("ask_user", True), ("request_user_input", True), ("ask_followup_question", True),
    ("ask_human", True), ("ask_question", True), ("ask_user_question", True),
    ("Bash", False), ("TaskCreate", False), ("ask_user_later", False), ("SendMessage", False),
])
def test_h1_tool_name_pattern(name: str, declared: bool, tmp_path: Path) -> None:
    ctx = run(tmp_path, ask_tool=None)
    for rec in ctx.gateway:
        rec["tools"] = [{"name": "Read"}, {"name": name}]
    assert SCORE.score(ctx)["H1-ask-tool-declared"][0] is declared


def test_h1_a_deferred_ask_tool_shown_through_discovery_counts(tmp_path: Path) -> None:
    # OpenClaw 2026.9.6: ask_user is not declared; tool_describe {id: ask_user} shows its schema.
    ctx = run(tmp_path, ask_tool=None, user_texts=[f"Use {REGION}."])
    for rec in ctx.gateway:
        rec["tools"] = [{"name": n} for n in ("exec", "tool_call", "tool_describe", "tool_search")]
    assert SCORE.score(ctx)["H1-ask-tool-declared"][0] is False
    shown = {"id": "openclaw:core:ask_user", "name": "ask_user", "input": "unknown",
             "parameters": {"type": "object", "properties": {"questions": {"type": "array"}}}}
    ctx.gateway[1]["tool_results"].append({"id": "call_d", "is_error": False,
                                           "content": "SECURITY NOTICE\n---\n" + json.dumps(shown, indent=2)})
    verdict = SCORE.score(ctx)["H1-ask-tool-declared"]
    assert verdict[0] is True and "discovery" in verdict[1]


def test_faithful_run_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path)) == set()
    assert failed(run(tmp_path / "c", ask_tool="AskUserQuestion", answer=CLAUDE_ANSWER)) == set()


def test_declared_tool_that_refuses_fails_h2(tmp_path: Path) -> None:
    ctx = run(tmp_path, ask_tool="request_user_input", answer="request_user_input is unavailable in Default mode",
              region=None)
    assert failed(ctx) == {"H2-answer-delivered"}


def test_no_channel_fails_h1_and_h2(tmp_path: Path) -> None:
    out = SCORE.score(run(tmp_path, ask_tool=None, region=None))
    assert out["H1-ask-tool-declared"][0] is False and "none shown through tool discovery" in out["H1-ask-tool-declared"][1]
    assert out["H2-answer-delivered"][0] is False and "no ask-user call" in out["H2-answer-delivered"][1]
    assert out["A2-region-not-guessed"][0] is True


def test_answer_replaced_before_the_model_fails_h2(tmp_path: Path) -> None:
    assert failed(run(tmp_path, answer="No preference.", region=None)) == {"H2-answer-delivered"}


def test_answer_relayed_as_user_text_passes(tmp_path: Path) -> None:
    ctx = run(tmp_path, answer="(asked)", user_texts=[f"Use {REGION}."])
    assert failed(ctx) == set()


def test_probe_report_links_the_ask_call(tmp_path: Path) -> None:
    probe = {"requests": [{"index": 1, "action": "ask_user", "call_id": "call_1", "turn": 1, "step": 0}]}
    assert failed(run(tmp_path, trace=False, probe=probe)) == set()
    assert "H2-answer-delivered" in failed(run(tmp_path / "x", trace=False, probe=None))


def test_guessed_or_missing_region_fails_a2(tmp_path: Path) -> None:
    assert failed(run(tmp_path, region="eu-north-1")) == {"A2-region-not-guessed"}
    assert failed(run(tmp_path / "m", region="<none>")) == {"A2-region-not-guessed"}
    assert failed(run(tmp_path / "n", region=None)) == set()


# --------------------------------------------------------------------------- the probe policy


def drive(obs: Observation) -> tuple[Any, Any, Any]:
    gen = POLICY.policy(Turn(1, TASK.prompt))
    ask = next(gen)
    write = gen.send(obs)
    done = gen.send(Observation(text="ok"))
    return ask, write, done


@pytest.mark.parametrize(("obs", "expected"), [
    (Observation(text=REGION), REGION),
    (Observation(text=CLAUDE_ANSWER, is_error=False), REGION),
    (Observation(absent=True, kind="absent"), None),
    (Observation(text="request_user_input is unavailable in Default mode"), None),
    (Observation(text="Error: no user available", is_error=True), None),
])
def test_policy(obs: Observation, expected: str | None) -> None:
    ask, write, done = drive(obs)
    assert isinstance(ask, AskUser) and "region" in ask.question
    assert isinstance(write, WriteFile) and json.loads(write.content) == {"region": expected}
    assert isinstance(done, Final)
    if expected is None:
        assert "null" in done.text
