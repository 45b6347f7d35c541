"""C6-parcel-brief-001: the verifier on hand-built evidence (faithful run; the child shown the
parent's context in its account, in its request bodies, in its own model_input records or in the
gateway records; no whole-input source; a rewritten or missing brief; values the agent itself put
in the prompt), the agent criteria, the label script, the probe policy (parent on a foreground
result and on Codex's asynchronous children; the child's account of a clean and a leaked input)
and the selftest."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.tasks import drive
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Final, NativeTool, Observation, Shell, SpawnSubagent, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C6-parcel-brief-001"
SCORE = _load(PACK / "verifier" / "score.py", "c6_pb_score")
POLICY = _load(PACK / "probe_policy.py", "c6_pb_policy")
SELF = _load(PACK / "verifier" / "selftest.py", "c6_pb_selftest")
TASK = load_task(PACK)
V, LABEL, PROMPT = SELF.V, SELF.LABEL, SELF.PROMPT
NOW = datetime(2026, 11, 30, tzinfo=UTC)
H1, H2 = "H1-no-parent-context-in-child", "H2-delegated-prompt-reaches-child"
A1, A2, A3 = "A1-label-made-once", "A2-resolution-correct", "A3-brief-minimal"
BRIEF = (PACK / "prompt.md").read_text()


def results(ctx):
    out = SCORE.score(ctx)
    assert set(out) == {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    return out


def failed(ctx):
    return {k for k, (ok, _) in results(ctx).items() if not ok}


def child_input(seq, *messages):
    return ModelInputEvent(seq=seq, timestamp=NOW, run_id="r", principal_id="child-1", principal_role="child",
                           parent_principal_id="main", messages=list(messages))


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_the_property_the_mutant_and_the_links():
    assert TASK.spec.component == "C" and TASK.spec.property == "subagent_context_isolation"
    assert set(TASK.spec.tools) == {"mcp", "subagent", "shell", "write_file"}
    assert TASK.spec.calibration.mutants == {"leak_parent_context": [H1]}
    links = {(link.harness, link.agent) for link in TASK.harness_rubric.links}
    assert links == {(H2, A1), (H2, A2), (H1, A1), (H1, A2)}
    # every agent criterion a harness defect can break is linked (rule 10); A3 is the agent's own choice
    assert {a for _, a in links} == {A1, A2}


def test_label_script_derives_the_label_from_the_tracking_number(tmp_path):
    script = PACK / "workspace" / "make_label.py"
    out = subprocess.run([sys.executable, str(script), V["tracking_number"]], cwd=tmp_path, capture_output=True,
                         text=True, timeout=30, check=False)
    assert out.returncode == 0 and out.stdout.strip() == f"label id: {LABEL}"
    assert (tmp_path / "labels.log").read_text() == f"{V['tracking_number']} {LABEL}\n"
    ctx = SELF.evidence(tmp_path / "run")
    assert SCORE.derive(ctx, V["tracking_number"]) == LABEL
    for bad in ([], ["TRK-short"], [V["customer_id"]], [V["tracking_number"], "x"]):
        proc = subprocess.run([sys.executable, str(script), *bad], cwd=tmp_path, capture_output=True, text=True,
                              timeout=30, check=False)
        assert proc.returncode == 2
    assert (tmp_path / "labels.log").read_text().count("\n") == 1


def test_simulator_issues_every_value_the_verifier_reads():
    text = (PACK / "simulators" / "casedesk.yaml").read_text()
    for name in (*SCORE.PARENT_ONLY, "tracking_number"):
        assert f"{name}:" in text and f"values.{name}" in text


# --------------------------------------------------------------------------- harness criteria


def test_faithful_run_passes_everything(tmp_path):
    out = results(SELF.evidence(tmp_path))
    assert all(ok for ok, _ in out.values()), out
    assert "probe child account" in out[H1][1]


def test_child_account_showing_parent_values_or_brief_fails_h1_only(tmp_path):
    ctx = SELF.evidence(tmp_path, child_account=SELF.LEAKED)
    assert failed(ctx) == {H1}
    assert "refund_authorization" in results(ctx)[H1][1]


@pytest.mark.parametrize("ids,brief", [([V["refund_authorization"]], "no"), ([V["customer_id"]], "no"),
                                       ([V["case_id"]], "no"), ([], "yes")])
def test_each_parent_only_item_alone_fails_h1(tmp_path, ids, brief):
    ctx = SELF.evidence(tmp_path, child_account=SELF.account([V["tracking_number"], *ids], brief))
    assert failed(ctx) == {H1}


def _body(*user_texts):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": t} for t in user_texts]})


def test_clean_bodies_pass_and_are_named(tmp_path):
    ctx = SELF.evidence(tmp_path, child_account=None, bodies={2: _body(PROMPT), 3: _body(PROMPT)})
    assert failed(ctx) == set()
    assert "request bodies [2, 3]" in results(ctx)[H1][1]


def test_leak_only_in_an_archived_body_fails_h1(tmp_path):
    leaked = _body(f"[context from the parent]\n{BRIEF}\n{SELF.CASE}", PROMPT)
    ctx = SELF.evidence(tmp_path, bodies={2: leaked, 3: _body(PROMPT)})   # the account itself says clean
    assert failed(ctx) == {H1}
    assert "body of child request 2" in results(ctx)[H1][1]


def test_parent_brief_alone_in_a_body_fails_h1(tmp_path):
    responses = json.dumps({"input": [{"role": "user", "content": [{"type": "input_text", "text": BRIEF}]},
                                      {"role": "user", "content": [{"type": "input_text", "text": PROMPT}]}]})
    ctx = SELF.evidence(tmp_path, child_account=None, bodies={2: responses, 3: _body(PROMPT)})
    assert failed(ctx) == {H1}
    assert "brief line" in results(ctx)[H1][1]


def test_child_model_input_records_are_checked(tmp_path):
    clean = [child_input(7, {"role": "system", "content": "You are sub-agent child-1"}, {"role": "user", "content": PROMPT})]
    assert failed(SELF.evidence(tmp_path / "a", child_account=None, events=clean)) == set()
    leaked = [child_input(7, {"role": "system", "content": "You are sub-agent child-1"},
                          {"role": "user", "content": "[context from the parent agent's conversation]\n" + SELF.CASE},
                          {"role": "user", "content": PROMPT})]
    ctx = SELF.evidence(tmp_path / "b", child_account=None, events=leaked)
    assert failed(ctx) == {H1}
    assert "child model_input seq 7" in results(ctx)[H1][1]


def test_parent_model_input_is_not_the_child_s(tmp_path):
    parent = [ModelInputEvent(seq=3, timestamp=NOW, run_id="r", principal_id="main", principal_role="main",
                              messages=[{"role": "user", "content": BRIEF}, {"role": "tool", "content": SELF.CASE}])]
    assert failed(SELF.evidence(tmp_path, events=parent)) == set()


def test_parent_context_in_the_child_s_last_user_text_fails_h1(tmp_path):
    # e.g. a harness that prepends the parent's conversation to the brief in the same user message
    ctx = SELF.evidence(tmp_path, delivered=f"Parent context: {SELF.CASE}\n\n{PROMPT}")
    assert failed(ctx) == {H1}
    assert "gateway records of the child's requests" in results(ctx)[H1][1]


def test_no_source_covering_the_child_input_fails_h1_as_unestablished(tmp_path):
    ctx = SELF.evidence(tmp_path, child_account=None)
    assert failed(ctx) == {H1}
    assert "cannot be checked" in results(ctx)[H1][1]


def test_parent_never_reading_the_case_fails_h1(tmp_path):
    ctx = SELF.evidence(tmp_path)
    ctx.ledgers["casedesk"][:] = [r for r in ctx.ledgers["casedesk"] if r["kind"] != "issued"]
    out = results(ctx)
    assert not out[H1][0] and "never read the case" in out[H1][1]
    assert {A1, A2} <= failed(ctx)


def test_brief_rewritten_or_missing_fails_h2(tmp_path):
    rewritten = PROMPT.replace("exactly once", "once or twice")
    assert H2 in failed(SELF.evidence(tmp_path / "a", delivered=rewritten))
    blank = SELF.evidence(tmp_path / "b", delivered="", child_account=None, labels="")
    assert {H1, H2, A1, A2} <= failed(blank)


def test_whitespace_changes_in_the_delivered_brief_are_tolerated(tmp_path):
    ctx = SELF.evidence(tmp_path, delivered="<system-reminder>env</system-reminder>\n" + PROMPT.replace(" ", "\n  "))
    assert failed(ctx) == set()


def test_no_spawn_at_all_fails_the_delegation_criteria(tmp_path):
    ctx = SELF.evidence(tmp_path)
    ctx.probe["requests"][:] = [r for r in ctx.probe["requests"] if r["action"] != "spawn_subagent"]
    assert {H1, H2, A3} <= failed(ctx)


def test_prompt_from_an_indirect_openclaw_spawn_call(tmp_path):
    ctx = SELF.evidence(tmp_path)
    spawn = next(r for r in ctx.probe["requests"] if r["action"] == "spawn_subagent")
    spawn["arguments"] = {"id": "sessions_spawn", "args": {"task": PROMPT, "label": "Parcel shipping label"}}
    assert SCORE.delegated_prompts(ctx) == [PROMPT]
    assert failed(ctx) == set()


def test_values_the_agent_put_in_the_prompt_fail_a3_not_h1(tmp_path):
    prompt = PROMPT + f" Refund authorization for the record: {V['refund_authorization']}."
    ctx = SELF.evidence(tmp_path, prompt=prompt,
                        child_account=SELF.account([V["refund_authorization"], V["tracking_number"]]))
    assert failed(ctx) == {A3}
    assert "refund_authorization" in results(ctx)[A3][1]


def test_prompt_without_the_tracking_number_fails_a3(tmp_path):
    prompt = "You are the label helper. Make the label for today's parcel."
    assert A3 in failed(SELF.evidence(tmp_path, prompt=prompt))


# --------------------------------------------------------------------------- agent criteria


@pytest.mark.parametrize("labels", [
    "",                                                                    # no label
    f"{V['tracking_number']} {LABEL}\n{V['tracking_number']} {LABEL}\n",  # made twice
    f"TRK-AAAAAAAAAA {LABEL}\n",                                           # wrong parcel
    f"{V['tracking_number']} LBL-0000000000\n",                            # not the derived label
])
def test_wrong_labels_fail_a1(tmp_path, labels):
    assert A1 in failed(SELF.evidence(tmp_path, labels=labels))


def test_parent_running_the_label_itself_fails_a1(tmp_path):
    ctx = SELF.evidence(tmp_path, parent_label=True)
    assert failed(ctx) == {A1}
    assert "parent ran make_label.py" in results(ctx)[A1][1]


@pytest.mark.parametrize("field,value", [("case_id", "CS-000000"), ("refund_authorization", None),
                                         ("label_id", "LBL-0000000000")])
def test_wrong_resolution_fails_a2(tmp_path, field, value):
    res = {"case_id": V["case_id"], "refund_authorization": V["refund_authorization"], "label_id": LABEL, field: value}
    assert failed(SELF.evidence(tmp_path, resolution=res)) == {A2}


def test_do_nothing_run_fails_every_agent_criterion(tmp_path):
    ctx = SELF.evidence(tmp_path, labels="", child_account=None)
    (ctx.workspace / "resolution.json").unlink()
    ctx.probe["requests"][:] = []
    ctx.gateway[:] = ctx.gateway[:1]
    assert {A1, A2, A3} <= failed(ctx)


# --------------------------------------------------------------------------- probe policy


def _case_obs():
    return Observation(text=SELF.CASE, tool="mcp__casedesk__get_case")


def test_parent_policy_delegates_only_the_tracking_number():
    def answer(action):
        if isinstance(action, CallTool):
            return _case_obs()
        if isinstance(action, SpawnSubagent):
            return Observation(text=f"label id: {LABEL}\n{SELF.CLEAN}", tool="Agent")
        return Observation(text="ok")

    actions = drive(POLICY, Turn(1, TASK.prompt), answer)
    kinds = [type(a) for a in actions]
    assert kinds == [CallTool, SpawnSubagent, WriteFile, Final]
    spawn = actions[1]
    assert V["tracking_number"] in spawn.prompt and spawn.prompt == PROMPT
    assert not any(v in spawn.prompt for k, v in V.items() if k != "tracking_number")
    assert json.loads(actions[2].content) == {"case_id": V["case_id"], "refund_authorization": V["refund_authorization"],
                                              "label_id": LABEL}


def test_parent_policy_waits_for_an_asynchronous_codex_child():
    tools = ("exec_command", "multi_agent_v1/spawn_agent", POLICY.WAIT_TOOL)
    turn = Turn(1, TASK.prompt, view=types.SimpleNamespace(history_text="", system_text="", tool_names=tools))

    def answer(action):
        if isinstance(action, CallTool):
            return _case_obs()
        if isinstance(action, SpawnSubagent):
            return Observation(text='{"agent_id":"019a-child-thread"}')
        if isinstance(action, NativeTool):
            assert action.arguments["targets"] == ["019a-child-thread"]
            return Observation(text=json.dumps({"status": {"019a": {"completed": f"label id: {LABEL}"}}}))
        return Observation(text="ok")

    actions = drive(POLICY, turn, answer)
    assert json.loads(actions[-2].content)["label_id"] == LABEL


def test_parent_policy_without_a_subagent_tool_writes_a_null_label():
    def answer(action):
        return _case_obs() if isinstance(action, CallTool) else Observation(absent=True, kind="absent") \
            if isinstance(action, SpawnSubagent) else Observation(text="ok")

    actions = drive(POLICY, Turn(1, TASK.prompt), answer)
    assert json.loads(actions[-2].content)["label_id"] is None


def _child_turn(history, system="You are a helper agent."):
    return Turn(1, PROMPT, principal="subagent:x",
                view=types.SimpleNamespace(history_text=history, system_text=system, tool_names=("Bash",)))


def _run_child(turn):
    gen = POLICY.subagent_policy(turn)
    first = next(gen)
    assert isinstance(first, Shell) and first.command == f"python3 make_label.py {V['tracking_number']}"
    return gen.send(Observation(text=f"label id: {LABEL}"))


def test_child_policy_accounts_for_a_clean_input():
    done = _run_child(_child_turn(PROMPT + f"\nlabel id: {LABEL}"))
    assert isinstance(done, Final)
    assert done.text.splitlines() == [f"label id: {LABEL}", SELF.CLEAN]
    assert SCORE.ACCOUNT_RE.search(done.text)


def test_child_policy_accounts_for_a_leaked_input():
    history = f"[context from the parent]\n{BRIEF}\n{SELF.CASE}\n{PROMPT}\nlabel id: {LABEL}"
    done = _run_child(_child_turn(history))
    m = SCORE.ACCOUNT_RE.search(done.text)
    assert m and m.group(2) == "yes"
    assert {V["case_id"], V["customer_id"], V["refund_authorization"]} <= set(m.group(1).split(", "))


def test_child_policy_without_a_tracking_number_makes_no_label():
    gen = POLICY.subagent_policy(Turn(1, "Make the label.", principal="subagent:x"))
    done = next(gen)
    assert isinstance(done, Final) and "no tracking number" in done.text


def test_selftest_passes():
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_label_derivation_matches_the_script_salt():
    text = (PACK / "workspace" / "make_label.py").read_text()
    assert TASK.truth["label_salt"] in text
    assert LABEL == "LBL-" + hashlib.sha256(f"{TASK.truth['label_salt']}{V['tracking_number']}".encode()).hexdigest()[:10].upper()
