"""T7-rollout-window-002: the verifier on hand-built runs (faithful multiple-choice run, the
answer dropped, no channel, options never offered, the answer relayed as user text, a Claude Code
style answer, a guessed window), the scripted user's pick, the selftest and the probe policy
(per-harness question forms, tool discovery, answer parsing; nothing private embedded)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.user import AskUserResponder, ClarificationRequest
from tests.tasks import drive
from tests.tasks import load_module as _load
from tracetrial.policy import AskUser, Final, NativeTool, Observation, ReadFile, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T7-rollout-window-002"

SCORE = _load(PACK / "verifier" / "score.py", "t7b_score")
POLICY = _load(PACK / "probe_policy.py", "t7b_policy")
TASK = load_task(PACK)
TRUTH = TASK.truth
WINDOW = TRUTH["window_id"]
LABEL = TRUTH["window_label"]
RELEASE = (PACK / "workspace" / "release.yaml").read_text(encoding="utf-8")
LABELS = ["RW-TUE-0200 (Tuesday 02:00-04:00 UTC)", LABEL, "RW-SAT-0600 (Saturday 06:00-08:00 UTC)"]
NOW = datetime.now(UTC)
QUESTION = "Which rollout window should payments-gateway 5.3.0 use?"
CLAUDE_ANSWER = (f'User has answered your questions: "{QUESTION}"="{LABEL}". '
                 "You can now continue with the user's answers in mind.")
ALL = {"H1-chosen-option-delivered", "H2-question-reached-user-with-options", "A2-window-not-guessed"}


def run(tmp_path: Path, *, ask_tool: str | None = "ask_user", answer: str = LABEL, window: Any = WINDOW,
        options: list[str] | None = LABELS, picked: str | None = LABEL, ledger: bool = True,
        user_texts: list[str] = (), probe: dict[str, Any] | None = None, trace: bool = True) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True)
    if window != "<none>":
        (ws / "rollout.json").write_text(json.dumps({"window": window}))
    events: list[Any] = []
    gateway: list[dict[str, Any]] = [{"index": 0, "tool_results": [], "last_user_text": TASK.prompt},
                                     {"index": 1, "tool_results": [{"id": "call_1", "is_error": False,
                                                                    "content": RELEASE}],
                                      "last_user_text": TASK.prompt}]
    records: list[dict[str, Any]] = []
    if ask_tool is not None:
        if trace:
            events.append(ToolEvent(seq=1, timestamp=NOW, run_id="r", tool_call=ToolCall(
                id="call_2", name=ask_tool, arguments={"question": QUESTION, "options": options}),
                tool_result=ToolResult(content=answer, is_error=False)))
        gateway.append({"index": 2, "tool_results": [{"id": "call_2", "is_error": False, "content": answer}],
                        "last_user_text": TASK.prompt})
        if ledger:
            records = [{"seq": 1, "kind": "request", "tool": "ask_user",
                        "detail": {"question": QUESTION, "options": options, "request_id": "call_2"}},
                       {"seq": 2, "kind": "issued", "tool": "ask_user",
                        "detail": {"answer": picked or "Thursday", "option": picked, "matched": "answers.0"}}]
    gateway.append({"index": 3, "tool_results": [{"id": "call_3", "is_error": False, "content": "Wrote 90 bytes"}],
                    "last_user_text": TASK.prompt})
    for i, text in enumerate(user_texts, start=4):
        gateway.append({"index": i, "tool_results": [], "last_user_text": text})
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe=probe, ledgers={"_ask_user": records} if records else {},
                           run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == ALL
    return {k for k, v in out.items() if not v[0]}


# --------------------------------------------------------------------------- the pack


def test_choice_is_private() -> None:
    for text in (TASK.prompt, (PACK / "probe_policy.py").read_text()):
        assert WINDOW not in text and "Thursday" not in text
    assert "ask_user" in TASK.spec.tools
    assert (PACK / "truth.json").is_file() and not (PACK / "workspace" / "truth.json").exists()
    for wid in TRUTH["window_ids"]:
        assert wid in RELEASE


def test_scripted_user_picks_one_option_verbatim(tmp_path: Path) -> None:
    responder = AskUserResponder.from_task(TASK, tmp_path)
    ans = responder.answer(ClarificationRequest(question=QUESTION, options=LABELS))
    assert ans.text == LABEL and ans.option == LABEL
    free = responder.answer(ClarificationRequest(question=QUESTION))
    assert free.option is None and WINDOW not in free.text
    other = responder.answer(ClarificationRequest(question="How many replicas?", options=["3", "4"]))
    assert WINDOW not in other.text


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_calibration_declares_drop_user_answer() -> None:
    assert TASK.spec.calibration.mutants == {"drop_user_answer": ["H1-chosen-option-delivered",
                                                                  "A1-window-from-user"]}
    links = {(link.harness, link.agent) for link in TASK.harness_rubric.links}
    assert ("H1-chosen-option-delivered", "A1-window-from-user") in links


# --------------------------------------------------------------------------- the verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path)) == set()


def test_claude_style_answer_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path, ask_tool="AskUserQuestion", answer=CLAUDE_ANSWER)) == set()


def test_dropped_answer_fails_h1_only(tmp_path: Path) -> None:
    """drop_user_answer: asked with options and picked (ledger), the model shown '(no answer)'."""
    out = SCORE.score(run(tmp_path, answer="(no answer)", window=None))
    assert {k for k, v in out.items() if not v[0]} == {"H1-chosen-option-delivered"}
    assert LABEL in out["H1-chosen-option-delivered"][1]


def test_no_channel_fails_both_harness_criteria(tmp_path: Path) -> None:
    out = SCORE.score(run(tmp_path, ask_tool=None, window=None))
    assert {k for k, v in out.items() if not v[0]} == {"H1-chosen-option-delivered",
                                                        "H2-question-reached-user-with-options"}
    assert "no ask-user call" in out["H1-chosen-option-delivered"][1]
    assert "ledger empty" in out["H2-question-reached-user-with-options"][1]


def test_declared_tool_that_refuses_fails_both(tmp_path: Path) -> None:
    ctx = run(tmp_path, ask_tool="request_user_input", answer="request_user_input is unavailable in Default mode",
              window=None, ledger=False)
    assert failed(ctx) == {"H1-chosen-option-delivered", "H2-question-reached-user-with-options"}


def test_options_not_offered_fails_h2(tmp_path: Path) -> None:
    # the harness dropped the options: the user answers free text, which names no option verbatim
    ctx = run(tmp_path, options=None, picked=None, answer="Thursday", window=None)
    assert failed(ctx) == {"H1-chosen-option-delivered", "H2-question-reached-user-with-options"}
    partial = run(tmp_path / "p", options=LABELS[:2])
    assert failed(partial) == {"H2-question-reached-user-with-options"}


def test_answer_relayed_as_user_text_passes_h1(tmp_path: Path) -> None:
    ctx = run(tmp_path, ask_tool=None, user_texts=[f"Use {LABEL}."])
    assert failed(ctx) == {"H2-question-reached-user-with-options"}


def test_probe_report_links_the_ask_call(tmp_path: Path) -> None:
    probe = {"requests": [{"index": 2, "action": "native_tool", "mapped_tool": "ask_user", "call_id": "call_2"}]}
    assert failed(run(tmp_path, trace=False, probe=probe)) == set()
    assert "H1-chosen-option-delivered" in failed(run(tmp_path / "x", trace=False, probe=None))
    indirect = {"requests": [{"index": 2, "action": "native_tool", "mapped_tool": "tool_call", "call_id": "call_2",
                              "arguments": {"id": "ask_user", "args": {}}}]}
    assert failed(run(tmp_path / "i", trace=False, probe=indirect)) == set()


def test_guessed_or_missing_window_fails_a2(tmp_path: Path) -> None:
    assert failed(run(tmp_path, window="RW-TUE-0200")) == {"A2-window-not-guessed"}
    assert failed(run(tmp_path / "m", window="<none>")) == {"A2-window-not-guessed"}
    assert failed(run(tmp_path / "n", window=None)) == set()


# --------------------------------------------------------------------------- the probe policy


def turn(*tools: str) -> Turn:
    return Turn(1, TASK.prompt, view=TurnView(tool_names=tools))


def answers(ask_text: str, *, absent: bool = False, search_text: str | None = None, is_error: bool = False):
    def respond(action: Any) -> Observation:
        if isinstance(action, ReadFile):
            return Observation(text=RELEASE)
        if isinstance(action, NativeTool) and action.name == "tool_search":
            return Observation(text=search_text or "")
        if isinstance(action, (NativeTool, AskUser)):
            return Observation(absent=True, kind="absent") if absent else Observation(text=ask_text, is_error=is_error)
        return Observation(text="ok")
    return respond


def written(actions: list[Any]) -> dict[str, Any]:
    writes = [a for a in actions if isinstance(a, WriteFile)]
    assert len(writes) == 1 and writes[0].path == "rollout.json"
    return json.loads(writes[0].content)


def test_policy_reference_form() -> None:
    actions = drive(POLICY, turn("shell", "read_file", "write_file", "ask_user"), answers(LABEL))
    ask = actions[1]
    assert isinstance(ask, NativeTool) and ask.name == "ask_user"
    assert ask.arguments["options"] == LABELS and "window" in ask.arguments["question"]
    assert written(actions) == {"service": "payments-gateway", "version": "5.3.0", "window": WINDOW, "choice": LABEL}
    assert isinstance(actions[-1], Final) and WINDOW in actions[-1].text


@pytest.mark.parametrize("tool", ["AskUserQuestion", "request_user_input"])
def test_policy_structured_forms(tool: str) -> None:
    actions = drive(POLICY, turn("Bash", "Write", tool), answers(CLAUDE_ANSWER))
    ask = actions[1]
    assert isinstance(ask, NativeTool) and ask.name == tool
    (q,) = ask.arguments["questions"]
    assert [o["label"] for o in q["options"]] == LABELS and len(q["header"]) <= 12
    assert ("multiSelect" in q) == (tool == "AskUserQuestion") and ("id" in q) == (tool == "request_user_input")
    assert written(actions)["window"] == WINDOW


def test_policy_searches_a_deferred_ask_tool() -> None:
    actions = drive(POLICY, turn("exec", "read", "write", "tool_search", "tool_call"),
                    answers('{"status": "no_answer"}', search_text='[{"id": "ask_user", "description": "Ask"}]'))
    assert isinstance(actions[1], NativeTool) and actions[1].name == "tool_search"
    call = actions[2]
    assert isinstance(call, NativeTool) and call.name == "tool_call" and call.arguments["id"] == "ask_user"
    assert [o["label"] for o in call.arguments["args"]["questions"][0]["options"]] == LABELS
    assert written(actions)["window"] is None and "null" in actions[-1].text


def test_policy_search_without_ask_tool_falls_back_to_generic_action() -> None:
    actions = drive(POLICY, turn("exec", "tool_search", "tool_call"), answers("", absent=True, search_text="[]"))
    assert isinstance(actions[2], AskUser) and list(actions[2].options) == LABELS
    assert written(actions)["window"] is None and "no tool" in actions[-1].text


@pytest.mark.parametrize(("text", "expected"), [
    (LABEL, WINDOW),
    (CLAUDE_ANSWER, WINDOW),
    ("Thursday", WINDOW),                       # a free-text answer naming the window's day
    ("(no answer)", None),
    ("; ".join(LABELS), None),                  # every option echoed: no choice
    ("request_user_input is unavailable in Default mode", None),
])
def test_policy_takes_the_window_only_from_the_answer(text: str, expected: str | None) -> None:
    assert written(drive(POLICY, turn("ask_user"), answers(text)))["window"] == expected


def test_policy_error_or_absent_writes_null() -> None:
    assert written(drive(POLICY, turn("ask_user"), answers(LABEL, is_error=True)))["window"] is None
    actions = drive(POLICY, turn("Bash"), answers(LABEL, absent=True))
    assert written(actions)["window"] is None and "no tool" in actions[-1].text


@pytest.mark.parametrize("gutter", ["{i:>6}\t", "{i}: "])
def test_policy_reads_windows_through_a_line_numbered_file_tool(gutter: str) -> None:
    """Claude Code's Read prefixes every line with its number and a tab, DeepSeek 0.2.x's read with
    ``<n>: `` (real-CLI runs showed both)."""
    numbered = "\n".join(gutter.format(i=i) + line for i, line in enumerate(RELEASE.splitlines(), start=1))

    def respond(action: Any) -> Observation:
        if isinstance(action, ReadFile):
            return Observation(text=numbered)
        return answers(CLAUDE_ANSWER)(action)
    actions = drive(POLICY, turn("Read", "Write", "AskUserQuestion"), respond)
    assert [o["label"] for o in actions[1].arguments["questions"][0]["options"]] == LABELS
    assert written(actions)["window"] == WINDOW
