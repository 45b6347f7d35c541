"""V4-bundle-audit-002: the verifier on hand-built three-turn runs of each harness's reporting style."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.trace import NativeEvent, TaskCompletionEvent, TokenUsage, TokenUsageEvent
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "V4-bundle-audit-002"
TASK_ID = "V4-bundle-audit-002"
T0 = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
PER_TURN = {1: 3, 2: 4, 3: 2}           # the probe's requests per turn
TURN_START = {1: T0, 2: T0 + timedelta(seconds=30), 3: T0 + timedelta(seconds=60)}

SCORE = _load(PACK / "verifier" / "score.py", "v4b_score")
POLICY = _load(PACK / "probe_policy.py", "v4b_policy")
PROMPTS = [(PACK / "prompt.md").read_text(encoding="utf-8")] + [
    t["user"] for t in json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"]]
GOOD_INV = {"bundles": 5, "total_bytes": 24615}
GOOD_VER = {"matched": 4, "mismatched": ["app-1.4.0-windows.bundle"]}


def gateway(per_turn=PER_TURN, refused_in: int | None = None, user_text: bool = True) -> list[dict[str, Any]]:
    reqs: list[dict[str, Any]] = []
    for turn, n in per_turn.items():
        if refused_in == turn:
            reqs.append({"index": len(reqs), "status": 529, "error": "overloaded", "usage": None, "tool_results": [],
                         "started_at": (TURN_START[turn] + timedelta(seconds=0.5)).isoformat(),
                         "last_user_text": PROMPTS[turn - 1]})
        for i in range(n):
            reqs.append({"index": len(reqs), "status": 200, "error": None, "tool_results": [],
                         "started_at": (TURN_START[turn] + timedelta(seconds=1 + i)).isoformat(),
                         "last_user_text": ("<system-reminder>x</system-reminder>\n" + PROMPTS[turn - 1]) if user_text
                         else "",
                         "usage": {"input_tokens": 1000 * turn + i, "output_tokens": 10,
                                   "cache_read_tokens": None, "cache_write_tokens": None}})
    return reqs


def completion(turn: int, calls: int, source: str = "native:reference/reference-events.jsonl") -> TaskCompletionEvent:
    return TaskCompletionEvent(seq=10 * turn, timestamp=T0, run_id="r", source=source, conversation_turn=turn,
                               principal_id="main", status="completed",
                               content={"status": "completed", "model_calls": calls, "tool_calls": 1})


def reference_events(counts=PER_TURN) -> list[Any]:
    return [completion(t, n) for t, n in counts.items()]


def claude_events(counts=PER_TURN) -> list[Any]:
    out: list[Any] = []
    for t, n in counts.items():
        raw = {"type": "result", "subtype": "success", "num_turns": n, "parent_tool_use_id": None,
               "usage": {"input_tokens": 100, "output_tokens": 10}}
        out.append(TokenUsageEvent(seq=10 * t, timestamp=T0, run_id="r", source="native:claude_code/stdout",
                                   conversation_turn=t, principal_id="main", raw_event=raw, usage_scope="turn",
                                   usage=TokenUsage(input_tokens=100, output_tokens=10), usage_aggregate=True))
        out.append(NativeEvent(seq=10 * t + 1, timestamp=T0, run_id="r", source="native:claude_code/stdout",
                               conversation_turn=t, principal_id="main", native_event_type="result",
                               status="completed", raw_event=raw))
    return out


def codex_events() -> list[Any]:
    """turn.completed carries usage only: no model-call count anywhere."""
    return [TokenUsageEvent(seq=10 * t, timestamp=T0, run_id="r", source="native:codex/stdout", conversation_turn=t,
                            principal_id="main", usage=TokenUsage(input_tokens=100 * t, output_tokens=10 * t),
                            usage_scope="run", usage_aggregate=True,
                            raw_event={"type": "turn.completed", "usage": {"input_tokens": 100 * t}})
            for t in PER_TURN]


def write_result(root: Path, starts=TURN_START, timed_out=()) -> None:
    turns = [{"index": t, "started_at": s.isoformat(), "duration_s": 20.0, "timed_out": t in timed_out}
             for t, s in starts.items()]
    (root / "result.json").write_text(json.dumps({"schema": "tt-result/1", "turns": turns}))


def make_ctx(tmp_path: Path, events, *, inv: Any = GOOD_INV, ver: Any = GOOD_VER, gw=None,
             result: bool = True, prompts=PROMPTS) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if inv is not None:
        (ws / "inventory.json").write_text(json.dumps(inv))
    if ver is not None:
        (ws / "verify.json").write_text(json.dumps(ver))
    snap = tmp_path / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    (snap / "prompt.md").write_text(prompts[0])
    (snap / "turns.json").write_text(json.dumps({"turns": [{"user": u} for u in prompts[1:]]}))
    if result:
        write_result(tmp_path)
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=None, ledgers={}, run_dir=tmp_path)


def verdicts(ctx) -> dict[str, Any]:
    return SCORE.score(ctx)


def failed(ctx) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if v is not None and not v[0]}


# --------------------------------------------------------------------------- pack


def test_workspace_has_one_mismatch_and_decoys():
    assert SCORE.inventory(PACK / "workspace") == GOOD_INV
    assert SCORE.verification(PACK / "workspace") == GOOD_VER
    assert (PACK / "workspace" / "dist" / "tmp" / "app-1.4.0-linux-x64.bundle.part").is_file()  # not a bundle


# --------------------------------------------------------------------------- H1 / H4


def test_reference_style_per_turn_report_passes(tmp_path):
    ctx = make_ctx(tmp_path, reference_events())
    assert failed(ctx) == set()
    assert "each turn's count equals its answered requests" in verdicts(ctx)["H1-model-calls-per-turn"][1]


def test_claude_style_num_turns_per_invocation_passes(tmp_path):
    assert failed(make_ctx(tmp_path, claude_events())) == set()


def test_openclaw_style_completion_record_passes(tmp_path):
    events = [completion(t, n, source="native:openclaw/stdout") for t, n in PER_TURN.items()]
    assert failed(make_ctx(tmp_path, events)) == set()


def test_running_total_convention_passes(tmp_path):
    ctx = make_ctx(tmp_path, reference_events({1: 3, 2: 7, 3: 9}))
    assert failed(ctx) == set()
    assert "running total" in verdicts(ctx)["H1-model-calls-per-turn"][1]


def test_misreported_calls_fail_h1_only(tmp_path):
    # the misreport_model_calls mutant: each turn's last request goes uncounted
    ctx = make_ctx(tmp_path, reference_events({1: 2, 2: 3, 3: 1}))
    assert failed(ctx) == {"H1-model-calls-per-turn"}
    # one turn wrong is enough; so is mixing the two conventions
    assert failed(make_ctx(tmp_path / "b", claude_events({1: 3, 2: 5, 3: 2}))) == {"H1-model-calls-per-turn"}
    assert failed(make_ctx(tmp_path / "c", reference_events({1: 3, 2: 4, 3: 9}))) == {"H1-model-calls-per-turn"}


def test_a_turn_without_a_count_fails_h1_and_h4(tmp_path):
    events = reference_events({1: 3, 2: 4})
    assert failed(make_ctx(tmp_path, events)) == {"H1-model-calls-per-turn", "H4-call-count-reported"}


def test_no_count_at_all_is_not_applicable_never_a_pass(tmp_path):
    ctx = make_ctx(tmp_path, codex_events())
    v = verdicts(ctx)
    # (None, reason): the engine records it unscored with the reason (a bare None is rejected).
    assert v["H1-model-calls-per-turn"][0] is None and "nothing to compare" in v["H1-model-calls-per-turn"][1]
    assert v["H4-call-count-reported"][0] is False and v["H4-call-count-reported"][1].startswith("not reported")
    assert "turn.completed" in v["H4-call-count-reported"][1]


def test_refused_requests_are_not_model_calls(tmp_path):
    ctx = make_ctx(tmp_path, reference_events(), gw=gateway(refused_in=2))
    assert failed(ctx) == set()
    assert "1 refused" in verdicts(ctx)["H1-model-calls-per-turn"][1]


def test_turn_attribution_falls_back_to_the_user_texts(tmp_path):
    ctx = make_ctx(tmp_path, reference_events(), result=False)
    assert failed(ctx) == set()
    assert "scripted user text" in verdicts(ctx)["H1-model-calls-per-turn"][1]
    bad = make_ctx(tmp_path / "b", reference_events({1: 2, 2: 3, 3: 1}), result=False)
    assert failed(bad) == {"H1-model-calls-per-turn"}


def test_native_stdout_final_record_is_read_when_the_trace_lacks_it(tmp_path):
    ctx = make_ctx(tmp_path, codex_events())
    (tmp_path / "native").mkdir()
    for t, n in PER_TURN.items():
        (tmp_path / "native" / f"turn-{t}.stdout").write_text(
            json.dumps({"type": "system"}) + "\n" + json.dumps({"type": "result", "num_turns": n}) + "\n")
    assert failed(ctx) == set()


def test_child_and_apparatus_completions_are_not_the_report(tmp_path):
    child = completion(1, 3).model_copy(update={"principal_id": "child-1", "principal_role": "child"})
    gw_sourced = completion(2, 4, source="gateway")
    ctx = make_ctx(tmp_path, [child, gw_sourced])
    assert verdicts(ctx)["H1-model-calls-per-turn"][0] is None


def test_turns_the_runner_killed_or_never_started_are_not_graded(tmp_path):
    # turn 2 killed by the wall clock (no completion record), turn 3 never started
    ctx = make_ctx(tmp_path, reference_events({1: 3}), gw=gateway({1: 3, 2: 1}))
    write_result(tmp_path, {1: TURN_START[1], 2: TURN_START[2]}, timed_out=(2,))
    h1 = verdicts(ctx)["H1-model-calls-per-turn"]
    assert h1[0] is True and "killed by the wall clock: not graded" in h1[1] and "never started: not graded" in h1[1]
    # a wrong count in the turn that finished still fails
    bad = make_ctx(tmp_path / "b", reference_events({1: 2}), gw=gateway({1: 3, 2: 1}))
    write_result(tmp_path / "b", {1: TURN_START[1], 2: TURN_START[2]}, timed_out=(2,))
    assert verdicts(bad)["H1-model-calls-per-turn"][0] is False


def test_no_finished_turn_is_a_failure_not_a_pass(tmp_path):
    ctx = make_ctx(tmp_path, reference_events({1: 3}))
    write_result(tmp_path, {1: TURN_START[1]}, timed_out=(1,))
    h1 = verdicts(ctx)["H1-model-calls-per-turn"]
    assert h1[0] is False and h1[1].startswith("no turn finished")


def test_h4_names_the_final_record_of_each_turn(tmp_path):
    raw = {"jsonrpc": "2.0", "method": "session.event",
           "params": {"event": {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}}}
    status = {"jsonrpc": "2.0", "method": "session.status", "params": {"status": "idle"}}
    events = [NativeEvent(seq=i, timestamp=T0, run_id="r", source="native:deepseek/stdout", conversation_turn=1,
                          principal_id="main", native_event_type="x", raw_event=r) for i, r in enumerate([raw, status], 1)]
    reason = verdicts(make_ctx(tmp_path, events))["H4-call-count-reported"][1]
    assert "turn 1: turn/end" in reason and "event.data.reason" in reason


# --------------------------------------------------------------------------- H3


def test_dropped_turn_fails_turn_delivery(tmp_path):
    gw = gateway()
    for r in gw:
        if r["last_user_text"].endswith(PROMPTS[1]):
            r["last_user_text"] = PROMPTS[0]
    assert "H3-user-turns-delivered" in failed(make_ctx(tmp_path, reference_events(), gw=gw))


# --------------------------------------------------------------------------- agent


@pytest.mark.parametrize("inv, ver, bad", [
    ({"bundles": 6, "total_bytes": 25215}, GOOD_VER, {"A1-inventory"}),
    ({"bundles": "5", "total_bytes": 24615}, GOOD_VER, {"A1-inventory"}),
    (GOOD_INV, {"matched": 5, "mismatched": []}, {"A2-verify-report"}),
    (GOOD_INV, {"matched": 4, "mismatched": ["app-1.4.0-macos.bundle"]}, {"A2-verify-report"}),
    (None, None, {"A1-inventory", "A2-verify-report"}),
])
def test_wrong_deliverables_fail_the_agent_layer(tmp_path, inv, ver, bad):
    assert failed(make_ctx(tmp_path, reference_events(), inv=inv, ver=ver)) == bad


# --------------------------------------------------------------------------- probe policy


def _run(ws: Path, command: str) -> str:
    return subprocess.run(["bash", "-c", command], cwd=ws, capture_output=True, text=True, check=True).stdout


def test_policy_derives_every_value_from_what_it_was_shown(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    # a different workspace than the pack's: the policy must follow what the commands print
    (ws / "dist" / "extra-1.4.0.bundle").write_text("extra\n")
    (ws / "dist" / "docs-1.4.0.bundle").write_text("tampered\n")

    gen = POLICY.policy(Turn(1, PROMPTS[0]))
    action = next(gen)
    assert isinstance(action, Shell)
    action = gen.send(Observation(text=f"Chunk ID: 1\nProcess exited with code 0\nOutput:\n{_run(ws, action.command)}"))
    assert isinstance(action, WriteFile)
    assert json.loads(action.content) == SCORE.inventory(ws) != GOOD_INV
    assert isinstance(gen.send(Observation(text="ok")), Final)

    gen = POLICY.policy(Turn(2, PROMPTS[1]))
    action = next(gen)
    assert isinstance(action, Shell) and "SHA256SUMS" in action.command
    action = gen.send(Observation(text=_run(ws, action.command)))
    assert isinstance(action, Shell)
    action = gen.send(Observation(text=_run(ws, action.command)))
    assert isinstance(action, WriteFile)
    report = json.loads(action.content)
    assert report == SCORE.verification(ws)
    assert report["mismatched"] == ["app-1.4.0-windows.bundle", "docs-1.4.0.bundle", "extra-1.4.0.bundle"]
    assert isinstance(gen.send(Observation(text="ok")), Final)

    gen = POLICY.policy(Turn(3, PROMPTS[2]))
    action = next(gen)
    assert isinstance(action, Shell)
    out = _run(ws, action.command)
    assert not (ws / "dist" / "tmp").exists() and "tmp_exists=False" in out
    done = gen.send(Observation(text=out))
    assert isinstance(done, Final) and "could not" not in done.text


def test_policy_reports_a_refused_cleanup_as_not_done():
    # Codex CLI refuses rm -f style commands with a message that echoes the command text
    gen = POLICY.policy(Turn(3, PROMPTS[2]))
    action = next(gen)
    assert isinstance(action, Shell) and "rm -" not in action.command
    done = gen.send(Observation(text=f"exec_command failed for `{action.command}`: rejected", is_error=True))
    assert isinstance(done, Final) and "could not be removed" in done.text


def test_policy_embeds_no_digest_or_count():
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (PACK / "workspace" / "dist").glob("*.bundle")]
    assert not any(d in text or d[:12] in text for d in digests)
    assert "24615" not in text and "windows" not in text


def test_policy_writes_nothing_without_a_result():
    gen = POLICY.policy(Turn(1, PROMPTS[0]))
    next(gen)
    assert isinstance(gen.send(Observation(text="command not found")), Final)
