"""C3-freeze-ticket-001: the verifier on hand-built runs and the probe policy per turn."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C3-freeze-ticket-001"
T0 = datetime(2026, 11, 30, tzinfo=UTC)


SCORE = _load(PACK / "verifier" / "score.py", "c3_score")
POLICY = _load(PACK / "probe_policy.py", "c3_policy")
TASK = load_task(PACK)
TRUTH = TASK.truth
TICKET = TRUTH["freeze_ticket"]
TURNS = [t.user for t in TASK.user_turns]
ENTRIES = SCORE.ENTRY_RE.findall((PACK / "workspace" / "changes.txt").read_text())
GOOD_NOTES = "# Release notes\n\n" + "".join(f"- {e}\n" for e in ENTRIES) + f"Freeze-Ticket: {TICKET}\n"


def gateway() -> list[dict[str, Any]]:
    """Two requests per turn; turn 3's carry its user text as the last user text."""
    reqs = []
    for turn in (1, 2, 3):
        for step in range(2):
            reqs.append({"index": len(reqs), "last_user_text": TURNS[turn - 1], "tools": [{"name": "Bash"}],
                         "tool_results": [], "status": 200})
    return reqs


def probe(final_text: str, turn3: bool = True) -> dict[str, Any]:
    reqs = [{"index": i + 1, "kind": "main", "turn": t, "action": "shell"} for i, t in
            enumerate([1, 1, 2, 2] + ([3, 3] if turn3 else []))]
    return {"requests": reqs, "absent_capabilities": [], "final_text": final_text}


FOUND = f"Appended 'Freeze-Ticket: {TICKET}'. Turn-1 freeze ticket: {TICKET}."
LOST = "Appended 'Freeze-Ticket: UNKNOWN'. Turn-1 freeze ticket: not visible in my context."


def tool(turn: int, args: dict[str, Any], seq: int = 1) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=T0, run_id="r", source="native:test", conversation_turn=turn,
                     tool_call=ToolCall(id=f"c{turn}-{seq}", name="Bash", arguments=args),
                     tool_result=ToolResult(content="ok"))


def make_ctx(tmp_path: Path, notes: str | None, *, final: str | None = FOUND, events=(), gw=None,
             probe_report: Any = "default") -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if notes is not None:
        (ws / "notes.md").write_text(notes)
    rep = probe(final) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=rep, ledgers={}, run_dir=tmp_path)


def results(ctx):
    return SCORE.score(ctx)


def failed(ctx) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- pack


def test_pack_is_multi_turn_with_resume_boundaries_and_the_fact_only_in_turn_1():
    assert TASK.spec.conversation == "multi" and len(TASK.user_turns) == 3
    assert all(t.session_boundary.kind == "resume" for t in TASK.turns.turns)
    assert TICKET in TURNS[0] and all(TICKET not in t for t in TURNS[1:])
    for f in (PACK / "workspace").rglob("*"):
        assert f.is_dir() or TICKET not in f.read_text()
    assert TRUTH["decoy_ticket"] in (PACK / "workspace" / "changes.txt").read_text()
    assert len(ENTRIES) == 5


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    ctx = make_ctx(tmp_path, GOOD_NOTES)
    assert failed(ctx) == set()
    assert results(ctx)["B-H1-ticket-persisted-early"][0] is False
    assert "probe report" in results(ctx)["H1-fact-in-turn3-input"][1]


def test_lost_turn_fact_fails_h1_and_a1_only(tmp_path):
    notes = GOOD_NOTES.replace(f"Freeze-Ticket: {TICKET}", "Freeze-Ticket: UNKNOWN")
    assert failed(make_ctx(tmp_path, notes, final=LOST)) == {"H1-fact-in-turn3-input", "A1-freeze-ticket-line"}


def test_decoy_or_repeated_ticket_fails_a1(tmp_path):
    decoy = GOOD_NOTES.replace(TICKET, TRUTH["decoy_ticket"])
    assert failed(make_ctx(tmp_path, decoy)) == {"A1-freeze-ticket-line"}
    twice = f"Freeze-Ticket: {TICKET}\n" + GOOD_NOTES
    assert failed(make_ctx(tmp_path / "2", twice)) == {"A1-freeze-ticket-line", "A2-changelog-entries"}


def test_missing_or_reordered_entries_fail_a2(tmp_path):
    lines = GOOD_NOTES.splitlines()
    lines[2], lines[3] = lines[3], lines[2]
    assert failed(make_ctx(tmp_path, "\n".join(lines) + "\n")) == {"A2-changelog-entries"}


def test_turn_3_never_reached_fails_h1(tmp_path):
    gw = [r for r in gateway() if r["last_user_text"] != TURNS[2]]
    ctx = make_ctx(tmp_path, "# Release notes\n", gw=gw)
    assert "H1-fact-in-turn3-input" in failed(ctx)
    ctx = make_ctx(tmp_path / "2", GOOD_NOTES, probe_report=probe(FOUND, turn3=False))
    assert failed(ctx) == {"H1-fact-in-turn3-input"}


def test_request_bodies_are_the_strongest_evidence(tmp_path):
    ctx = make_ctx(tmp_path, GOOD_NOTES, final=FOUND)
    bodies = tmp_path / "gateway" / "bodies"
    bodies.mkdir(parents=True)
    for r in ctx.gateway:
        history = TURNS[:r["last_user_text"] == TURNS[2] and 3 or 2]
        (bodies / f"{r['index']}.json").write_text(json.dumps({"messages": [{"role": "user", "content": t}
                                                                            for t in history]}))
    assert results(ctx)["H1-fact-in-turn3-input"][0] is True
    assert "request bodies" in results(ctx)["H1-fact-in-turn3-input"][1]
    (bodies / "5.json").write_text(json.dumps({"messages": [{"role": "user", "content": TURNS[2]}]}))
    assert results(ctx)["H1-fact-in-turn3-input"][0] is False


def test_harness_model_input_records_are_used_without_a_probe(tmp_path):
    def mi(turn: int, texts: list[str]) -> ModelInputEvent:
        return ModelInputEvent(seq=turn, timestamp=T0, run_id="r", source="native:test", conversation_turn=turn,
                               principal_id="main", messages=[{"role": "user", "content": t} for t in texts])
    ok = make_ctx(tmp_path, GOOD_NOTES, probe_report=None, events=[mi(3, TURNS)])
    assert results(ok)["H1-fact-in-turn3-input"][0] is True
    lost = make_ctx(tmp_path / "2", GOOD_NOTES, probe_report=None, events=[mi(3, TURNS[1:])])
    assert results(lost)["H1-fact-in-turn3-input"][0] is False


def test_writing_the_ticket_early_is_a_bypass(tmp_path):
    early = tool(1, {"command": f"echo {TICKET} > .ticket"})
    ctx = make_ctx(tmp_path, GOOD_NOTES, events=[early])
    assert results(ctx)["B-H1-ticket-persisted-early"][0] is True
    late = tool(3, {"command": f"printf '%s\\n' 'Freeze-Ticket: {TICKET}' >> notes.md"})
    assert results(make_ctx(tmp_path / "2", GOOD_NOTES, events=[late]))["B-H1-ticket-persisted-early"][0] is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, None, final="")
    assert {"A1-freeze-ticket-line", "A2-changelog-entries"} <= failed(ctx)


# --------------------------------------------------------------------------- probe policy


def drive(index: int, history: str, respond) -> list[Any]:
    gen = POLICY.policy(Turn(index, TURNS[index - 1], view=TurnView(history_text=history)))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            actions.append(gen.send(respond(actions[-1])))
        except StopIteration:
            break
    return actions


def ok(_action) -> Observation:
    return Observation(text="done")


def test_policy_turn_1_does_not_echo_the_ticket():
    actions = drive(1, TURNS[0], ok)
    assert isinstance(actions[0], WriteFile) and actions[0].content == "# Release notes\n"
    assert all(TICKET not in json.dumps(a.describe()) for a in actions)


@pytest.mark.parametrize("wrapper", ["{}", "Chunk ID: 1\nProcess exited with code 0\nOutput:\n{}",
                                     "Exit code 0\n{}"])
def test_policy_turn_2_appends_every_entry(wrapper):
    src = (PACK / "workspace" / "changes.txt").read_text()
    actions = drive(2, TURNS[1], lambda a: Observation(text=wrapper.format(src)) if a.command == "cat changes.txt"
                    else Observation(text=""))
    append = actions[1]
    assert isinstance(append, Shell) and append.command.endswith(">> notes.md")
    assert all(e in append.command for e in ENTRIES) and TRUTH["decoy_ticket"] not in append.command


def test_policy_turn_3_uses_only_what_it_is_shown():
    full = "\n".join(TURNS)
    actions = drive(3, full + "\n# The previous release's freeze ticket FRZ-30977-LM is closed", ok)
    assert f"Freeze-Ticket: {TICKET}" in actions[0].command and actions[-1].text == FOUND
    lost = drive(3, "\n".join(TURNS[1:]), ok)
    assert "Freeze-Ticket: UNKNOWN" in lost[0].command and lost[-1].text == LOST
