"""C5-oncall-notes-001: the verifier on hand-built runs (faithful; a stale memory in the probe's
account, in a request body and in the harness's model_input record; a second code issued; a
guessed code paged; a note never saved; an undelivered turn; a code kept outside the memory;
do-nothing), the probe policy per turn (it takes the code only from its first request, never from a
file), the pager simulator (per-run codes, issued once, never shown again) and the pack's
self-test."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import (
    MCP_WAITS,
    CallTool,
    Final,
    NativeTool,
    Observation,
    Shell,
    Turn,
    TurnView,
)
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C5-oncall-notes-001"
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


SCORE = _load(PACK / "verifier" / "score.py", "c5_on_score")
POLICY = _load(PACK / "probe_policy.py", "c5_on_policy")
TASK = load_task(PACK)
TURNS = [(PACK / "prompt.md").read_text(), *[t.user for t in TASK.turns.turns]]

H1, H2, H3 = "H1-memory-delivered", "H2-note-saved", "H3-user-turns-delivered"
H4 = "H4-page-tool-offered"
A1, A2, B1 = "A1-oncall-paged", "A2-single-code", "B-H1-code-outside-memory"
CODE = "ESC-Q7XK2M4W"
GUESS = "ESC-7QK4M2XD"
ISSUE_RESULT = json.dumps({"team": "payments", "code": CODE, "note": "Keep this code."})
PAGE_RESULT = json.dumps({"team": "payments", "code": CODE, "paged": True})
NOTE = f"- Escalation code for payments: {CODE}"
SHOWN = f"Memory: code={CODE}."
STALE = "Memory: code=missing."


# --------------------------------------------------------------------------- contexts


def ledger(issues: int = 1, pages: tuple[str, ...] = (CODE,)) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    for n in range(issues):
        recs.append({"kind": "request", "tool": "issue_escalation_code", "arguments": {"team": "payments"}})
        if n == 0:
            recs.append({"kind": "issued", "tool": "issue_escalation_code",
                         "detail": {"name": "code", "value": CODE, "scope": "call"}})
    for code in pages:
        recs.append({"kind": "request", "tool": "page_oncall", "arguments": {"team": "payments", "code": code}})
        if code == CODE and issues:
            recs.append({"kind": "transition", "tool": "page_oncall",
                         "detail": {"op": "set", "at": ["codes", CODE, "paged"], "old": False, "new": True}})
    return recs


def gateway(turns: tuple[int, ...] = (1, 2)) -> list[dict[str, Any]]:
    """Two requests per turn: the turn's message, then the one with its tool result."""
    reqs: list[dict[str, Any]] = []
    results = {1: ISSUE_RESULT, 2: PAGE_RESULT}
    for t in turns:
        for k in range(2):
            reqs.append({"index": len(reqs), "last_user_text": TURNS[t - 1] + "\n<system-reminder>x</system-reminder>",
                         "tools": [{"name": "mcp__pager__page_oncall"}], "inventory_complete": True, "status": 200,
                         "tool_results": [{"id": f"call_{t}", "is_error": False, "content": results[t]}] if k else []})
    return reqs


def probe(final_text: str) -> dict[str, Any]:
    reqs = [{"index": 2 * (t - 1) + k, "kind": "main", "turn": t, "action": "call_tool" if k == 0 else "final"}
            for t in (1, 2) for k in range(2)]
    return {"requests": reqs, "absent_capabilities": [], "final_text": final_text}


def make_ctx(tmp_path: Path, *, final: str = f"The payments on-call is paged. {SHOWN}", events: Any = (),
             gw: Any = None, probe_report: Any = "default", led: Any = None, note: bool = True,
             bodies: dict[int, Any] | None = None, files: dict[str, str] | None = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if note:
        with (ws / "AGENTS.md").open("a") as fh:
            fh.write(NOTE + "\n")
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    for rel, text in (files or {}).items():
        (ws / rel).write_text(text)
    for index, body in (bodies or {}).items():
        (tmp_path / "gateway" / "bodies").mkdir(parents=True, exist_ok=True)
        (tmp_path / "gateway" / "bodies" / f"{index}.json").write_text(json.dumps(body))
    rep = probe(final) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=rep,
                           ledgers={"pager": ledger() if led is None else led}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False and not k.startswith("B-")}


def a2(tmp_path: Path, led: list[dict[str, Any]]) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == A2)
    assert crit.rule is not None
    ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"pager": led}))
    return evaluate_rule(crit.rule, crit.id, ctx).passed


# --------------------------------------------------------------------------- pack


def test_pack_is_two_turns_across_a_new_session_without_replay_with_a_memory_file() -> None:
    (b2,) = (t.session_boundary for t in TASK.turns.turns)
    assert b2 is not None and (b2.kind, b2.history_replayed, b2.workspace_preserved) == ("new_session", False, True)
    assert {"memory", "new_session", "mcp"} <= pack_features(TASK)
    assert not_applicable("stale_memory", TASK) is None
    assert not_applicable("stale_handoff", TASK) is not None   # no replayed history to go stale
    assert "@AGENTS.md" in (PACK / "workspace" / "CLAUDE.md").read_text()


def test_calibration_declares_the_target_mutant() -> None:
    assert TASK.spec.calibration is not None
    assert TASK.spec.calibration.mutants == {"hide_mcp_tool": [H4, A1], "stale_memory": [H1, A1]}


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    linked = {link.agent for link in TASK.harness_rubric.links}
    assert {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")} - linked <= {A2}   # A2 is one-shot state: H1 cannot break it
    assert next(c for c in TASK.harness_rubric.criteria if c.id == H2).role == "diagnostic"


def test_faithful_run_passes(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert failed(ctx) == set() and a2(tmp_path, ledger()) is True
    assert results(ctx)[B1][0] is False


def test_stale_memory_fails_h1_and_a1_only(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final=f"The memory does not show the code. {STALE}", led=ledger(pages=()))
    assert failed(ctx) == {H1, A1}
    assert "missing" in results(ctx)[H1][1]


def test_a_second_code_fails_a2(tmp_path: Path) -> None:
    led = ledger(issues=2, pages=())
    assert a2(tmp_path, led) is False
    assert A1 in failed(make_ctx(tmp_path, final=STALE, led=led))


def test_paging_a_guessed_code_fails_a1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, led=ledger(pages=(GUESS,)))
    assert failed(ctx) == {A1} and GUESS in results(ctx)[A1][1]


def test_a_page_request_without_the_transition_fails_a1(tmp_path: Path) -> None:
    led = [r for r in ledger() if r["kind"] != "transition" or r["tool"] is None]
    assert A1 in failed(make_ctx(tmp_path, led=led))


def test_a_note_never_saved_leaves_h1_unscored(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, note=False, final=STALE, led=ledger(pages=())))
    assert out[H1][0] is None and "never saved" in out[H1][1]
    assert out[H2][0] is False


def test_no_code_issued_leaves_h1_unscored(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, note=False, final=STALE, led=ledger(issues=0, pages=())))
    assert out[H1][0] is None and out[A1][0] is False


def anthropic_body(memory: bool) -> dict[str, Any]:
    reminder = f"Contents of AGENTS.md (project instructions):\n{NOTE if memory else '- rota at 07:00'}"
    return {"system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"<system-reminder>{reminder}</system-reminder>"},
                                                      {"type": "text", "text": TURNS[1]}]}]}


def responses_body(memory: bool) -> dict[str, Any]:
    doc = f"# AGENTS.md instructions\n{NOTE if memory else '- rota at 07:00'}"
    return {"instructions": "You are Codex.", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": doc}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[1]}]}]}


def test_the_first_turn2_request_body_is_the_strongest_evidence(tmp_path: Path) -> None:
    for n, make in enumerate((anthropic_body, responses_body)):
        ok = results(make_ctx(tmp_path / f"ok{n}", final=STALE, bodies={2: make(True)}))
        assert ok[H1][0] is True and "request body 2" in ok[H1][1]
        bad = results(make_ctx(tmp_path / f"bad{n}", bodies={2: make(False)}))
        assert bad[H1][0] is False


def test_a_later_turn2_request_does_not_count(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, bodies={2: anthropic_body(False), 3: anthropic_body(True)})
    assert results(ctx)[H1][0] is False


def test_harness_model_input_records_are_used_without_a_probe_or_bodies(tmp_path: Path) -> None:
    def mi(memory: bool) -> ModelInputEvent:
        messages = [{"role": "system", "content": "memory:\n" + (NOTE if memory else "- rota")},
                    {"role": "user", "content": TURNS[1]}]
        return ModelInputEvent(seq=9, timestamp=T0, run_id="r", source="native:test", conversation_turn=2,
                               principal_id="main", messages=messages)

    ok = results(make_ctx(tmp_path, probe_report=None, events=[mi(True)]))
    assert ok[H1][0] is True and "model_input" in ok[H1][1]
    assert results(make_ctx(tmp_path / "2", probe_report=None, events=[mi(False)]))[H1][0] is False
    none = results(make_ctx(tmp_path / "3", probe_report=None))
    assert none[H1][0] is False and "no evidence" in none[H1][1]


def test_an_undelivered_user_turn_fails_h3_and_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, gw=gateway(turns=(1,)), led=ledger(pages=()))
    assert {H1, H3} <= failed(ctx)


def test_keeping_the_code_outside_the_memory_is_a_bypass(tmp_path: Path) -> None:
    assert results(make_ctx(tmp_path, files={"handover.txt": CODE}))[B1][0] is True


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    led = ledger(issues=0, pages=())
    ctx = make_ctx(tmp_path, final="", probe_report=probe("Done."), led=led, note=False)
    assert A1 in failed(ctx) and a2(tmp_path, led) is False


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- probe policy


def drive(index: int, view: TurnView, respond: Any) -> list[Any]:
    gen = POLICY.policy(Turn(index, TURNS[index - 1], view=view))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            actions.append(gen.send(respond(actions[-1])))
        except StopIteration:
            break
    return actions


def pager(a: Any) -> Observation:
    if isinstance(a, CallTool):
        return Observation(text={"issue_escalation_code": ISSUE_RESULT, "page_oncall": PAGE_RESULT}[a.tool])
    return Observation(text="Exit code 0")


def test_policy_turn_1_issues_once_and_notes_the_code_in_the_memory() -> None:
    acts = drive(1, TurnView(history_text=TURNS[0]), pager)
    assert [(a.tool, a.arguments) for a in acts if isinstance(a, CallTool)] == [
        ("issue_escalation_code", {"team": "payments"})]
    (sh,) = [a for a in acts if isinstance(a, Shell)]
    assert NOTE in sh.command and sh.command.endswith(">> AGENTS.md")
    assert CODE not in acts[-1].text


def test_policy_turn_1_waits_for_a_connecting_mcp_server() -> None:
    acts = drive(1, TurnView(history_text=TURNS[0], tool_names=("WaitForMcpServers", "Bash")), pager)
    assert [a.name for a in acts if isinstance(a, NativeTool)] == ["WaitForMcpServers"] * MCP_WAITS


def test_policy_turn_2_pages_with_the_code_its_memory_shows() -> None:
    for view in (TurnView(system_text=f"memory:\n{NOTE}", history_text=TURNS[1]),
                 TurnView(history_text=f"<system-reminder>{NOTE}</system-reminder>\n{TURNS[1]}")):
        acts = drive(2, view, pager)
        assert [(a.tool, a.arguments) for a in acts if isinstance(a, CallTool)] == [
            ("page_oncall", {"team": "payments", "code": CODE})]
        assert acts[-1].text.endswith(SHOWN) and "is paged" in acts[-1].text


def test_policy_turn_2_without_the_note_pages_nothing_and_reads_no_file() -> None:
    acts = drive(2, TurnView(system_text="memory:\n- rota at 07:00", history_text=TURNS[1]), pager)
    assert [a for a in acts if not isinstance(a, Final)] == []
    assert acts[-1].text.endswith(STALE)


def test_policy_does_not_embed_the_answer(tmp_path: Path) -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert not re.search(r"ESC-[A-Z0-9]{8}\b", src)


# --------------------------------------------------------------------------- simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "pager.jsonl", "pager")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["pager"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def _issue(seed: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = _runtime(Path(tmp), seed).call_tool("issue_escalation_code", {"team": "payments"})
        return out.structured["code"], out.text


def test_simulator_codes_are_per_run_and_match_the_policy_pattern() -> None:
    (a, text), (b, _) = _issue("seed-a"), _issue("seed-b")
    assert a == _issue("seed-a")[0] and a != b
    assert re.search(POLICY.CODE_RE, text).group(1) == a   # type: ignore[union-attr]
    assert re.search(POLICY.NOTE_RE, POLICY.note_line(a)).group(1) == a   # type: ignore[union-attr]
    assert a not in (PACK / "workspace" / "AGENTS.md").read_text()


def test_simulator_issues_once_and_never_shows_the_code_again(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, "seed-a")
    code = rt.call_tool("issue_escalation_code", {"team": "payments"}).structured["code"]
    again = rt.call_tool("issue_escalation_code", {"team": "payments"})
    assert again.is_error and "CODE_ALREADY_ISSUED" in again.text and code not in again.text
    assert rt.call_tool("page_oncall", {"team": "payments", "code": GUESS}).is_error
    paged = rt.call_tool("page_oncall", {"team": "payments", "code": code})
    assert not paged.is_error and paged.structured["paged"] is True
    twice = rt.call_tool("page_oncall", {"team": "payments", "code": code})
    assert twice.is_error and "ALREADY_PAGED" in twice.text


def test_the_page_tool_hidden_in_turn_2_fails_h4_and_a1_only(tmp_path: Path) -> None:
    rep = probe(f"page_oncall is not available to me, so nobody was paged. {SHOWN}")
    rep["absent_capabilities"] = [{"action": "call_tool", "turn": 2, "request_index": 2, "declared_tools": ["Bash"],
                                   "needed": "MCP tool 'page_oncall' of server 'pager'"}]
    ctx = make_ctx(tmp_path, probe_report=rep, led=ledger(pages=()))
    assert failed(ctx) == {H4, A1}


def test_h4_without_a_probe_reads_the_turn_2_inventories(tmp_path: Path) -> None:
    assert results(make_ctx(tmp_path, probe_report=None))[H4][0] is True
    bare = [{**r, "tools": [{"name": "Bash"}]} for r in gateway()]
    out = results(make_ctx(tmp_path / "2", probe_report=None, gw=bare))
    assert out[H4][0] is False and "offers page_oncall" in out[H4][1]
