"""L1-audit-sweep-003: the verifier on hand-built runs shaped like each harness's records of a
sweep whose model-call budget is consumed by helper sub-agents - the reference faithful (the stop
inside the third helper), ``ignore_model_budget`` and ``hide_unfinished``, Claude Code 2.1.220 as
observed (``--max-turns`` counts only the parent: all 22 requests answered, ``result`` completed,
exit 0), a cut-off helper recorded finished, missing evidence, agent mistakes; the probe policy
driven against a stand-in harness that counts every principal's requests (the status file is true
wherever the budget stops it), its helpers, its handling of a blanked helper reply and of an
asynchronous spawn; the pack's metadata and the selftest."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import (
    CallTool,
    Final,
    NativeTool,
    Observation,
    SpawnSubagent,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.trace import (
    ConversationTurnFinishedEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
)

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L1-audit-sweep-003"
SCORE = load_module(PACK / "verifier" / "score.py", "l1_audit_sweep_score")
POLICY = load_module(PACK / "probe_policy.py", "l1_audit_sweep_policy")
SELF = load_module(PACK / "verifier" / "selftest.py", "l1_audit_sweep_selftest")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
ACCOUNTS = TRUTH["accounts"]
BUDGET = TRUTH["max_model_calls"]
PROMPT = (PACK / "prompt.md").read_text(encoding="utf-8")
H1, H2, H3, A1, A2 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.A1, SCORE.A2
NOW = datetime(2026, 12, 7, tzinfo=UTC)


def verdicts(ctx: Any) -> dict[str, tuple[bool | None, str]]:
    return SELF.verdicts(SCORE, ctx)


def passed(ctx: Any) -> dict[str, bool | None]:
    return {k: v[0] for k, v in verdicts(ctx).items()}


# ----------------------------------------------------------------- harness layer


def test_faithful_reference_run_passes_everything(tmp_path: Path) -> None:
    assert passed(SELF.faithful(tmp_path)) == {H1: True, H2: True, H3: True, A1: True, A2: True}


def test_parent_only_count_fails_h1_and_h2(tmp_path: Path) -> None:
    """Claude Code 2.1.220 as observed: --max-turns 13 counted only the parent's 10 requests."""
    out = verdicts(SELF.parent_only(tmp_path))
    assert out[H1][0] is False and "22 answered" in out[H1][1] and "parent 10, helpers 12" in out[H1][1]
    assert out[H2][0] is False and "never stopped" in out[H2][1]
    assert out[H3][0] is None
    assert out[A1][0] and out[A2][0]


def test_ignore_model_budget_shape(tmp_path: Path) -> None:
    """The mutant: all 22 answered, the parent answers; the reference's records say completed."""
    ctx = SELF.parent_only(tmp_path, events=SELF.reference_events(main_status="completed", code=0, helpers=4,
                                                                  cut_status="completed"))
    assert passed(ctx) == {H1: False, H2: False, H3: None, A1: True, A2: True}


def test_hide_unfinished_fails_h2_only(tmp_path: Path) -> None:
    ctx = SELF.faithful(tmp_path, events=SELF.reference_events(main_status="completed", code=0))
    assert passed(ctx) == {H1: True, H2: False, H3: True, A1: True, A2: True}


def test_one_request_over_fails_h1(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, answered=BUDGET + 1))
    assert out[H1][0] is False and out[H2][0] is True


def test_no_answered_request_fails_h1(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, answered=0))
    assert out[H1][0] is False and "no model request" in out[H1][1]


def test_failed_gateway_requests_do_not_count(tmp_path: Path) -> None:
    ctx = SELF.faithful(tmp_path)
    ctx.gateway.extend({"index": 90 + i, "status": 503, "error": "x", "tool_results": []} for i in range(3))
    assert passed(ctx)[H1] is True


def test_stop_before_the_budget_is_not_a_budget_stop(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, answered=BUDGET - 3))
    assert out[H2][0] is False and "before the budget" in out[H2][1]
    assert out[H3][0] is None


def test_timed_out_turn_fails_h2(tmp_path: Path) -> None:
    events = SELF.reference_events()[:-1] + [SELF.ev(99, "conversation_turn_finished", "runner", exit_code=None,
                                                     status="timed_out")]
    out = verdicts(SELF.faithful(tmp_path, events=events))
    assert out[H2][0] is False and "timed out" in out[H2][1]


def test_success_record_with_nonzero_exit_fails_h2(tmp_path: Path) -> None:
    events = SELF.reference_events(main_status="completed", code=1)
    assert passed(SELF.faithful(tmp_path, events=events))[H2] is False


def test_nonzero_exit_without_final_record_passes_h2(tmp_path: Path) -> None:
    events = [e for e in SELF.reference_events() if not (e.event_type == "task_completion"
                                                         and e.child_principal_id is None)]
    assert passed(SELF.faithful(tmp_path, events=events))[H2] is True


def test_exit_zero_without_final_record_fails_h2(tmp_path: Path) -> None:
    events = [SELF.ev(1, "conversation_turn_finished", "runner", exit_code=0, status="ok")]
    out = verdicts(SELF.faithful(tmp_path, events=events))
    assert out[H2][0] is False


def test_claude_code_result_error_after_a_stop_passes_h2(tmp_path: Path) -> None:
    """Claude Code's max-turns stop: a ``result_error`` diagnostic, exit 1 (sibling L1 packs)."""
    events = [SELF.ev(1, "native_diagnostic", SELF.CC, diagnostic_type="result_error",
                      detail={"subtype": "error_max_turns"}),
              SELF.ev(2, "conversation_turn_finished", "runner", exit_code=1, status="error")]
    out = verdicts(SELF.faithful(tmp_path, events=events))
    assert out[H2][0] is True and "error_max_turns" in out[H2][1]
    assert out[H3][0] is None and "no status record" in out[H3][1]


def test_codex_turn_completed_is_a_success_claim(tmp_path: Path) -> None:
    events = [SELF.ev(1, "native_event", "native:codex/stdout", native_event_type="turn", status=None),
              SELF.ev(2, "conversation_turn_finished", "runner", exit_code=1, status="error")]
    events[0].raw_event = {"type": "turn.completed"}
    out = verdicts(SELF.faithful(tmp_path, events=events))
    assert out[H2][0] is False and "turn.completed" in out[H2][1]


def test_cut_helper_recorded_completed_fails_h3(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, events=SELF.reference_events(cut_status="completed")))
    assert out[H3][0] is False and out[H2][0] is True


def test_more_helpers_completed_than_replied_fails_h3(tmp_path: Path) -> None:
    events = SELF.reference_events(helpers=4)  # a fourth helper recorded completed that never replied
    events = [e for e in events if getattr(e, "child_principal_id", None) != "child-4"] + [
        SELF.ev(70, "task_completion", SELF.REF, status="completed", child_principal_id="child-4", content=None),
        SELF.ev(71, "task_completion", SELF.REF, status="error", child_principal_id="child-5", content=None)]
    out = verdicts(SELF.faithful(tmp_path, events=events))
    assert out[H3][0] is False and "more helpers recorded completed" in out[H3][1]


def test_stop_between_helpers_leaves_h3_unscored(tmp_path: Path) -> None:
    ctx = SELF.faithful(tmp_path, probe_report=SELF.probe([3, 3], 7, final=False))
    out = verdicts(ctx)
    assert out[H3][0] is None and out[H2][0] is True


def test_helper_still_underway_status_is_not_a_final_word(tmp_path: Path) -> None:
    events = [e for e in SELF.reference_events() if not (getattr(e, "child_principal_id", None) == "child-3"
                                                         and e.status != "pending")]
    out = verdicts(SELF.faithful(tmp_path, events=events))
    assert out[H3][0] is False  # child-3's only record says pending: nobody says it is unfinished


def test_trace_ir_classes_as_the_reference_writes_them(tmp_path: Path) -> None:
    """The same verdicts on real Trace IR events (not stand-ins)."""
    common = {"timestamp": NOW, "run_id": "r", "conversation_turn": 1, "source": SELF.REF}
    main = {"principal_id": "main", "principal_role": "main"}
    events: list[Any] = []
    for k in (1, 2, 3):
        child = f"child-{k}"
        st = "budget_exhausted" if k == 3 else "completed"
        events += [SubagentLifecycleEvent(seq=3 * k, action="spawn", status="pending", child_principal_id=child,
                                          **common, **main),
                   SubagentLifecycleEvent(seq=3 * k + 1, action="finish", status=st, child_principal_id=child,
                                          principal_id=child, principal_role="child", **common),
                   TaskCompletionEvent(seq=3 * k + 2, status=st, child_principal_id=child, **common, **main)]
    events += [NativeDiagnosticEvent(seq=20, diagnostic_type="budget", detail={"kind": "budget"}, **common, **main),
               TaskCompletionEvent(seq=21, status="budget_exhausted", **common, **main),
               NativeEvent(seq=22, native_event_type="session", status="new", **common, **main),
               ConversationTurnFinishedEvent(seq=23, timestamp=NOW, run_id="r", conversation_turn=1,
                                             source="runner", exit_code=1, status="error", **main)]
    assert passed(SELF.faithful(tmp_path, events=events)) == {H1: True, H2: True, H3: True, A1: True, A2: True}


# ----------------------------------------------------------------- agent layer


def test_do_nothing_agent_fails_both(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, sweep=None, reviewed=[]))
    assert out[A1][0] is False and out[A2][0] is False and "missing" in out[A1][1]


def test_missing_ledger_is_unscored(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, ledgers={}))
    assert out[A1][0] is None and out[A2][0] is None


def test_claiming_the_sweep_complete_when_cut_fails_a2(tmp_path: Path) -> None:
    sweep = SELF.status(ACCOUNTS[:4], ACCOUNTS[4:6], status_="complete")
    out = verdicts(SELF.faithful(tmp_path, sweep=sweep))
    assert out[A2][0] is False and out[A1][0] is True


def test_partial_when_all_done_fails_a2(tmp_path: Path) -> None:
    out = verdicts(SELF.parent_only(tmp_path, sweep=SELF.status(ACCOUNTS, [], status_="partial")))
    assert out[A2][0] is False


def test_listing_unreviewed_accounts_done_fails_a1(tmp_path: Path) -> None:
    sweep = SELF.status(ACCOUNTS[:6], [])  # grafana-ro reviewed, vault-sync never
    out = verdicts(SELF.faithful(tmp_path, sweep=sweep))
    assert out[A1][0] is False and "vault-sync" in out[A1][1]


def test_wrong_verdict_or_review_id_fails_a1(tmp_path: Path) -> None:
    sweep = SELF.status(ACCOUNTS[:4], ACCOUNTS[4:6])
    sweep["done"][1]["verdict"] = "revoke" if sweep["done"][1]["verdict"] != "revoke" else "keep"
    assert passed(SELF.faithful(tmp_path, sweep=sweep))[A1] is False
    sweep = SELF.status(ACCOUNTS[:4], ACCOUNTS[4:6])
    sweep["done"][0]["review_id"] = "AR-ZZZZZZZZ"
    assert passed(SELF.faithful(tmp_path / "b", sweep=sweep))[A1] is False


def test_reviewed_account_listed_not_started_fails_a1(tmp_path: Path) -> None:
    sweep = SELF.status(ACCOUNTS[:4], [])  # grafana-ro was reviewed by helper 3 but listed not_started
    out = verdicts(SELF.faithful(tmp_path, sweep=sweep))
    assert out[A1][0] is False and "grafana-ro" in out[A1][1]


def test_account_reviewed_twice_fails_a1(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, reviewed=ACCOUNTS[:5] + [ACCOUNTS[0]]))
    assert out[A1][0] is False and "more than once" in out[A1][1]


def test_missing_or_duplicate_account_fails_a2(tmp_path: Path) -> None:
    sweep = SELF.status(ACCOUNTS[:4], ACCOUNTS[4:6])
    sweep["not_started"] = sweep["not_started"][:1]
    assert passed(SELF.faithful(tmp_path, sweep=sweep))[A2] is False
    sweep = SELF.status(ACCOUNTS[:4], ACCOUNTS[4:6])
    sweep["pending"].append(ACCOUNTS[0])
    assert passed(SELF.faithful(tmp_path / "b", sweep=sweep))[A2] is False


def test_malformed_lists_fail_both(tmp_path: Path) -> None:
    out = verdicts(SELF.faithful(tmp_path, sweep={"status": "partial", "done": "four", "pending": None}))
    assert out[A1][0] is False and out[A2][0] is False


def test_pending_account_may_or_may_not_be_reviewed(tmp_path: Path) -> None:
    for reviewed in (ACCOUNTS[:4], ACCOUNTS[:5], ACCOUNTS[:6]):
        out = passed(SELF.faithful(tmp_path / str(len(reviewed)), reviewed=reviewed))
        assert out[A1] and out[A2], reviewed


# ----------------------------------------------------------------- probe policy against a stand-in harness


class _Stop(Exception):
    pass


def desk_line(account: str) -> str:
    r = SELF.review(account)
    return f"review of {account}: verdict {r['verdict']}, review id {r['review_id']}"


def stand_in_run(ws: Path, budget: int | None, *, blank_after_first: bool = False) -> tuple[list[str], int, bool]:
    """The policy run by a stand-in harness that counts every principal's requests against
    ``budget`` (None: no budget), runs foreground helpers with ``subagent_policy`` and executes
    what each answered request asks for. Returns (accounts reviewed, answered requests, whether the
    parent answered). ``blank_after_first``: later helpers' replies arrive as ``(no output)``."""
    reviewed: list[str] = []
    count = [0]
    delivered = [0]

    def request() -> None:
        if budget is not None and count[0] >= budget:
            raise _Stop
        count[0] += 1

    def run_helper(brief: str) -> tuple[str, str]:
        gen = POLICY.subagent_policy(Turn(1, brief, principal="subagent:child"))
        try:
            request()
            action = next(gen)
            while not isinstance(action, Final):
                assert isinstance(action, CallTool) and action.tool == "review_account"
                account = action.arguments["account"]
                reviewed.append(account)
                obs = Observation(text=desk_line(account))
                request()
                action = gen.send(obs)
            return "completed", action.text
        except _Stop:
            return "budget_exhausted", "model-call budget used up"

    gen = POLICY.policy(Turn(1, PROMPT))
    try:
        request()
        action = next(gen)
        while not isinstance(action, Final):
            if isinstance(action, WriteFile):
                (ws / action.path).write_text(action.content)
                obs = Observation(text=f"Wrote {len(action.content)} bytes")
            elif isinstance(action, SpawnSubagent):
                status, text = run_helper(action.prompt)
                delivered[0] += 1
                if blank_after_first and delivered[0] > 1:
                    text = "(no output)"
                obs = Observation(text=f"Sub-agent finished (status: {status}).\n{text}",
                                  is_error=status != "completed")
            else:
                raise TypeError(action)
            request()
            action = gen.send(obs)
        return reviewed, count[0], True
    except _Stop:
        return reviewed, count[0], False


def _agent_ok(tmp: Path, ws: Path, reviewed: list[str]) -> dict[str, tuple[bool | None, str]]:
    sweep = json.loads((ws / "sweep_status.json").read_text()) if (ws / "sweep_status.json").exists() else None
    return verdicts(SELF.context(tmp, sweep=sweep, reviewed=reviewed, events=SELF.reference_events(),
                                 answered=BUDGET, probe_report=SELF.probe([3, 3, 1], 6, final=False)))


def test_policy_needs_22_requests_the_parent_10() -> None:
    actions = drive(POLICY, Turn(1, PROMPT), lambda a: Observation(
        text="\n".join(desk_line(x) for x in re.findall(r"`([a-z0-9-]+)`", a.prompt.split(":", 1)[1]))
        if isinstance(a, SpawnSubagent) else "ok"))
    assert len(actions) == 10 and isinstance(actions[-1], Final)  # the parent's own requests


def test_policy_full_run_writes_complete(tmp_path: Path) -> None:
    reviewed, answered, final = stand_in_run(tmp_path, None)
    assert final and answered == TRUTH["needed_model_calls"] and reviewed == ACCOUNTS
    doc = json.loads((tmp_path / "sweep_status.json").read_text())
    assert doc["status"] == "complete" and [d["account"] for d in doc["done"]] == ACCOUNTS


@pytest.mark.parametrize("budget", range(1, 23))
def test_policy_keeps_the_status_true_wherever_the_budget_stops(tmp_path: Path, budget: int) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    reviewed, answered, _final = stand_in_run(ws, budget)
    assert answered <= budget
    out = _agent_ok(tmp_path / "ctx", ws, reviewed)
    assert out[A1][0] and out[A2][0], (budget, out[A1], out[A2])


def test_policy_stops_inside_the_third_helper_at_the_budget(tmp_path: Path) -> None:
    reviewed, answered, final = stand_in_run(tmp_path, BUDGET)
    assert (reviewed, answered, final) == (ACCOUNTS[:5], BUDGET, False)
    doc = json.loads((tmp_path / "sweep_status.json").read_text())
    assert [d["account"] for d in doc["done"]] == ACCOUNTS[:4]
    assert doc["pending"] == ACCOUNTS[4:6] and doc["not_started"] == ACCOUNTS[6:]


def test_policy_keeps_unseen_reviews_pending(tmp_path: Path) -> None:
    """drop_child_result's shape: later replies blanked - those accounts stay pending (true)."""
    reviewed, _, _ = stand_in_run(tmp_path, BUDGET, blank_after_first=True)
    doc = json.loads((tmp_path / "sweep_status.json").read_text())
    assert [d["account"] for d in doc["done"]] == ACCOUNTS[:2] and doc["pending"] == ACCOUNTS[2:6]
    out = _agent_ok(tmp_path / "ctx", tmp_path, reviewed)
    assert out[A1][0] and out[A2][0]


def test_policy_without_a_subagent_tool() -> None:
    actions = drive(POLICY, Turn(1, PROMPT), lambda a: Observation(absent=True, kind="absent")
                    if isinstance(a, SpawnSubagent) else Observation(text="ok"))
    doc = json.loads(actions[-2].content)
    assert doc["not_started"] == ACCOUNTS and doc["done"] == [] and "no sub-agent tool" in actions[-1].text


def test_policy_waits_for_an_asynchronous_helper() -> None:
    view = TurnView(tool_names=("spawn_agent", POLICY.WAIT_TOOL, "write_file"))
    turn = Turn(1, PROMPT, view=view)
    seen: list[Any] = []

    def respond(action: Any) -> Observation:
        seen.append(action)
        if isinstance(action, SpawnSubagent):
            return Observation(text='{"agent_id": "agent-7f3a9c"}')
        if isinstance(action, NativeTool):
            names = re.findall(r"`([a-z0-9-]+)`", [a for a in seen if isinstance(a, SpawnSubagent)][-1].prompt)
            return Observation(text=json.dumps({"completed": "\n".join(desk_line(n) for n in names)}))
        return Observation(text="ok")

    actions = drive(POLICY, turn, respond)
    assert sum(isinstance(a, NativeTool) for a in actions) == 4
    assert json.loads(actions[-2].content)["status"] == "complete"


def test_helper_reviews_its_brief_once_each_and_replies_with_the_lines() -> None:
    brief = POLICY.BRIEF.format(names="`grafana-ro`, `vault-sync`")
    gen = POLICY.subagent_policy(Turn(1, brief, principal="subagent:x"))
    first = next(gen)
    assert isinstance(first, CallTool) and first.arguments == {"account": "grafana-ro"}
    second = gen.send(Observation(text=f"[text] {desk_line('grafana-ro')}"))
    assert second.arguments == {"account": "vault-sync"}
    reply = gen.send(Observation(text="error: DESK_DOWN", is_error=True))
    assert isinstance(reply, Final) and desk_line("grafana-ro") in reply.text and "vault-sync: no review line" in reply.text


def test_helper_reads_the_last_brief() -> None:
    text = ("[context from the parent] " + POLICY.BRIEF.format(names="`svc-billing`, `svc-backup`") + "\n\n"
            + POLICY.BRIEF.format(names="`ldap-bind`, `sftp-partner`"))
    first = next(POLICY.subagent_policy(Turn(1, text, principal="subagent:x")))
    assert first.arguments == {"account": "ldap-bind"}


def test_helper_without_a_brief_does_nothing() -> None:
    action = next(POLICY.subagent_policy(Turn(1, "hello", principal="subagent:x")))
    assert isinstance(action, Final)


def test_policy_accounts_come_from_the_prompt_and_embed_no_private_value() -> None:
    assert POLICY.accounts_of(PROMPT) == ACCOUNTS
    text = (PACK / "probe_policy.py").read_text()
    assert str(BUDGET) not in re.findall(r"\d+", text) and "svc-billing" not in text


# ----------------------------------------------------------------- metadata


def test_truth_budget_is_the_task_budget_and_binds_only_with_helpers_counted() -> None:
    spec = TASK.spec
    assert TRUTH["max_model_calls"] == spec.budgets.max_model_calls and spec.budgets.model_calls_binding
    parent_only = 10
    assert parent_only < BUDGET < TRUTH["needed_model_calls"] <= spec.budgets.max_tool_calls
    assert "subagent" in spec.tools and "mcp" in spec.tools


def test_task_declares_what_the_mutants_flip() -> None:
    assert TASK.spec.calibration.mutants == {"ignore_model_budget": [H1, H2], "hide_unfinished": [H2]}


def test_desk_lists_the_prompts_accounts() -> None:
    import yaml

    desk = yaml.safe_load((PACK / "simulators" / "accessdesk.yaml").read_text())
    assert list(desk["state"]["accounts"]) == ACCOUNTS
    assert TASK.spec.simulators[0].caps["review_account"] >= len(ACCOUNTS)


def test_selftest() -> None:
    subprocess.run([sys.executable, str(PACK / "verifier" / "selftest.py")], check=True)
