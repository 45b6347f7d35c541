"""OpenClaw's ask-user channel in a headless run: ``ask_user`` (deferred behind Tool Search) is
Gateway work — it registers its questions with the Gateway (``question.request``) and waits for
them to be resolved — so a task with ``ask_user`` runs its turns through the run's Gateway and the
turn wrapper (:mod:`harnesses.openclaw.gateway_turn`) answers pending questions for the benchmark's
simulated user: ``question.list`` → the ask command (JSON on stdin, answer on stdout) →
``question.resolve`` with the answer keyed by ``questionId``. The Gateway shapes are those of a real
OpenClaw 2026.9.6 Gateway (``openclaw gateway call question.list --json``)."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import RunContext, TurnContext
from harnesses.openclaw import gateway_turn
from harnesses.openclaw.adapter import GATEWAY_TURN, OpenClawAdapter, asks_user, uses_gateway
from tests.harnesses.capture import run_context
from tracetrial.task import load_task

REPO = Path(__file__).resolve().parents[2]
REGION = "T7-region-clarify-001"
ROLLOUT = "T7-rollout-window-002"

#: ``question.list`` of a real 2026.9.6 Gateway while an ``ask_user`` call waits.
LISTING: dict[str, Any] = {"questions": [{
    "id": "ask_7300db71a31a9c610fd99527ea86a44b",
    "questions": [{"questionId": "color", "header": "Color", "question": "Which color should I use?",
                   "options": [{"label": "Red (Recommended)", "description": "Use red."},
                               {"label": "Blue", "description": "Use blue."}],
                   "isOther": True}],
    "agentId": "main", "sessionKey": "agent:main:explicit:7cf90371-b7ec-4174-b714-52ae8455e662",
    "runId": "7cf90371-b7ec-4174-b714-52ae8455e662", "createdAtMs": 1796627049248, "expiresAtMs": 1796627109248,
    "status": "pending"}]}


def ctx_for(tmp_path: Path, task: str | None) -> RunContext:
    ctx = run_context(tmp_path, url="http://127.0.0.1:9/tt/probe/r1/v1")
    return dataclasses.replace(ctx, task=load_task(REPO / "tasks" / task)) if task else ctx


def _argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: str | None) -> tuple[RunContext, list[str]]:
    monkeypatch.setattr(OpenClawAdapter, "binary", lambda self: Path("/opt/openclaw"))
    adapter, ctx, turn = OpenClawAdapter(), ctx_for(tmp_path, task), TurnContext(1, "go", None, 180)
    if uses_gateway(ctx):
        adapter.prepare(ctx, turn)
    return ctx, adapter.argv(ctx, turn, None)


@pytest.mark.parametrize("task", [REGION, ROLLOUT])
def test_an_ask_user_task_runs_through_the_gateway_with_the_simulated_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: str) -> None:
    ctx, argv = _argv(tmp_path, monkeypatch, task)
    assert asks_user(ctx) and uses_gateway(ctx)
    assert argv[:2] == [sys.executable, str(GATEWAY_TURN)]
    wrapper, agent = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    ask = shlex.split(wrapper[wrapper.index("--ask-command") + 1])
    assert ask[ask.index("-m") + 1] == "harnesses.reference.ask_user"
    assert ask[ask.index("--task") + 1] == str(ctx.task.root)
    assert ask[ask.index("--run-private") + 1] == str(ctx.paths.private)  # the ledger is the run's private one
    assert agent[:3] == ["/opt/openclaw", "agent", "--session-id"]
    assert OpenClawAdapter().environment(ctx)[gateway_turn.TOKEN_VAR]


def test_other_tasks_run_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, plain = _argv(tmp_path / "a", monkeypatch, None)  # the example pack: the pin's embedded turn
    assert plain[1:3] == ["agent", "--local"] and "--ask-command" not in plain
    _, delegating = _argv(tmp_path / "b", monkeypatch, "L4-pending-report-001")  # Gateway, nobody to ask
    assert delegating[1] == str(GATEWAY_TURN) and "--ask-command" not in delegating


def test_a_pending_question_becomes_one_request_per_question() -> None:
    (record,) = gateway_turn.pending_requests(LISTING)
    ((qid, request),) = gateway_turn.ask_requests(record)
    assert qid == "color"
    assert request["question"] == "Which color should I use?"
    assert request["options"] == ["Red (Recommended)", "Blue"]
    assert request["call_id"] == "ask_7300db71a31a9c610fd99527ea86a44b/color"
    assert request["native"]["gateway_question_id"] == record["id"] and request["native"]["isOther"] is True
    # answered, cancelled or malformed entries are not asked
    done = {"questions": [{**LISTING["questions"][0], "status": "answered"}, {"id": "x", "questions": []}, "junk"]}
    assert gateway_turn.pending_requests(done) == [] and gateway_turn.pending_requests(None) == []


@pytest.mark.parametrize("answer", ["Blue", "eu-north-7"])
def test_the_answer_is_passed_as_given(answer: str) -> None:
    """A picked option's label, or the user's own words: every ``ask_user`` question is ``isOther``,
    so the Gateway keeps a free-text answer as it is (canonicalising only an option's label)."""
    assert gateway_turn.resolve_params("ask_1", {"color": answer}) == {
        "id": "ask_1", "answers": {"answers": {"color": [answer]}}}


class _Gateway:
    """``Answerer.call`` stand-in: one pending question until it is resolved."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        if method == "question.list":
            resolved = any(m == "question.resolve" for m, _ in self.calls)
            return {"questions": [] if resolved else LISTING["questions"]}
        return {"status": "answered", "answers": params["answers"]}


def test_each_question_is_put_to_the_user_once_and_resolved() -> None:
    asked: list[dict[str, Any]] = []

    def ask(request: dict[str, Any]) -> str | None:
        asked.append(request)
        return "Blue"

    answerer = gateway_turn.Answerer("/opt/openclaw", "1", "tok", ask)
    fake = _Gateway()
    answerer.call = fake  # type: ignore[method-assign]
    for _ in range(3):  # three polls: the question is seen (at most) twice, asked once
        for record in gateway_turn.pending_requests(fake("question.list", {})):
            if record["id"] not in answerer.handled:
                answerer.answer(record)
    assert [r["question"] for r in asked] == ["Which color should I use?"]
    assert ("question.resolve", {"id": LISTING["questions"][0]["id"],
                                 "answers": {"answers": {"color": ["Blue"]}}}) in fake.calls


def test_a_question_the_user_could_not_answer_stays_pending() -> None:
    answerer = gateway_turn.Answerer("/opt/openclaw", "1", "tok", lambda request: None)
    fake = _Gateway()
    answerer.call = fake  # type: ignore[method-assign]
    answerer.answer(LISTING["questions"][0])
    assert not any(m == "question.resolve" for m, _ in fake.calls)
    assert LISTING["questions"][0]["id"] in answerer.handled  # never asked twice


def _fake_openclaw(tmp_path: Path) -> Path:
    """``openclaw`` for the wrapper: ``gateway run`` says it listens and idles; ``gateway call``
    answers ``question.list`` with :data:`LISTING` until ``question.resolve`` (params recorded)."""
    fake = tmp_path / "openclaw"
    fake.write_text(f"""#!{sys.executable}
import json, pathlib, sys, time
here = pathlib.Path({str(tmp_path)!r})
argv = sys.argv[1:]
if argv[:2] == ["gateway", "run"]:
    print("[gateway] http server listening (fake)", flush=True)
    time.sleep(60)
elif argv[:2] == ["gateway", "call"]:
    method, params = argv[2], json.loads(argv[argv.index("--params") + 1])
    assert argv[argv.index("--url") + 1].startswith("ws://127.0.0.1:") and argv[argv.index("--token") + 1] == "tok"
    resolved = here / "resolved.json"
    if method == "question.list":
        print(json.dumps({{"questions": [] if resolved.exists() else json.loads({json.dumps(LISTING["questions"])!r})}}))
    else:
        resolved.write_text(json.dumps(params))
        print(json.dumps({{"status": "answered", "answers": params["answers"]}}))
""")
    fake.chmod(0o755)
    return fake


def test_the_wrapper_answers_while_the_agent_turn_waits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("STOP_RESERVE_S", 0.2), ("POLL_S", 0.05), ("QUIET_S", 0.2), ("STOP_GRACE_S", 2.0),
                        ("ASK_POLL_S", 0.1)):
        monkeypatch.setattr(gateway_turn, name, value)
    monkeypatch.setenv(gateway_turn.TOKEN_VAR, "tok")
    resolved = tmp_path / "resolved.json"
    ask = [sys.executable, "-c", "import json, sys; r = json.load(sys.stdin); "
           f"open({str(tmp_path / 'asked.json')!r}, 'w').write(json.dumps(r)); print('Blue')"]
    agent = [sys.executable, "-c", "import pathlib, sys, time\n"
             f"p = pathlib.Path({str(resolved)!r})\n"
             "for _ in range(200):\n    if p.exists(): break\n    time.sleep(0.05)\n"
             "print('{\"runId\": \"r\"}'); sys.exit(0 if p.exists() else 3)"]
    code = gateway_turn.main(["--openclaw", str(_fake_openclaw(tmp_path)), "--port", "1", "--gateway-log",
                              str(tmp_path / "gw.log"), "--state", str(tmp_path), "--deadline", "30",
                              "--ask-command", shlex.join(ask), "--", *agent])
    assert code == 0
    assert json.loads(resolved.read_text()) == {"id": LISTING["questions"][0]["id"],
                                                "answers": {"answers": {"color": ["Blue"]}}}
    asked = json.loads((tmp_path / "asked.json").read_text())
    assert asked["question"] == "Which color should I use?" and asked["options"] == ["Red (Recommended)", "Blue"]
