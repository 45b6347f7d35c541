"""Judge prompt, strict parsing, LiteLLM failure handling, cassette and archive replay."""

from __future__ import annotations

import json
import sys
import types

import pytest

from criteria.errors import JudgeError
from criteria.judge import (
    ArchivedJudge,
    CassetteJudge,
    LiteLLMJudge,
    MalformedJudgeOutput,
    make_judge,
    parse_response,
    prompt_hash,
    prompt_messages,
)

REFS = ["seq:3", "seq:7", "gateway:1"]


def test_parse_valid_fenced_and_normalized_citations():
    verdict = parse_response('{"state": 1, "rationale": "exit code shown at seq 3", "citations": [3, "gateway:1"]}',
                             "agent", REFS)
    assert (verdict.state, verdict.citations) == (1, ["seq:3", "gateway:1"])
    fenced = parse_response('```json\n{"state": 2, "rationale": "not exercised", "citations": []}\n```', "harness", REFS)
    assert fenced.state == 2


@pytest.mark.parametrize(("text", "layer", "message"), [
    ("The criterion holds.", "agent", "not JSON"),
    ('["state", 1]', "agent", "expected an object"),
    ('{"state": 2, "rationale": "x", "citations": []}', "agent", "state 2 is not allowed for the agent layer"),
    ('{"state": 4, "rationale": "x"}', "harness", "state 4 is not allowed for the harness layer"),
    ('{"state": true, "rationale": "x"}', "agent", "state True is not allowed"),
    ('{"state": 1, "rationale": ""}', "agent", "rationale is missing"),
    ('{"state": 1, "rationale": "ok", "citations": ["seq:99"]}', "agent", "not in the evidence packet: seq:99"),
    ('{"state": 0, "rationale": "see seq 42", "citations": ["seq:3"]}', "harness", "seq:42"),
])
def test_malformed_outputs_are_rejected(text, layer, message):
    with pytest.raises(MalformedJudgeOutput) as err:
        parse_response(text, layer, REFS)
    assert message in str(err.value)


def test_prompt_is_fixed_and_context_only_for_harness():
    packet = {"scanned": 1, "matched": 1, "returned": 1, "truncated": False, "empty_selection": False,
              "unavailable_sources": {}, "records": [{"ref": "seq:3"}], "selector": {"ignored": True}}
    context = [{"id": "A1", "verdict": "pass"}]
    agent = prompt_messages(criterion_id="A1", layer="agent", statement="s", component="E", trigger="always",
                            packet=packet, agent_context=context)
    harness = prompt_messages(criterion_id="H1", layer="harness", statement="s", component="E", trigger="always",
                              packet=packet, agent_context=context)
    assert "Downstream context" not in agent[1]["content"] and "Downstream context" in harness[1]["content"]
    assert "2 = the target path" in harness[1]["content"] and "2 = " not in agent[1]["content"]
    assert '"ignored"' not in agent[1]["content"]
    again = prompt_messages(criterion_id="A1", layer="agent", statement="s", component="E", trigger="always",
                            packet=dict(reversed(list(packet.items()))), agent_context=None)
    assert prompt_hash(again) == prompt_hash(agent)


def _fake_litellm(monkeypatch, completion):
    module = types.ModuleType("litellm")
    module.completion = completion  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "litellm", module)


def test_litellm_judge_returns_content_and_passes_the_model(monkeypatch):
    seen = {}

    def completion(model, messages, **kwargs):
        seen.update(model=model, kwargs=kwargs)
        message = types.SimpleNamespace(content='{"state": 0, "rationale": "r"}')
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])

    _fake_litellm(monkeypatch, completion)
    judge = LiteLLMJudge("deepseek/deepseek-v4-flash", api_base="http://127.0.0.1:1")
    assert judge.complete([{"role": "user", "content": "x"}]).startswith('{"state": 0')
    assert seen["model"] == "deepseek/deepseek-v4-flash" and seen["kwargs"]["temperature"] == 0.0
    assert seen["kwargs"]["api_base"] == "http://127.0.0.1:1" and "api_key" not in seen["kwargs"]


def test_litellm_failures_become_judge_errors(monkeypatch):
    def completion(model, messages, **kwargs):
        raise ConnectionError("Connection refused\nmore lines")

    _fake_litellm(monkeypatch, completion)
    with pytest.raises(JudgeError) as err:
        LiteLLMJudge("m").complete([{"role": "user", "content": "x"}])
    assert str(err.value) == "judge 'm' unreachable: ConnectionError: Connection refused"


def test_cassette_replay_miss_and_record(tmp_path):
    messages = [{"role": "user", "content": "judge this"}]
    path = tmp_path / "cassette.json"
    cassette = CassetteJudge(path, name="recorded-model")
    key = cassette.add(messages, '{"state": 1}')
    cassette.save()
    replay = CassetteJudge(path)
    assert replay.name == "recorded-model" and replay.complete(messages) == '{"state": 1}'
    with pytest.raises(JudgeError, match="no cassette entry for prompt"):
        replay.complete([{"role": "user", "content": "other"}])
    assert json.loads(path.read_text())["entries"][key] == {"response": '{"state": 1}'}

    class Live:
        name = "live-model"

        def complete(self, msgs):
            return "live answer"

    recording = CassetteJudge(tmp_path / "new.json", record=Live())
    assert recording.complete(messages) == "live answer"
    assert CassetteJudge(tmp_path / "new.json").complete(messages) == "live answer"


def test_archived_judge_replays_responses_and_errors():
    ok = [{"role": "user", "content": "a"}]
    failed = [{"role": "user", "content": "b"}]
    judge = ArchivedJudge([
        {"prompt_sha256": prompt_hash(ok), "model": "m1", "response": "resp", "error": None},
        {"prompt_sha256": prompt_hash(failed), "model": "m1", "response": None, "error": "judge 'm1' unreachable: X"},
    ])
    assert judge.name == "m1" and judge.complete(ok) == "resp"
    with pytest.raises(JudgeError, match="judge 'm1' unreachable: X"):
        judge.complete(failed)
    with pytest.raises(JudgeError, match="no archived judge response"):
        judge.complete([{"role": "user", "content": "c"}])


def test_make_judge(tmp_path):
    assert make_judge(None) is None and make_judge("none") is None
    cassette = tmp_path / "c.json"
    cassette.write_text('{"entries": {}}')
    assert isinstance(make_judge(str(cassette)), CassetteJudge)
    assert isinstance(make_judge(f"cassette:{cassette}"), CassetteJudge)
    live = make_judge("deepseek-v4-flash")  # a models.yaml alias: routed through its provider
    assert isinstance(live, LiteLLMJudge) and live.name == "deepseek-v4-flash"
    assert live.model.endswith("/deepseek-v4-flash")
    raw = make_judge("openai/some-model")
    assert isinstance(raw, LiteLLMJudge) and (raw.name, raw.model) == ("openai/some-model", "openai/some-model")
