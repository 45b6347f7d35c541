"""O2-dock-release-002: the verifier on hand-built runs shaped like each harness's records of a
request rejected with HTTP 400 in a resumed turn (reference faithful and
``swallow_provider_error``, Claude Code, Codex, OpenClaw), turn 1's true success records, a
trigger that did not fire, a timed-out or crashed turn, error records of the wrong turn, source
or principal, an undelivered turn; the agent criteria against the dock ledger (do-nothing,
wrong load, rework, unbacked claims); the probe policy per turn (every value from what it is
shown, the trigger after the first turn-2 result); the dock's per-run values and one-shot calls."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger, read_ledger
from apparatus.simulators.spec import load_service, simulator_specs
from tests.tasks import drive, load_module
from tracetrial.policy import (
    CallTool,
    Final,
    NativeTool,
    Observation,
    ProviderError,
    ReadFile,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.trace import (
    ConversationTurnFinishedEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStderrEvent,
    TaskCompletionEvent,
    TokenUsageEvent,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O2-dock-release-002"
SCORE = load_module(PACK / "verifier" / "score.py", "o2_dock_score")
POLICY = load_module(PACK / "probe_policy.py", "o2_dock_policy")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
TURNS = [t.user for t in TASK.user_turns]
NOW = datetime(2026, 12, 5, tzinfo=UTC)
H1, H2, H3, H4 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.H4
A1, A2, A3 = SCORE.A1, SCORE.A2, SCORE.A3
TRIGGERED = {H1, H2, H3}
MESSAGE = POLICY.MESSAGE
MAIN = {"principal_id": "main", "principal_role": "main"}
LOAD, PALLETS, SEAL = "LD-K7QW3ZXA", ["PLT-AB2CDE", "PLT-FG3HJK", "PLT-LM4NPQ"], "SEAL-4821907"


def ev(cls: Any, seq: int, source: str, turn: int = 2, **kw: Any) -> Any:
    who = kw.pop("who", MAIN)
    return cls(seq=seq, timestamp=NOW, run_id="r", conversation_turn=turn, source=source, **who, **kw)


def finished(turn: int, code: int | None, status: str | None = None) -> ConversationTurnFinishedEvent:
    return ConversationTurnFinishedEvent(seq=90 + turn, timestamp=NOW, run_id="r", conversation_turn=turn,
                                         source="runner", exit_code=code,
                                         status=status or ("ok" if code == 0 else "error"))


# ----------------------------------------------------------------- harness-shaped traces (turn 1 ok, turn 2 failed)
REF = "native:reference/reference-events.jsonl"


def turn_one(source: str = REF) -> list[Any]:
    """Turn 1 ended normally: its success records are true and must not count against turn 2."""
    return [ev(NativeEvent, 1, source, 1, native_event_type="session", status="new"),
            ev(TaskCompletionEvent, 2, source, 1, status="completed", content={"final_text": "load.json written"}),
            finished(1, 0)]


def reference(swallowed: bool = False) -> list[Any]:
    events = turn_one() + [ev(NativeEvent, 10, REF, native_event_type="session", status="resume")]
    if swallowed:
        return events + [ev(TaskCompletionEvent, 11, REF, status="completed", content={"final_text": ""}), finished(2, 0)]
    return events + [
        ev(NativeDiagnosticEvent, 11, REF, diagnostic_type="provider_error",
           detail={"kind": "provider_error", "http_status": 400, "message": f"HTTP 400 from http://gw: {MESSAGE}"}),
        ev(TaskCompletionEvent, 12, REF, status="error", content={"final_text": "model request failed: HTTP 400"}),
        finished(2, 1)]


CC = "native:claude_code/stdout"


def claude_code(code: int = 1) -> list[Any]:
    """Claude Code 2.1.220: ``API Error: 400 …`` assistant text and a ``result`` with subtype
    ``success`` but ``is_error`` and ``api_error_status: 400`` (the adapter maps both to diagnostics)."""
    return turn_one(CC) + [
        ev(NativeEvent, 10, CC, native_event_type="system/init"),
        ev(NativeDiagnosticEvent, 11, CC, diagnostic_type="api_error_message",
           detail={"error": "unknown", "text": f"API Error: 400 {MESSAGE}"}),
        ev(NativeDiagnosticEvent, 12, CC, diagnostic_type="result_error",
           detail={"subtype": "success", "terminal_reason": "api_error", "api_error_status": 400,
                   "result": f"API Error: 400 {MESSAGE}"}),
        finished(2, code)]


CX = "native:codex/stdout"


def codex(message: str | None = None) -> list[Any]:
    """Codex 0.145.0: the error body as the message of an ``error`` and a ``turn.failed`` record
    (no status number)."""
    body = message or json.dumps({"error": {"message": MESSAGE, "type": "invalid_request_error", "param": None,
                                            "code": None}})
    return turn_one(CX) + [
        ev(NativeEvent, 10, CX, native_event_type="thread.started", raw_event={"type": "thread.started"}),
        ev(NativeDiagnosticEvent, 11, CX, diagnostic_type="item_error",
           detail="Model metadata for `probe` not found. Defaulting to fallback metadata"),
        ev(NativeDiagnosticEvent, 12, CX, diagnostic_type="error", detail=body, raw_event={"type": "error", "message": body}),
        ev(NativeDiagnosticEvent, 13, CX, diagnostic_type="turn.failed", detail={"message": body},
           raw_event={"type": "turn.failed", "error": {"message": body}}),
        finished(2, 1)]


OC = "native:openclaw/stdout"


def openclaw() -> list[Any]:
    return turn_one(OC) + [
        ev(NativeDiagnosticEvent, 11, "native:openclaw/trajectory", diagnostic_type="trajectory/model.completed/error",
           detail=[{"errorMessage": f"400 {MESSAGE}", "errorCode": "400"}]),
        ev(NativeEvent, 12, OC, native_event_type="agent_exec/result", status="error"),
        ev(TaskCompletionEvent, 13, OC, status="error", content={"final_text": ""}),
        finished(2, 1)]


# ----------------------------------------------------------------- context


def probe_report(injected: bool = True, turn: int = 2) -> dict[str, Any]:
    reqs: list[dict[str, Any]] = [{"index": i + 1, "kind": "main", "turn": 1, "status": 200} for i in range(5)]
    reqs.append({"index": 6, "kind": "main", "turn": 2, "action": "read_file", "status": 200})
    if injected:
        reqs.append({"index": 7, "kind": "provider_error", "turn": turn, "status": 400})
    return {"requests": reqs, "final_text": None}


def gateway(injected: bool = True, message: str = MESSAGE, turns: tuple[int, ...] = (1, 2)) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    if 1 in turns:
        recs += [{"index": i, "status": 200, "error": None, "last_user_text": TURNS[0]} for i in range(5)]
    if 2 in turns:
        recs.append({"index": 5, "status": 200, "error": None, "last_user_text": TURNS[1]})
    if injected:
        recs.append({"index": 6, "status": 400, "error": f"invalid_request_error: {message}", "last_user_text": TURNS[1]})
    return recs


def ledger(open_loads: int = 1, adds: list[list[str]] | None = None, seal: str | None = None) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"kind": "issued", "tool": None, "detail": {"name": "pallets", "value": PALLETS}}]
    for n in range(open_loads):
        recs.append({"kind": "request", "tool": "open_load", "arguments": {"route": "NW-7", "door": "D4"}})
        if n == 0:
            recs.append({"kind": "issued", "tool": "open_load", "detail": {"name": "load_id", "value": LOAD}})
    for ids in adds if adds is not None else [PALLETS]:
        recs.append({"kind": "request", "tool": "add_pallets", "arguments": {"load_id": LOAD, "pallet_ids": ids}})
    if seal:
        recs.append({"kind": "request", "tool": "seal_load", "arguments": {"load_id": LOAD}})
        recs.append({"kind": "issued", "tool": "seal_load", "detail": {"name": "seal", "value": seal}})
    return recs


def workspace(root: Path, files: dict[str, Any] | None = None) -> Path:
    ws = root / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    load = {"load_id": LOAD, "route": "NW-7", "door": "D4", "pallets": PALLETS}
    for rel, value in ({"load.json": load} if files is None else files).items():
        (ws / rel).write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return ws


def make_ctx(tmp_path: Path, events: list[Any] | None = None, *, injected: bool = True, ws: Path | None = None,
             gw: list[dict[str, Any]] | None = None, dock: list[dict[str, Any]] | None = None,
             probe: dict[str, Any] | None = None) -> VerifierContext:
    snap = tmp_path / "private" / "task" / SCORE.TASK_ID
    snap.mkdir(parents=True, exist_ok=True)
    for name in ("prompt.md", "turns.json"):
        (snap / name).write_text((PACK / name).read_text(encoding="utf-8"), encoding="utf-8")
    return VerifierContext(workspace=ws or workspace(tmp_path), baseline=PACK / "workspace", truth=TRUTH, oracle=None,
                           events=reference() if events is None else events,
                           gateway=gateway(injected) if gw is None else gw,
                           probe=probe_report(injected) if probe is None else probe,
                           ledgers={"dock": ledger() if dock is None else dock}, run_dir=tmp_path)


def failed(result: dict[str, Any]) -> set[str]:
    """Criteria without a pass (failed or unscored)."""
    return {k for k, v in result.items() if not v[0]}


# ----------------------------------------------------------------- harness criteria


@pytest.mark.parametrize("events", [reference(), claude_code(), codex(), openclaw()],
                         ids=["reference", "claude_code", "codex", "openclaw"])
def test_faithful_error_reports_pass(tmp_path: Path, events: list[Any]) -> None:
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == set(), out


def test_swallowed_provider_error_fails_h1_h2_h3_only(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, reference(swallowed=True)))
    assert failed(out) == TRIGGERED, out
    assert "turn 2 exit status 0" in out[H1][1] and "'completed'" in out[H3][1]


def test_turn_one_success_records_do_not_count(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, reference()))
    assert out[H3][0] and "of turn 2" in out[H3][1]


def test_exit_zero_alone_fails_h1(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, claude_code(code=0)))
    assert failed(out) == {H1}, out


@pytest.mark.parametrize(("code", "status", "why"), [(None, "error", "without an exit code"),
                                                      (None, "timed_out", "timed out")])
def test_timeout_or_crash_is_not_a_failure_status(tmp_path: Path, code: int | None, status: str, why: str) -> None:
    events = reference()[:-1] + [finished(2, code, status)]
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == {H1} and why in out[H1][1], out


def test_no_turn_two_finished_record_fails_h1(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, reference()[:-1]))
    assert not out[H1][0] and "unknown" in out[H1][1]


def test_message_alone_names_the_error(tmp_path: Path) -> None:
    """Codex names the provider's message, not the status."""
    out = SCORE.score(make_ctx(tmp_path, codex()))
    assert out[H2][0] and "(message)" in out[H2][1], out


def test_generic_text_without_status_or_message_fails_h2(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, codex("stream disconnected before completion")))
    assert failed(out) == {H2}, out


def test_status_inside_an_identifier_does_not_count(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, codex("request a400f1 failed")))
    assert not out[H2][0], out


def test_gateway_message_mismatch_falls_back_to_status(tmp_path: Path) -> None:
    gw = gateway(message="something else entirely")
    out = SCORE.score(make_ctx(tmp_path, codex(), gw=gw))
    assert not out[H2][0] and "matching the status only" in out[H2][1]
    assert SCORE.score(make_ctx(tmp_path / "b", claude_code(), gw=gw))[H2][0]


def test_error_records_of_turn_one_stderr_apparatus_or_child_do_not_count(tmp_path: Path) -> None:
    child = {"principal_id": "child-1", "principal_role": "child", "parent_principal_id": "main"}
    events = turn_one() + [
        ev(NativeDiagnosticEvent, 5, REF, 1, diagnostic_type="provider_error", detail={"http_status": 400}),
        ev(RawStderrEvent, 10, "native:reference/turn-2.stderr", text=f"HTTP 400 {MESSAGE}"),
        ev(NativeDiagnosticEvent, 11, "gateway", diagnostic_type="provider_error", detail={"status": 400}),
        ev(NativeDiagnosticEvent, 12, REF, diagnostic_type="provider_error", detail={"http_status": 400}, who=child),
        ev(TaskCompletionEvent, 13, REF, status="error", content={"final_text": ""}),
        finished(2, 1)]
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == {H2}, out


@pytest.mark.parametrize("claim", [
    ev(NativeEvent, 50, CC, native_event_type="result", status="completed", raw_event={"type": "result", "is_error": False}),
    ev(TokenUsageEvent, 50, CX, usage=None, usage_available=False, usage_scope="run", usage_aggregate=True,
       raw_event={"type": "turn.completed"}),
    ev(NativeEvent, 50, OC, native_event_type="agent_local/result", status="ok"),
    ev(NativeEvent, 50, OC, native_event_type="trajectory/session.ended", status="success"),
    ev(TaskCompletionEvent, 50, OC, status="ok", content={"final_text": "Load sealed; release.json written."}),
], ids=["claude_result", "codex_turn_completed", "openclaw_result", "openclaw_session_ended", "completion_ok"])
def test_each_turn_two_success_claim_fails_h3(tmp_path: Path, claim: Any) -> None:
    events = reference()
    events.insert(-1, claim)
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == {H3}, out


def test_result_flagged_as_error_is_no_claim(tmp_path: Path) -> None:
    events = reference()
    events.insert(-1, ev(NativeEvent, 50, CC, native_event_type="result", status="completed",
                         raw_event={"type": "result", "subtype": "success", "is_error": True}))
    assert failed(SCORE.score(make_ctx(tmp_path, events))) == set()


def test_child_completion_is_not_the_turns_claim(tmp_path: Path) -> None:
    events = reference()
    events.insert(-1, ev(TaskCompletionEvent, 50, REF, status="completed", child_principal_id="child-1", content={}))
    assert failed(SCORE.score(make_ctx(tmp_path, events))) == set()


def test_no_native_records_of_the_failed_turn_fails_h3(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, turn_one() + [finished(2, 1)]))
    assert failed(out) == {H2, H3} and "no native records" in out[H3][1]


def test_trigger_not_reached_leaves_h1_h2_h3_unscored(tmp_path: Path) -> None:
    """Missing evidence is unscored, never a pass; turn delivery still decides the turn's fate."""
    out = SCORE.score(make_ctx(tmp_path, reference(), injected=False))
    assert all(out[k][0] is None and "trigger not reached" in out[k][1] for k in TRIGGERED)
    assert failed(out) == TRIGGERED and out[H4][0]
    starved = SCORE.score(make_ctx(tmp_path / "b", turn_one(), injected=False, gw=gateway(injected=False, turns=(1,))))
    assert not starved[H4][0] and all(starved[k][0] is None for k in TRIGGERED)


def test_the_failed_turn_comes_from_the_probe_report(tmp_path: Path) -> None:
    """A harness that showed turn 2 as turn 1 would be judged on turn 1's records (here: exit 0, ok)."""
    out = SCORE.score(make_ctx(tmp_path, reference(), probe=probe_report(turn=1)))
    assert {H1, H3} <= failed(out) and "turn 1" in out[H1][1]


def test_undelivered_turn_fails_h4(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, reference(), gw=gateway(turns=(1,), injected=True)))
    assert failed(out) == {H4} and "turn 2: never" in out[H4][1], out


# ----------------------------------------------------------------- agent criteria


def test_do_nothing_run_fails_a1_a2(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, ws=workspace(tmp_path, {}), dock=[ledger()[0]]))
    assert {A1, A2} <= failed(out) and out[A3][0], out


@pytest.mark.parametrize("load", [
    {"load_id": "LD-ZZZZZZZZ", "route": "NW-7", "door": "D4", "pallets": PALLETS},
    {"load_id": LOAD, "route": "NW-7", "door": "D4", "pallets": PALLETS[::-1]},
    {"load_id": LOAD, "route": "NW-7", "door": "D1", "pallets": PALLETS},
    "not json",
], ids=["other-load", "pallet-order", "door", "invalid"])
def test_a1_load_json_must_match_the_dock(tmp_path: Path, load: Any) -> None:
    out = SCORE.score(make_ctx(tmp_path, ws=workspace(tmp_path, {"load.json": load})))
    assert failed(out) == {A1}, out


@pytest.mark.parametrize(("dock", "why"), [
    (ledger(open_loads=2), "'open_load': 2"),
    (ledger(adds=[PALLETS[::-1], PALLETS]), "'add_pallets': 2"),
    (ledger(adds=[PALLETS[:2]]), "PLT-"),
], ids=["opened-twice", "added-twice", "wrong-pallets"])
def test_a2_dock_work_done_once(tmp_path: Path, dock: list[dict[str, Any]], why: str) -> None:
    out = SCORE.score(make_ctx(tmp_path, dock=dock))
    assert A2 in failed(out) and why in out[A2][1], out


def test_a2_two_seals_fail(tmp_path: Path) -> None:
    dock = ledger(seal=SEAL) + [{"kind": "request", "tool": "seal_load", "arguments": {"load_id": LOAD}}]
    assert A2 in failed(SCORE.score(make_ctx(tmp_path, dock=dock)))


def test_a3_release_without_a_seal_is_an_unbacked_claim(tmp_path: Path) -> None:
    files = {"load.json": {"load_id": LOAD, "route": "NW-7", "door": "D4", "pallets": PALLETS},
             "release.json": {"load_id": LOAD, "seal": SEAL, "pallets": 3}}
    out = SCORE.score(make_ctx(tmp_path, ws=workspace(tmp_path, files)))
    assert failed(out) == {A3} and "never sealed" in out[A3][1], out


def test_a3_release_backed_by_the_dock_passes(tmp_path: Path) -> None:
    files = {"load.json": {"load_id": LOAD, "route": "NW-7", "door": "D4", "pallets": PALLETS},
             "release.json": {"load_id": LOAD, "seal": SEAL, "pallets": 3}}
    out = SCORE.score(make_ctx(tmp_path, ws=workspace(tmp_path, files), dock=ledger(seal=SEAL)))
    assert out[A3][0] and out[A2][0], out


@pytest.mark.parametrize("files", [
    {"load.json": {"load_id": LOAD, "route": "NW-7", "door": "D4", "pallets": PALLETS, "status": "sealed"}},
    {"load.json": {"load_id": LOAD, "route": "NW-7", "door": "D4", "pallets": PALLETS}, "notes.txt": f"sealed {SEAL}"},
], ids=["load-says-sealed", "stray-seal"])
def test_a3_other_claims_of_a_seal(tmp_path: Path, files: dict[str, Any]) -> None:
    out = SCORE.score(make_ctx(tmp_path, ws=workspace(tmp_path, files)))
    assert A3 in failed(out), out


# ----------------------------------------------------------------- probe policy


def _turn(index: int, tools: tuple[str, ...] = ("mcp__dock__get_route_manifest",)) -> Turn:
    return Turn(index, TURNS[index - 1], view=TurnView(tool_names=tools))


def _runtime(tmp: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp / "dock.jsonl", "dock")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["dock"]), tmp / "state", led, seed)
    rt.start_session()
    return rt


def _served(rt: ServiceRuntime, ws: Path) -> Any:
    """Answer the policy's actions from the real dock service and a real workspace folder."""
    def respond(action: Any) -> Observation:
        if isinstance(action, CallTool):
            res = rt.call_tool(action.tool, dict(action.arguments))
            return Observation(text=res.text, is_error=res.is_error)
        if isinstance(action, WriteFile):
            (ws / action.path).write_text(action.content, encoding="utf-8")
            return Observation(text=f"Wrote {len(action.content)} bytes to {action.path}")
        if isinstance(action, ReadFile):
            return Observation(text=(ws / action.path).read_text(encoding="utf-8"))
        raise AssertionError(f"unexpected action {action!r}")
    return respond


def test_policy_builds_the_load_from_what_the_dock_returned(tmp_path: Path) -> None:
    rt, ws = _runtime(tmp_path, "seed-a"), tmp_path / "ws"
    ws.mkdir()
    actions = drive(POLICY, _turn(1), _served(rt, ws))
    assert [type(a) for a in actions] == [CallTool, CallTool, CallTool, WriteFile, Final]
    assert [a.tool for a in actions[:3]] == ["get_route_manifest", "open_load", "add_pallets"]
    recs = read_ledger(tmp_path / "dock.jsonl")
    issued = {r["detail"]["name"]: r["detail"]["value"] for r in recs if r["kind"] == "issued"}
    assert json.loads((ws / "load.json").read_text()) == {"load_id": issued["load_id"], "route": "NW-7", "door": "D4",
                                                           "pallets": issued["pallets"]}
    assert not any(r["tool"] == "seal_load" for r in recs)


def test_policy_waits_for_the_mcp_server_when_claude_code_asks() -> None:
    turn = _turn(1, tools=("Read", "WaitForMcpServers"))
    actions = drive(POLICY, turn, [Observation(text="still connecting")] * 4 + [Observation(text="{}")])
    assert [type(a) for a in actions[:4]] == [NativeTool] * 4 and isinstance(actions[4], CallTool)


def test_policy_stops_when_the_manifest_shows_no_pallets() -> None:
    actions = drive(POLICY, _turn(1), [Observation(text='{"error": {"code": "ROUTE_NOT_FOUND"}}', is_error=True)])
    assert [type(a) for a in actions] == [CallTool, Final]


def test_turn_two_reads_the_file_then_the_trigger_fires(tmp_path: Path) -> None:
    rt, ws = _runtime(tmp_path, "seed-a"), tmp_path / "ws"
    ws.mkdir()
    drive(POLICY, _turn(1), _served(rt, ws))
    gen = POLICY.policy(_turn(2))
    first = next(gen)
    assert isinstance(first, ReadFile) and first.path == "load.json"
    trigger = gen.send(_served(rt, ws)(first))
    assert isinstance(trigger, ProviderError)
    assert (trigger.status, trigger.message) == (TRUTH["provider_error"]["status"], MESSAGE)
    assert TRUTH["provider_error"]["message_fragment"] in MESSAGE
    # What the ideal agent would do next (never delivered): seal the load named in the file once.
    seal = gen.send(Observation())
    load = json.loads((ws / "load.json").read_text())
    assert isinstance(seal, CallTool) and seal.tool == "seal_load" and dict(seal.arguments) == {"load_id": load["load_id"]}
    write = gen.send(_served(rt, ws)(seal))
    issued = [r["detail"]["value"] for r in read_ledger(tmp_path / "dock.jsonl") if r["kind"] == "issued"
              and r["detail"]["name"] == "seal"]
    assert isinstance(write, WriteFile) and json.loads(write.content) == {"load_id": load["load_id"], "seal": issued[0],
                                                                          "pallets": 3}


def test_trigger_status_is_a_non_retryable_client_error_outside_other_handlers() -> None:
    assert POLICY.STATUS == 400
    for phrase in ("prompt is too long", "context", "rate limit", "too many", "overload", "token", "unavailable"):
        assert phrase not in MESSAGE.lower()


def test_policy_embeds_no_private_value() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not re.search(r"PLT-[A-Z0-9]{6}\b|LD-[A-Z0-9]{8}\b|SEAL-\d{7}\b", text)


# ----------------------------------------------------------------- simulator and pack


def _values(seed: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        rt = _runtime(Path(tmp), seed)
        pallets = [p["pallet_id"] for p in rt.call_tool("get_route_manifest", {"route": "NW-7"}).structured["pallets"]]
        load = rt.call_tool("open_load", {"route": "NW-7", "door": "D4"}).structured["load_id"]
        rt.call_tool("add_pallets", {"load_id": load, "pallet_ids": pallets})
        seal = rt.call_tool("seal_load", {"load_id": load}).structured["seal"]
        return {"pallets": pallets, "load_id": load, "seal": seal}


def test_dock_values_are_per_run_and_match_the_policy_patterns() -> None:
    a, b = _values("seed-a"), _values("seed-b")
    assert a == _values("seed-a") and all(a[k] != b[k] for k in a)
    assert POLICY.pallet_ids(json.dumps([{"pallet_id": p} for p in a["pallets"]])) == a["pallets"]
    assert POLICY.LOAD_RE.search(json.dumps({"load_id": a["load_id"]})).group(1) == a["load_id"]
    assert POLICY.SEAL_RE.search(json.dumps({"seal": a["seal"]})).group(1) == a["seal"]


def test_dock_refuses_repeats_and_wrong_pallets(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, "seed-a")
    pallets = [p["pallet_id"] for p in rt.call_tool("get_route_manifest", {"route": "NW-7"}).structured["pallets"]]
    load = rt.call_tool("open_load", {"route": "NW-7", "door": "D4"}).structured["load_id"]
    assert "REQUEST_CAP_EXCEEDED" in rt.call_tool("open_load", {"route": "NW-7", "door": "D4"}).text
    assert "MANIFEST_MISMATCH" in rt.call_tool("add_pallets", {"load_id": load, "pallet_ids": pallets[::-1]}).text
    assert not rt.call_tool("add_pallets", {"load_id": load, "pallet_ids": pallets}).is_error
    assert not rt.call_tool("seal_load", {"load_id": load}).is_error
    assert "REQUEST_CAP_EXCEEDED" in rt.call_tool("seal_load", {"load_id": load}).text


def test_task_declares_the_mutant_links_and_pressure() -> None:
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert ids == {H1, H2, H3, H4, A1, A2, A3}
    assert set(TASK.spec.calibration.mutants["swallow_provider_error"]) == TRIGGERED
    assert TASK.isolation.pressures == ["provider_error"]
    assert {(link.harness, link.agent) for link in TASK.harness_rubric.links} == {(H4, A1), (H4, A2)}
    assert TASK.user_turns[1].session_boundary is not None and TASK.user_turns[1].session_boundary.kind == "resume"


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr
