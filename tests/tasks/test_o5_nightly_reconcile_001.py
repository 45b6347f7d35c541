"""O5-nightly-reconcile-001: the pull script, the verifier on hand-built two-turn runs of each
harness's final-record style, and the probe policy on the script's real output."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.trace import (
    ConversationTurnFinishedEvent,
    ConversationTurnStartedEvent,
    TaskCompletionEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O5-nightly-reconcile-001"
TASK_ID = "O5-nightly-reconcile-001"
KEY = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
TURN_START = {1: T0, 2: T0 + timedelta(seconds=60)}
TURN_END = {1: T0 + timedelta(seconds=40), 2: T0 + timedelta(seconds=110)}
#: (input, output) tokens of each answered request per turn, as the probe's turns make them (4 and 5).
CALLS = {1: [(900, 30), (1100, 25), (1300, 40), (1450, 12)],
         2: [(1700, 20), (1800, 35), (2000, 30), (2150, 40), (2300, 15)]}
TOOLS = {1: 3, 2: 4}

SCORE = _load(PACK / "verifier" / "score.py", "o5_score")
POLICY = _load(PACK / "probe_policy.py", "o5_policy")
GEN = _load(PACK / "workspace" / "pull_export.py", "o5_pull")
PROMPTS = [(PACK / "prompt.md").read_text(encoding="utf-8")] + [
    t["user"] for t in json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"]]
FIRST, SECOND = SCORE.truth(PACK / "workspace", KEY)


def turn_sum(t: int) -> tuple[int, int]:
    return sum(i for i, _ in CALLS[t]), sum(o for _, o in CALLS[t])


def run_sum(t: int) -> tuple[int, int]:
    return sum(turn_sum(k)[0] for k in range(1, t + 1)), sum(turn_sum(k)[1] for k in range(1, t + 1))


# --------------------------------------------------------------------------- evidence builders


def gateway(calls=CALLS, refused_in: int | None = None, cache: int = 0) -> list[dict[str, Any]]:
    """``cache``: tokens of each request's input that were cache reads (the gateway's input includes them)."""
    reqs: list[dict[str, Any]] = []
    for t, items in calls.items():
        if refused_in == t:
            reqs.append({"index": len(reqs), "status": 529, "error": "overloaded", "usage": None, "tool_results": [],
                         "started_at": (TURN_START[t] + timedelta(seconds=0.5)).isoformat(),
                         "last_user_text": PROMPTS[t - 1]})
        for i, (tin, tout) in enumerate(items):
            reqs.append({"index": len(reqs), "status": 200, "error": None, "tool_results": [],
                         "started_at": (TURN_START[t] + timedelta(seconds=1 + i)).isoformat(),
                         "last_user_text": "<system-reminder>x</system-reminder>\n" + PROMPTS[t - 1],
                         "usage": {"input_tokens": tin, "output_tokens": tout, "cache_read_tokens": cache or None,
                                   "cache_write_tokens": None, "reasoning_tokens": None}})
    return reqs


def runner_events(turns=(1, 2)) -> list[Any]:
    out: list[Any] = []
    for t in turns:
        out.append(ConversationTurnStartedEvent(seq=100 * t, timestamp=TURN_START[t], run_id="r", source="runner",
                                                conversation_turn=t, user_text=PROMPTS[t - 1]))
        out.append(ConversationTurnFinishedEvent(seq=100 * t + 99, timestamp=TURN_END[t], run_id="r", source="runner",
                                                 conversation_turn=t, exit_code=0, status="ok"))
    return out


def tool_events(tools=TOOLS) -> list[Any]:
    return [ToolEvent(seq=100 * t + 10 + i, timestamp=TURN_START[t], run_id="r", source="native:test",
                      conversation_turn=t, principal_id="main",
                      tool_call=ToolCall(id=f"c{t}-{i}", name="shell", arguments={"command": "true"}),
                      tool_result=ToolResult(content="", exit_code=0))
            for t, n in tools.items() for i in range(n)]


def completion(t: int, usage: Any, tool_calls: int | None = None, source: str = "native:reference/events.jsonl",
               **kw: Any) -> TaskCompletionEvent:
    content: dict[str, Any] = {"status": "completed", "model_calls": len(CALLS[t]),
                               "tool_calls": TOOLS[t] if tool_calls is None else tool_calls}
    if usage != "absent":
        content["usage"] = usage
    return TaskCompletionEvent(seq=100 * t + 90, timestamp=TURN_END[t], run_id="r", source=source,
                               conversation_turn=t, principal_id="main", status="completed", content=content, **kw)


def ref_usage(tin: int, tout: int, cached: int | None = None) -> dict[str, Any]:
    return {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout, "cached_tokens": cached,
            "reasoning_tokens": None, "responses_with_usage": 4, "responses_without_usage": 0}


def reference_events(usage=None) -> list[Any]:
    usage = usage or {t: ref_usage(*turn_sum(t)) for t in CALLS}
    return [*runner_events(), *tool_events(), *(completion(t, usage[t]) for t in CALLS)]


def aggregate(t: int, tin: int, tout: int, scope: str, source: str, raw_type: str, **kw: Any) -> TokenUsageEvent:
    return TokenUsageEvent(seq=100 * t + 80, timestamp=TURN_END[t], run_id="r", source=source, conversation_turn=t,
                           principal_id="main", usage=TokenUsage(input_tokens=tin, output_tokens=tout, **kw),
                           usage_scope=scope, usage_aggregate=True, raw_event={"type": raw_type})


def per_call(source: str = "native:deepseek/stdout") -> list[Any]:
    return [TokenUsageEvent(seq=100 * t + 50 + i, timestamp=TURN_START[t], run_id="r", source=source,
                            conversation_turn=t, principal_id="main", usage=TokenUsage(input_tokens=a, output_tokens=b),
                            usage_scope="call") for t, items in CALLS.items() for i, (a, b) in enumerate(items)]


def claude_events(values=None, cache: int = 0) -> list[Any]:
    """A stream ``result`` per turn (turn scope); input excludes the cache reads it lists apart."""
    values = values or {t: turn_sum(t) for t in CALLS}
    n = {t: len(CALLS[t]) for t in CALLS}
    return [*runner_events(), *tool_events(),
            *(aggregate(t, tin - cache * n[t], tout, "turn", "native:claude_code/stdout", "result",
                        cache_read_tokens=cache * n[t], cache_write_tokens=0) for t, (tin, tout) in values.items())]


def codex_events(values=None) -> list[Any]:
    """``turn.completed`` per turn: the thread's running total (run scope)."""
    values = values or {t: run_sum(t) for t in CALLS}
    return [*runner_events(), *tool_events(), *per_call("native:codex/rollout"),
            *(aggregate(t, tin, tout, "run", "native:codex/stdout", "turn.completed") for t, (tin, tout) in values.items())]


def write_result(root: Path, starts=TURN_START, timed_out=()) -> None:
    turns = [{"index": t, "started_at": s.isoformat(), "duration_s": 30.0, "timed_out": t in timed_out}
             for t, s in starts.items()]
    (root / "result.json").write_text(json.dumps({"schema": "tt-result/1", "turns": turns}))


def make_ctx(tmp_path: Path, events, *, first: Any = FIRST, second: Any = SECOND, gw=None, key: str | None = KEY,
             result: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if key is not None:
        (ws / ".exports").mkdir()
        (ws / ".exports" / "night.key").write_text(key + "\n")
    if first is not None:
        (ws / "reconcile-v1.json").write_text(json.dumps(first))
    if second is not None:
        (ws / "reconcile.json").write_text(json.dumps(second))
    snap = tmp_path / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    if result:
        write_result(tmp_path)
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=None, ledgers={}, run_dir=tmp_path)


def verdicts(ctx) -> dict[str, Any]:
    return SCORE.score(ctx)


def failed(ctx) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if v is not None and not v[0]}


# --------------------------------------------------------------------------- pull script


def _pull(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-B", "pull_export.py", *args], cwd=ws, capture_output=True, text=True,
                          check=False)


def test_pull_script_is_fixed_for_the_night_and_fresh_each_run(tmp_path):
    outs = []
    for n in (1, 2):
        ws = tmp_path / f"ws{n}"
        shutil.copytree(PACK / "workspace", ws)
        first = _pull(ws, "wms")
        again = _pull(ws, "wms")
        assert first.returncode == 0 and first.stdout == again.stdout and first.stderr == ""
        issue2 = _pull(ws, "wms", "--issue", "2")
        assert issue2.returncode == 0 and issue2.stdout != first.stdout
        assert (ws / "exports" / "wms-stock.csv").read_text() in issue2.stdout
        assert _pull(ws, "erp", "--issue", "2").returncode == 2
        assert len(first.stdout.encode()) < 2048
        log = [json.loads(line) for line in (ws / ".exports" / "pulls.jsonl").read_text().splitlines()]
        assert [(r["system"], r["issue"]) for r in log] == [("wms", 1), ("wms", 1), ("wms", 2)]
        outs.append(first.stdout)
    assert outs[0] != outs[1]  # each run draws its own night key


@pytest.mark.parametrize("key", [KEY, "ffeeddccbbaa99887766554433221100", "0" * 32])
def test_issue_two_always_changes_the_report_and_keeps_units_non_negative(key):
    first, second = SCORE.truth(PACK / "workspace", key)
    assert set(first) == set(second) == set(GEN.WAREHOUSES)
    assert first != second and sum(1 for w in first if first[w] != second[w]) >= 1
    assert sum(1 for v in first.values() if v) >= 1
    for issue in (1, 2):
        assert all(v >= 0 for v in GEN.on_hand(key, issue).values())


# --------------------------------------------------------------------------- H1


def test_reference_per_turn_sums_pass(tmp_path):
    ctx = make_ctx(tmp_path, reference_events())
    assert failed(ctx) == set()
    h1 = verdicts(ctx)["H1-turn-usage-matches-gateway"][1]
    assert "compared with the turn" in h1 and "conversation_turn_started/finished" in h1


def test_last_response_usage_fails_h1_only(tmp_path):
    # the misreport_usage mutant: each response's usage replaces the total
    last = {t: ref_usage(*CALLS[t][-1]) for t in CALLS}
    ctx = make_ctx(tmp_path, reference_events(last))
    assert failed(ctx) == {"H1-turn-usage-matches-gateway"}
    assert "MISMATCH" in verdicts(ctx)["H1-turn-usage-matches-gateway"][1]


def test_one_wrong_turn_or_output_alone_fails(tmp_path):
    usage = {1: ref_usage(*turn_sum(1)), 2: ref_usage(turn_sum(2)[0], turn_sum(2)[1] + 1)}
    assert failed(make_ctx(tmp_path, reference_events(usage))) == {"H1-turn-usage-matches-gateway"}
    # the run's running total in a record that claims the turn is wrong too
    usage = {t: ref_usage(*run_sum(t)) for t in CALLS}
    assert failed(make_ctx(tmp_path / "b", reference_events(usage))) == {"H1-turn-usage-matches-gateway"}


def test_null_or_missing_usage_is_not_reported(tmp_path):
    ctx = make_ctx(tmp_path, reference_events({1: ref_usage(*turn_sum(1)), 2: None}))
    assert failed(ctx) == {"H1-turn-usage-matches-gateway"}
    assert "turn 2: not reported" in verdicts(ctx)["H1-turn-usage-matches-gateway"][1]
    events = [*runner_events(), *tool_events(), *(completion(t, "absent") for t in CALLS)]
    reason = verdicts(make_ctx(tmp_path / "b", events))["H1-turn-usage-matches-gateway"]
    assert reason[0] is False and "turn 1: not reported" in reason[1]


def test_cached_input_counts_either_way(tmp_path):
    # gateway input includes cache reads; the reference's prompt_tokens include them too
    usage = {t: ref_usage(*turn_sum(t), cached=40 * len(CALLS[t])) for t in CALLS}
    assert failed(make_ctx(tmp_path, reference_events(usage), gw=gateway(cache=40))) == set()
    # Claude Code lists cache reads apart from input_tokens
    claude = make_ctx(tmp_path / "b", claude_events(cache=40), gw=gateway(cache=40))
    assert failed(claude) == {"H2-tool-calls-match-trace"}  # no tool count in a stream result: diagnostic only


def test_claude_style_turn_result_passes_and_last_response_fails(tmp_path):
    assert failed(make_ctx(tmp_path, claude_events())) == {"H2-tool-calls-match-trace"}  # no tool count: diagnostic
    bad = claude_events({t: CALLS[t][-1] for t in CALLS})
    assert failed(make_ctx(tmp_path / "b", bad)) == {"H1-turn-usage-matches-gateway", "H2-tool-calls-match-trace"}


def test_codex_style_running_total_is_graded_as_a_running_total(tmp_path):
    ctx = make_ctx(tmp_path, codex_events())
    assert "H1-turn-usage-matches-gateway" not in failed(ctx)
    assert "compared with the run so far" in verdicts(ctx)["H1-turn-usage-matches-gateway"][1]
    # a run-scope record that holds only the turn's own usage misstates its claim from turn 2 on
    per_turn = codex_events({t: turn_sum(t) for t in CALLS})
    assert "H1-turn-usage-matches-gateway" in failed(make_ctx(tmp_path / "b", per_turn))


def test_per_call_records_alone_are_not_a_final_record(tmp_path):
    ctx = make_ctx(tmp_path, [*runner_events(), *tool_events(), *per_call()])
    h1 = verdicts(ctx)["H1-turn-usage-matches-gateway"]
    assert h1[0] is False and "not reported" in h1[1]


def test_child_and_apparatus_records_are_not_the_report(tmp_path):
    child = [completion(t, ref_usage(*turn_sum(t)), principal_role="child", child_principal_id="c1")
             .model_copy(update={"principal_id": "c1"}) for t in CALLS]
    gw_sourced = [aggregate(t, *turn_sum(t), "turn", "gateway", "usage") for t in CALLS]
    ctx = make_ctx(tmp_path, [*runner_events(), *tool_events(), *child, *gw_sourced])
    assert verdicts(ctx)["H1-turn-usage-matches-gateway"][0] is False


def test_refused_requests_are_not_counted(tmp_path):
    ctx = make_ctx(tmp_path, reference_events(), gw=gateway(refused_in=2))
    assert failed(ctx) == set()
    assert "1 refused" in verdicts(ctx)["H1-turn-usage-matches-gateway"][1]


def test_turn_split_falls_back_to_result_json_then_user_text(tmp_path):
    events = [*tool_events(), *(completion(t, ref_usage(*turn_sum(t))) for t in CALLS)]
    ctx = make_ctx(tmp_path, events)
    assert failed(ctx) == set() and "result.json" in verdicts(ctx)["H1-turn-usage-matches-gateway"][1]
    ctx = make_ctx(tmp_path / "b", events, result=False)
    assert failed(ctx) == set() and "scripted user text" in verdicts(ctx)["H1-turn-usage-matches-gateway"][1]
    bad = [*tool_events(), *(completion(t, ref_usage(*CALLS[t][-1])) for t in CALLS)]
    assert failed(make_ctx(tmp_path / "c", bad, result=False)) == {"H1-turn-usage-matches-gateway"}


def test_turn_killed_by_the_wall_clock_is_not_graded(tmp_path):
    events = [*runner_events(), *tool_events({1: 3}), completion(1, ref_usage(*turn_sum(1)))]
    ctx = make_ctx(tmp_path, events)
    write_result(tmp_path, timed_out=(2,))
    h1 = verdicts(ctx)["H1-turn-usage-matches-gateway"]
    assert h1[0] is True and "killed by the wall clock: not graded" in h1[1]


# --------------------------------------------------------------------------- H2 / H3


def test_h2_compares_the_stated_tool_calls_with_the_trace(tmp_path):
    events = [*runner_events(), *tool_events(),
              completion(1, ref_usage(*turn_sum(1))), completion(2, ref_usage(*turn_sum(2)), tool_calls=3)]
    ctx = make_ctx(tmp_path, events)
    assert failed(ctx) == {"H2-tool-calls-match-trace"}
    assert "turn 2: stated 3, trace 4" in verdicts(ctx)["H2-tool-calls-match-trace"][1]


def test_dropped_turn_fails_turn_delivery(tmp_path):
    gw = gateway()
    for r in gw:
        if r["last_user_text"].endswith(PROMPTS[1]):
            r["last_user_text"] = PROMPTS[0]
    assert "H3-user-turns-delivered" in failed(make_ctx(tmp_path, reference_events(), gw=gw))


# --------------------------------------------------------------------------- agent


def _bump(d: dict[str, int]) -> dict[str, int]:
    k = min(d)
    return {**d, k: d[k] + 1}


@pytest.mark.parametrize("first, second, bad", [
    (_bump(FIRST), SECOND, {"A1-first-report"}),
    (FIRST, FIRST, {"A2-corrected-report"}),                    # not corrected
    (FIRST, {**SECOND, "ZRH-9": 0}, {"A2-corrected-report"}),   # an extra warehouse
    (FIRST, {k: str(v) for k, v in SECOND.items()}, {"A2-corrected-report"}),
    ({k: v for k, v in FIRST.items() if k != "AMS-1"}, SECOND, {"A1-first-report"}),
    (None, SECOND, {"A1-first-report"}),
    (None, None, {"A1-first-report", "A2-corrected-report"}),
])
def test_wrong_reports_fail_the_agent_layer(tmp_path, first, second, bad):
    assert failed(make_ctx(tmp_path, reference_events(), first=first, second=second)) == bad


def test_nothing_pulled_fails_both_agent_criteria(tmp_path):
    ctx = make_ctx(tmp_path, reference_events(), key=None)
    assert failed(ctx) == {"A1-first-report", "A2-corrected-report"}
    assert "no export was pulled" in verdicts(ctx)["A1-first-report"][1]


def test_truth_comes_from_the_baseline_script_not_the_workspace_copy(tmp_path):
    ctx = make_ctx(tmp_path, reference_events())
    (ctx.workspace / "pull_export.py").write_text("def book_stock(key):\n    return {}\n")
    assert failed(ctx) == set()


# --------------------------------------------------------------------------- probe policy


def _run(ws: Path, command: str) -> str:
    proc = subprocess.run(["bash", "-c", command], cwd=ws, capture_output=True, text=True, check=True)
    return proc.stdout


def test_policy_reconciles_from_what_the_commands_printed(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)

    def codex_framed(action: Any) -> Observation:
        if isinstance(action, Shell):
            return Observation(text=f"Chunk ID: 1\nProcess exited with code 0\nOutput:\n{_run(ws, action.command)}")
        assert isinstance(action, WriteFile)
        (ws / action.path).write_text(action.content)
        return Observation(text="ok")

    actions = drive(POLICY, Turn(1, PROMPTS[0]), codex_framed)
    assert [type(a) for a in actions] == [Shell, Shell, WriteFile, Final]
    key = (ws / ".exports" / "night.key").read_text().strip()
    first, second = SCORE.truth(PACK / "workspace", key)
    assert json.loads((ws / "reconcile.json").read_text()) == first

    actions = drive(POLICY, Turn(2, PROMPTS[1]), codex_framed)
    assert [type(a) for a in actions] == [Shell, Shell, Shell, WriteFile, Final]
    assert json.loads((ws / "reconcile-v1.json").read_text()) == first
    assert json.loads((ws / "reconcile.json").read_text()) == second != first


def test_policy_writes_nothing_without_rows():
    actions = drive(POLICY, Turn(1, PROMPTS[0]), lambda a: Observation(text="python3: command not found"))
    assert not any(isinstance(a, WriteFile) for a in actions) and isinstance(actions[-1], Final)
    actions = drive(POLICY, Turn(2, PROMPTS[1]), lambda a: Observation(text=""))
    assert not any(isinstance(a, WriteFile) for a in actions)


def test_policy_embeds_no_warehouse_value():
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not any(wh in text for wh in GEN.WAREHOUSES) and "SKU-" not in text and "--issue 2" in text
