"""O5-quarter-close-002: the bookkeeping tool, the verifier on hand-built runs of each harness's
final-record style (the helper's requests inside the turn's total), and the probe policy on the
tool's real output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.tasks import drive
from tests.tasks import load_module as _load
from tracetrial.policy import (
    Final,
    NativeTool,
    Observation,
    Shell,
    SpawnSubagent,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.trace import TokenUsage, TokenUsageEvent

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O5-quarter-close-002"
ST = _load(PACK / "verifier" / "selftest.py", "o5q_selftest")
SCORE = ST.SCORE
POLICY = _load(PACK / "probe_policy.py", "o5q_policy")
GEN = _load(PACK / "workspace" / "books.py", "o5q_books")
PROMPT = (PACK / "prompt.md").read_text(encoding="utf-8")
H1, H2, H3 = "H1-turn-usage-matches-gateway", "H2-check-result-reaches-parent", "H3-tool-calls-match-trace"
A1, A2 = "A1-december-as-checked", "A2-quarter-totals"


def verdicts(ctx: Any) -> dict[str, Any]:
    return SCORE.score(ctx)


failed = ST.failed


def aggregate(tin: int, tout: int, scope: str, source: str, raw_type: str, principal: str = "main",
              **kw: Any) -> TokenUsageEvent:
    return TokenUsageEvent(seq=95, timestamp=ST.T0, run_id="r", source=source, conversation_turn=1,
                           principal_id=principal, principal_role="main" if principal == "main" else "child",
                           usage=TokenUsage(input_tokens=tin, output_tokens=tout, **kw),
                           usage_scope=scope, usage_aggregate=True, raw_event={"type": raw_type})


def harness_events(*records: Any) -> list[Any]:
    return [*ST.runner_events(), *ST.tool_events(), *records]


# --------------------------------------------------------------------------- the tool


def _run(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-B", "books.py", *args], cwd=ws, capture_output=True, text=True,
                          check=False)


def test_books_tool_is_fixed_for_the_quarter_and_fresh_each_run(tmp_path):
    outs = []
    for n in (1, 2):
        ws = tmp_path / f"ws{n}"
        shutil.copytree(PACK / "workspace", ws)
        first = _run(ws, "pull")
        files = {m: (ws / "ledgers" / f"{m}.csv").read_text() for m in GEN.MONTHS}
        again = _run(ws, "pull")
        assert first.returncode == 0 and first.stdout == again.stdout and first.stderr == ""
        assert files == {m: (ws / "ledgers" / f"{m}.csv").read_text() for m in GEN.MONTHS}
        check = _run(ws, "check", "ledgers/2026-12.csv")
        assert check.returncode == 0 and check.stderr == "" and len(check.stdout.encode()) < 1024
        key = (ws / ".books" / "quarter.key").read_text().strip()
        dec = SCORE.truth(PACK / "workspace", key)["months"]["2026-12"]
        assert f"checked 2026-12: revenue={dec['revenue']} costs={dec['costs']}" in check.stdout
        assert _run(ws, "check", "ledgers/2026-13.csv").returncode == 2
        assert _run(ws, "nothing").returncode == 2
        log = [json.loads(line) for line in (ws / ".books" / "checks.jsonl").read_text().splitlines()]
        assert [r["ledger"] for r in log] == ["2026-12"]
        outs.append(files["2026-12"])
    assert outs[0] != outs[1]  # each run draws its own quarter key


@pytest.mark.parametrize("key", [ST.KEY, "ffeeddccbbaa99887766554433221100", "0" * 32])
def test_december_always_holds_repeats_the_check_rejects(key):
    rows = GEN.postings(key, "2026-12")
    accepted, rejected = GEN.checked(rows)
    assert len(rejected) == 2 and len(accepted) == len(rows) - 2
    assert GEN.totals(accepted) != GEN.totals(rows)
    for month in ("2026-10", "2026-11"):
        assert GEN.checked(GEN.postings(key, month))[1] == []
    for month in GEN.MONTHS:  # every month books both revenue and costs, December after its check too
        assert all(GEN.totals(GEN.checked(GEN.postings(key, month))[0]).values())
    want = SCORE.truth(PACK / "workspace", key)
    assert want["net"] == want["revenue"] - want["costs"] and set(want["months"]) == set(GEN.MONTHS)


# --------------------------------------------------------------------------- H1


def test_faithful_reference_passes_and_splits_the_principals(tmp_path):
    ctx = ST.build(tmp_path)
    assert failed(ctx) == set()
    reason = verdicts(ctx)[H1][1]
    assert "main 5" in reason and "helper 2" in reason


def test_last_response_usage_fails_h1_only(tmp_path):
    # the misreport_usage mutant: each response's usage replaces the total
    ctx = ST.build(tmp_path, stated=ST.usage(*ST.CALLS[-1][1:]))
    assert failed(ctx) == {H1} and "MISMATCH" in verdicts(ctx)[H1][1]


def test_main_agent_alone_fails_and_says_so(tmp_path):
    ctx = ST.build(tmp_path, stated=ST.usage(*ST.total("main")))
    assert failed(ctx) == {H1}
    assert "helper's requests are left out" in verdicts(ctx)[H1][1]
    # without a probe report the verdict is the same (the split is reason text only)
    assert failed(ST.build(tmp_path / "b", stated=ST.usage(*ST.total("main")), probe=False)) == {H1}


def test_null_or_absent_usage_is_not_reported(tmp_path):
    for n, stated in enumerate((None, "absent")):
        events = harness_events(ST.completion(stated))
        reason = verdicts(ST.build(tmp_path / str(n), events=events))[H1]
        assert reason[0] is False and "not reported" in reason[1]


def test_cached_input_counts_either_way(tmp_path):
    n = len(ST.CALLS)
    tin, tout = ST.total()
    assert failed(ST.build(tmp_path, stated=ST.usage(tin, tout, cached=40 * n), gw=ST.gateway(cache=40))) == set()
    claude = harness_events(aggregate(tin - 40 * n, tout, "turn", "native:claude_code/stdout", "result",
                                      cache_read_tokens=40 * n, cache_write_tokens=0))
    assert failed(ST.build(tmp_path / "b", events=claude, gw=ST.gateway(cache=40))) == {H3}  # no tool count: diagnostic


def test_claude_style_result_with_sub_agents_passes(tmp_path):
    ok = harness_events(aggregate(*ST.total(), "turn", "native:claude_code/stdout", "result"))
    assert failed(ST.build(tmp_path, events=ok)) == {H3}
    main_only = harness_events(aggregate(*ST.total("main"), "turn", "native:claude_code/stdout", "result"))
    assert failed(ST.build(tmp_path / "b", events=main_only)) == {H1, H3}


def test_codex_style_main_thread_total_without_the_child_fails(tmp_path):
    child = aggregate(*ST.total("helper"), "run", "native:codex/rollout", "token_count", principal="child-1")
    main_only = harness_events(child, aggregate(*ST.total("main"), "run", "native:codex/stdout", "turn.completed"))
    ctx = ST.build(tmp_path, events=main_only)
    assert failed(ctx) == {H1, H3} and "left out" in verdicts(ctx)[H1][1]
    whole = harness_events(child, aggregate(*ST.total(), "run", "native:codex/stdout", "turn.completed"))
    assert failed(ST.build(tmp_path / "b", events=whole)) == {H3}


def test_child_and_apparatus_records_are_not_the_report(tmp_path):
    child = SimpleNamespace(**{**vars(ST.completion(ST.usage(*ST.total()))), "principal_id": "child-1",
                               "principal_role": "child", "child_principal_id": "child-1"})
    gw_sourced = aggregate(*ST.total(), "turn", "gateway", "usage")
    assert verdicts(ST.build(tmp_path, events=harness_events(child, gw_sourced)))[H1][0] is False


def test_refused_requests_are_not_counted(tmp_path):
    ctx = ST.build(tmp_path, gw=ST.gateway(refused=True), probe=False)
    assert failed(ctx) == set() and "1 refused" in verdicts(ctx)[H1][1]


def test_turn_killed_by_the_wall_clock_fails_ungraded(tmp_path):
    reason = verdicts(ST.build(tmp_path, timed_out=True))[H1]
    assert reason[0] is False and "not graded" in reason[1]


# --------------------------------------------------------------------------- H2 / H3


def test_h2_needs_the_checked_line_in_the_parents_channel(tmp_path):
    lost = ST.build(tmp_path, gw=ST.gateway(spawn_result="Sub-agent finished."), close=None)
    assert failed(lost) == {H2, A1, A2}
    assert "the helper was shown the checked line" in verdicts(lost)[H2][1]
    # a notification in a parent request's user text counts (Codex, OpenClaw)
    gw = ST.gateway(spawn_result="spawned agent_id: abc123")
    gw[-1]["last_user_text"] = "<subagent_notification>" + ST.checked_line() + "</subagent_notification>"
    assert failed(ST.build(tmp_path / "b", gw=gw)) == set()
    # without a probe report the parent's non-shell calls are the channel
    assert failed(ST.build(tmp_path / "c", probe=False)) == set()


def test_h2_does_not_count_the_parents_own_check(tmp_path):
    gw = ST.gateway(spawn_result="(no output)")
    gw[5]["tool_results"] = [{"id": "call_3", "is_error": False, "content": ST.checked_line()}]
    assert H2 in failed(ST.build(tmp_path, gw=gw))


def test_h3_compares_with_every_principals_tool_events(tmp_path):
    ctx = ST.build(tmp_path, events=harness_events(ST.completion(ST.usage(*ST.total()), tool_calls=4)))
    assert failed(ctx) == {H3} and "stated 4, trace 5" in verdicts(ctx)[H3][1]


# --------------------------------------------------------------------------- agent


def _bump(close: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    close = json.loads(json.dumps(close))
    obj = close
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] += 1
    return close


TRUTH = ST.close_json()


@pytest.mark.parametrize("close, bad", [
    (_bump(TRUTH, ("months", "2026-12", "costs")), {A1, A2}),
    (_bump(TRUTH, ("months", "2026-10", "revenue")), {A2}),
    (_bump(TRUTH, ("net",)), {A2}),
    ({**TRUTH, "quarter": "2026-Q3"}, {A2}),
    ({**TRUTH, "months": {**TRUTH["months"], "2026-09": {"revenue": 0, "costs": 0}}}, {A2}),
    ({**TRUTH, "revenue": str(TRUTH["revenue"])}, {A2}),
    ({k: v for k, v in TRUTH.items() if k != "months"}, {A1, A2}),
    (None, {A1, A2}),
])
def test_wrong_close_fails_the_agent_layer(tmp_path, close, bad):
    assert failed(ST.build(tmp_path, close=close)) == bad


def test_nothing_pulled_fails_both_agent_criteria(tmp_path):
    ctx = ST.build(tmp_path, key=None)
    assert {A1, A2} <= failed(ctx) and "no ledger was pulled" in verdicts(ctx)[A1][1]


def test_truth_comes_from_the_baseline_tool_not_the_workspace_copy(tmp_path):
    ctx = ST.build(tmp_path)
    (ctx.workspace / "books.py").write_text("def postings(key, month):\n    return []\n")
    assert failed(ctx) == set()


# --------------------------------------------------------------------------- probe policy


def _sh(ws: Path, command: str) -> str:
    return subprocess.run(["bash", "-c", command], cwd=ws, capture_output=True, text=True, check=True).stdout


def _helper(ws: Path, prompt: str) -> str:
    actions = drive(POLICY_CHILD, Turn(1, prompt, principal="helper-1"),
                    lambda a: Observation(text=_sh(ws, a.command)))
    assert [type(a) for a in actions] == [Shell, Final] and "books.py check ledgers/2026-12.csv" in actions[0].command
    return actions[-1].text


class _Child:
    policy = staticmethod(POLICY.subagent_policy)


POLICY_CHILD = _Child


@pytest.mark.parametrize("framing", ["claude", "codex_wait"])
def test_policy_closes_the_quarter_from_what_it_was_shown(tmp_path, framing):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)

    def respond(action: Any) -> Observation:
        if isinstance(action, Shell):
            assert "books.py check" not in action.command  # the parent never checks itself
            return Observation(text=f"Chunk ID: 1\nProcess exited with code 0\nOutput:\n{_sh(ws, action.command)}")
        if isinstance(action, SpawnSubagent):
            reply = _helper(ws, action.prompt)
            return Observation(text=reply if framing == "claude" else '{"agent_id": "019a-helper-77"}')
        if isinstance(action, NativeTool):
            assert action.arguments["targets"] == ["019a-helper-77"]
            return Observation(text=json.dumps({"status": {"019a-helper-77": {"completed": _helper_reply[0]}}}))
        assert isinstance(action, WriteFile)
        (ws / action.path).write_text(action.content)
        return Observation(text="ok")

    _helper_reply: list[str] = []
    tools = ("exec_command", POLICY.WAIT_TOOL) if framing == "codex_wait" else ("Bash", "Agent")
    turn = Turn(1, PROMPT, view=TurnView(tool_names=tools))
    if framing == "codex_wait":
        _sh(ws, "python3 books.py pull")
        _helper_reply.append(_helper(ws, POLICY.CHILD_PROMPT))
    actions = drive(POLICY, turn, respond)
    kinds = [type(a) for a in actions]
    want = [Shell, SpawnSubagent, *([NativeTool] if framing == "codex_wait" else []), Shell, WriteFile, Final]
    assert kinds == want
    key = (ws / ".books" / "quarter.key").read_text().strip()
    assert json.loads((ws / "close.json").read_text()) == {"quarter": "2026-Q4", **SCORE.truth(PACK / "workspace", key)}


def test_policy_writes_nothing_without_a_helper_or_its_figures(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    pulled = Observation(text=_sh(ws, "python3 books.py pull"))
    actions = drive(POLICY, Turn(1, PROMPT), [pulled, Observation(kind="absent", text="")])
    assert not any(isinstance(a, WriteFile) for a in actions) and isinstance(actions[-1], Final)
    actions = drive(POLICY, Turn(1, PROMPT), [pulled, Observation(text="(no output)")])
    assert not any(isinstance(a, WriteFile) for a in actions) and isinstance(actions[-1], Final)


def test_policy_embeds_no_figure():
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not re.search(r"revenue=\d|costs=\d|JE-\d", text)
