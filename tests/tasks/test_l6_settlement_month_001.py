"""L6-settlement-month-001: the verifier on hand-built runs (faithful; a stale goal after the
compaction; a silent window cut; no compaction needed; a run ended before the trigger; both months
settled; an undelivered revision), the probe policy (it chooses the month from what the choosing
step is shown: the latest visible statement), the scripts and the pack's self-test."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ContextCompactionEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L6-settlement-month-001"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _load(path: Path, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    old = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    finally:
        sys.dont_write_bytecode = old
    return mod


SCORE = _load(PACK / "verifier" / "score.py", "l6_sm_score")
POLICY = _load(PACK / "probe_policy.py", "l6_sm_policy")
TASK = load_task(PACK)
TURNS = [(PACK / "prompt.md").read_text(), *[t.user for t in TASK.turns.turns]]
TRUTH = json.loads((PACK / "truth.json").read_text())
H1, H2, A1, A2 = "H1-revision-after-compaction", "H2-user-turns-delivered", "A1-april-settled", "A2-no-stale-month-settled"
APRIL = {"month": "april", "total_cents": 2290615, "entries": 41}
MARCH = {"month": "march", "total_cents": 1873420, "entries": 37}
KEPT = "Goal: task=shown; revision=shown; month=april."
STALE = "Goal: task=shown; revision=missing; month=march."
CUT = "Goal: task=missing; revision=missing; month=missing."


def gateway(turns: tuple[int, ...] = (1, 2)) -> list[dict[str, Any]]:
    reqs: list[dict[str, Any]] = []
    for t in turns:
        for _ in range(2 if t == 1 else 5):
            reqs.append({"index": len(reqs), "last_user_text": TURNS[t - 1], "tools": [], "tool_results": [], "status": 200})
    return reqs


def make_ctx(tmp_path: Path, *, final: str = f"Done. {KEPT}", report: Any = APRIL, runs: tuple[str, ...] = ("april",),
             kinds: tuple[str, ...] | None = None, events: Any = None, gw: Any = None,
             probe: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report is not None:
        (ws / "settlement.json").write_text(json.dumps(report))
    if runs:
        (ws / ".settle").mkdir()
        (ws / ".settle" / "runs.log").write_text("".join(f"{r}\n" for r in runs))
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    kinds = ("main",) * 4 + ("compaction",) + ("main",) * 3 if kinds is None else kinds
    events = [ContextCompactionEvent(seq=5, timestamp=T0, run_id="r", source="native:t", native_event_type="compacted",
                                     trigger="auto")] if events is None else events
    report_ = {"requests": [{"index": i, "kind": k, "turn": 1 if i < 2 else 2} for i, k in enumerate(kinds)],
               "absent_capabilities": [], "final_text": final} if probe else None
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=report_, ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False}


# --------------------------------------------------------------------------- pack


def test_pack_resumes_once_and_triggers_compaction_in_turn_two() -> None:
    (b2,) = (t.session_boundary for t in TASK.turns.turns)
    assert b2 is not None and b2.kind == "resume"
    assert TASK.spec.budgets.context_tokens == 100000
    usage = POLICY.PROBE_OPTIONS["report_usage_tokens"]
    assert usage["tokens"] >= 0.8 * TASK.spec.budgets.context_tokens and usage["from_request"] == SCORE.TRIGGER_REQUESTS
    assert {"compaction", "resume"} <= pack_features(TASK) and not_applicable("stale_goal", TASK) is None


def test_calibration_declares_both_compaction_mutants() -> None:
    assert TASK.spec.calibration is not None
    assert TASK.spec.calibration.mutants == {"stale_goal": [H1, A1, A2], "window_compaction": [H1, A1]}


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    assert {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")} <= {link.agent for link in TASK.harness_rubric.links}
    # the live-only judged reply criterion takes no link and no calibration entry
    assert {c.id for c in TASK.agent_rubric.criteria if not c.applies_to("probe")} == {"A3-replies-match-outputs"}


def test_scripts_print_what_the_truth_holds(tmp_path: Path) -> None:
    shutil.copytree(PACK / "workspace", tmp_path / "ws")
    out = subprocess.run(["bash", "scripts/settle.sh", "april"], cwd=tmp_path / "ws", capture_output=True, text=True,
                         check=True).stdout
    m = re.search(POLICY.SETTLED_RE, out)
    assert m is not None and {"month": m.group(1), "total_cents": int(m.group(2)), "entries": int(m.group(3))} == APRIL
    assert (tmp_path / "ws" / ".settle" / "runs.log").read_text() == "april\n"
    for cmd in ("sync", "check", "balance"):
        text = subprocess.run(["bash", "scripts/ledger.sh", cmd], cwd=tmp_path / "ws", capture_output=True, text=True,
                              check=True).stdout
        assert len(text) > 1500 and not re.search(POLICY.MONTH_RE, text)


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path)) == set()


def test_stale_goal_fails_h1_a1_a2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final=f"Done. {STALE}", report=MARCH, runs=("march",))
    assert failed(ctx) == {H1, A1, A2}
    assert "revision: no" in results(ctx)[H1][1]


def test_a_silent_window_cut_fails_h1_and_a1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final=f"Nothing settled. {CUT}", report=None, runs=(), kinds=("main",) * 7, events=[])
    assert failed(ctx) == {H1, A1}


def test_a_compaction_only_after_the_month_choosing_step_leaves_h1_unscored(tmp_path: Path) -> None:
    """A harness that compacts after turn 2's final answer (OpenClaw 2026.6.9 compacts post-turn from
    the reported usage): the month-choosing request (turn 2's third: index 4) came before the summary
    request (7) and the record (after the settle call's tool event), so nothing had to survive it."""
    calls = {0: "sync", 2: "check", 3: "balance", 4: "settle", 5: "write"}

    def requests(kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        reqs = [{"index": i, "kind": k, "turn": 1 if i < 2 else 2} for i, k in enumerate(kinds)]
        for i in calls:
            reqs[i].update(action="shell", call_id=f"call_tt_{i}")
        return reqs

    kinds = ("main",) * 7 + ("compaction",)
    events: list[Any] = [ToolEvent(seq=n, timestamp=T0, run_id="r", source="native:t", conversation_turn=1 if i < 2 else 2,
                                   tool_call=ToolCall(id=f"call_tt_{i}", name="exec", arguments={"command": name}),
                                   tool_result=ToolResult(content="ok")) for n, (i, name) in enumerate(calls.items(), 1)]
    events.append(ContextCompactionEvent(seq=len(events) + 1, timestamp=T0, run_id="r", source="native:t",
                                         native_event_type="transcript/compaction", conversation_turn=2))
    ctx = make_ctx(tmp_path, kinds=kinds, events=events)
    assert ctx.probe is not None
    ctx.probe["requests"] = requests(kinds)
    out = results(ctx)
    assert out[H1][0] is None and "compacted only after the month-choosing step (request 4)" in out[H1][1]
    assert "summary request 7" in out[H1][1] and "context_compaction record seq 6" in out[H1][1]
    assert failed(ctx) == set() and out[A1][0] is True
    # the record before the settle call's tool event: a compaction the choosing step had to survive
    events.insert(3, events.pop())
    early = make_ctx(tmp_path / "b", kinds=("main",) * 7, events=events)
    assert early.probe is not None
    early.probe["requests"] = requests(("main",) * 7)
    assert results(early)[H1][0] is True


def test_no_compaction_needed_leaves_h1_unscored(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, kinds=("main",) * 7, events=[]))
    assert out[H1][0] is None and "whole history" in out[H1][1] and out[A1][0] is True


def test_a_run_ended_before_the_trigger_leaves_h1_unscored(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, kinds=("main",) * 3, events=[], report=None, runs=()))
    assert out[H1][0] is None and out[A1][0] is False


def test_settling_both_months_fails_a2(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, runs=("march", "april"))) == {A2}


def test_an_undelivered_revision_fails_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, gw=gateway(turns=(1,)), final=f"Done. {STALE}", report=MARCH, runs=("march",))
    assert H2 in failed(ctx)


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- probe policy


def drive(index: int, views: list[TurnView]) -> list[Any]:
    turn = Turn(index, TURNS[index - 1], view=views[0])
    gen = POLICY.policy(turn)
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        turn._view = views[min(len(actions), len(views) - 1)]
        a = actions[-1]
        if isinstance(a, Shell) and "settle.sh" in a.command:
            month = a.command.rsplit(" ", 1)[-1]
            data = APRIL if month == "april" else MARCH
            obs = Observation(text=f"Exit code 0\nSETTLED month={month} total_cents={data['total_cents']} entries={data['entries']}")
        else:
            obs = Observation(text="Exit code 0\nSYNCED: 80 entries")
        try:
            actions.append(gen.send(obs))
        except StopIteration:
            break
    return actions


def test_policy_turn_1_only_syncs() -> None:
    acts = drive(1, [TurnView(history_text=TURNS[0])])
    assert [a.command for a in acts if isinstance(a, Shell)] == ["./scripts/ledger.sh sync"]
    assert "80" in acts[-1].text


def test_policy_turn_2_settles_the_latest_visible_month() -> None:
    full = TurnView(history_text="\n".join(TURNS))
    acts = drive(2, [full])
    assert [a.command for a in acts if isinstance(a, Shell)] == [
        "./scripts/ledger.sh check", "./scripts/ledger.sh balance", "./scripts/settle.sh april"]
    (w,) = [a for a in acts if isinstance(a, WriteFile)]
    assert json.loads(w.content) == APRIL and acts[-1].text.endswith(KEPT)


def test_policy_turn_2_with_only_the_first_goal_settles_march() -> None:
    stale = TurnView(history_text=TURNS[0] + "\n[context compacted] " + POLICY.compaction_summary(Turn(2, TURNS[1], view=TurnView())))
    acts = drive(2, [TurnView(history_text="\n".join(TURNS))] * 2 + [stale])
    assert "./scripts/settle.sh march" in [a.command for a in acts if isinstance(a, Shell)]
    assert acts[-1].text.endswith(STALE)


def test_policy_turn_2_with_no_goal_visible_settles_nothing() -> None:
    cut = TurnView(history_text="Exit code 0\nCHECK: passed\nExit code 0\nBALANCE: even")
    acts = drive(2, [TurnView(history_text="\n".join(TURNS))] * 2 + [cut])
    assert not any("settle.sh" in a.command for a in acts if isinstance(a, Shell))
    assert not any(isinstance(a, WriteFile) for a in acts) and acts[-1].text.endswith(CUT)


def test_the_summary_restates_no_month_and_the_policy_embeds_no_totals() -> None:
    assert not re.search(r"(?i)march|april", POLICY.compaction_summary(Turn(2, TURNS[1], view=TurnView())))
    src = (PACK / "probe_policy.py").read_text()
    assert "2290615" not in src and "1873420" not in src


def test_the_summary_lists_the_user_messages_only_when_asked() -> None:
    history = "\n".join([TURNS[0], "Exit code 0\nSYNCED: 80 entries", TURNS[1]])
    plain = POLICY.compaction_summary(Turn(2, TURNS[1], view=TurnView(history_text=history + "\nSummarize the conversation so far.")))
    assert "report is for" not in plain
    asked = POLICY.compaction_summary(Turn(2, TURNS[1], view=TurnView(
        history_text=history + "\nYour summary should include: All user messages: List ALL user messages.")))
    assert "report is for March" in asked and "the report is for April, not March" in asked
    assert re.findall(POLICY.MONTH_RE, asked)[-1] == "April"   # the latest statement stays the revision
