"""O2-inventory-snapshot-001: the verifier on hand-built traces shaped like each harness's records
of a provider that fails for good (reference faithful and ``swallow_provider_error``, Claude Code,
Codex, OpenClaw, DeepSeek Harness), the trigger that did not fire, a timed-out or crashed turn, a
run without native records, the success claims of each harness's final record; the agent
criterion; the probe policy (derives every value from what it is shown) and its injection
options; the snapshot script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
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

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O2-inventory-snapshot-001"
SCORE = load_module(PACK / "verifier" / "score.py", "o2_snapshot_score")
POLICY = load_module(PACK / "probe_policy.py", "o2_snapshot_policy")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
NOW = datetime(2026, 12, 2, tzinfo=UTC)
H1, H2, H3, A1 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.A1
HARNESS = {H1, H2, H3}
MAIN = {"principal_id": "main", "principal_role": "main"}
MESSAGE = POLICY.PROBE_OPTIONS["provider_error"]["message"]


def ev(cls, seq: int, source: str, **kw: Any):
    who = kw.pop("who", MAIN)
    return cls(seq=seq, timestamp=NOW, run_id="r", conversation_turn=1, source=source, **who, **kw)


def finished(code: int | None, status: str | None = None) -> ConversationTurnFinishedEvent:
    status = status or ("ok" if code == 0 else "error")
    return ev(ConversationTurnFinishedEvent, 99, "runner", exit_code=code, status=status)


# ----------------------------------------------------------------- harness-shaped traces
REF = "native:reference/reference-events.jsonl"


def reference(swallowed: bool = False) -> list[Any]:
    events: list[Any] = [ev(NativeEvent, 1, REF, native_event_type="session", status="new")]
    if swallowed:
        events.append(ev(TaskCompletionEvent, 2, REF, status="completed",
                         content={"status": "completed", "final_text": "", "model_calls": 3}))
        return events + [finished(0)]
    msg = f'HTTP 503 from http://127.0.0.1:1/v1/chat/completions: {{"error":{{"message":"{MESSAGE}"}}}}'
    events += [
        ev(NativeDiagnosticEvent, 2, REF, diagnostic_type="provider_error",
           detail={"kind": "provider_error", "message": msg, "http_status": 503}),
        ev(TaskCompletionEvent, 3, REF, status="error", content={"status": "error", "final_text": f"model request failed: {msg}"}),
        ev(RawStderrEvent, 4, "native:reference/turn-1.stderr", text="tt-reference: turn 1 ended with status error"),
    ]
    return events + [finished(1)]


CC = "native:claude_code/stdout"


def claude_code(code: int = 1) -> list[Any]:
    text = f"API Error: 503 {MESSAGE}. This is a server-side issue, usually temporary"
    return [
        ev(NativeEvent, 1, CC, native_event_type="system/init", raw_event={"type": "system", "subtype": "init"}),
        ev(NativeDiagnosticEvent, 2, CC, diagnostic_type="api_retry",
           detail={"attempt": 1, "max_retries": 1, "error_status": 503, "error": "server_error"}),
        ev(NativeDiagnosticEvent, 3, CC, diagnostic_type="api_error_message", detail={"error": "server_error", "text": text}),
        ev(NativeDiagnosticEvent, 4, CC, diagnostic_type="result_error",
           detail={"subtype": "success", "terminal_reason": "api_error", "api_error_status": 503, "result": text},
           raw_event={"type": "result", "subtype": "success", "is_error": True}),
        finished(code),
    ]


CX = "native:codex/stdout"


def codex(message: str = "unexpected status 503 Service Unavailable: " + MESSAGE) -> list[Any]:
    return [
        ev(NativeEvent, 1, CX, native_event_type="thread.started", raw_event={"type": "thread.started"}),
        ev(NativeDiagnosticEvent, 2, CX, diagnostic_type="item_error",
           detail="Model metadata for `probe` not found. Defaulting to fallback metadata",
           raw_event={"type": "item.completed"}),
        ev(NativeEvent, 3, CX, native_event_type="turn.started", raw_event={"type": "turn.started"}),
        ev(NativeDiagnosticEvent, 4, CX, diagnostic_type="error", detail=message, raw_event={"type": "error", "message": message}),
        ev(NativeDiagnosticEvent, 5, CX, diagnostic_type="turn.failed", detail={"message": message},
           raw_event={"type": "turn.failed", "error": {"message": message}}),
        finished(1),
    ]


OC_OUT, OC_TRAJ = "native:openclaw/stdout", "native:openclaw/trajectory"


def openclaw(recovered: bool = False) -> list[Any]:
    events: list[Any] = [
        ev(NativeDiagnosticEvent, 1, OC_TRAJ, diagnostic_type="trajectory/model.completed/error",
           detail=[{"errorMessage": f"503 {MESSAGE}", "errorCode": "503", "errorType": "server_error"}]),
    ]
    if recovered:
        return events + [
            ev(NativeEvent, 2, OC_TRAJ, native_event_type="trajectory/session.ended", status="success"),
            ev(NativeEvent, 3, OC_OUT, native_event_type="agent_exec/result", status="ok"),
            ev(TaskCompletionEvent, 4, OC_OUT, status="ok", content={"final_text": "done", "model_calls": 6}),
            finished(0),
        ]
    return events + [
        ev(NativeEvent, 2, OC_TRAJ, native_event_type="trajectory/session.ended", status="error"),
        ev(NativeEvent, 3, OC_OUT, native_event_type="agent_exec/result", status="error"),
        ev(NativeDiagnosticEvent, 4, OC_OUT, diagnostic_type="agent_exec_error",
           detail={"message": "tracetrial/probe request failed (provider service unavailable, HTTP 503).", "kind": "exception"}),
        ev(TaskCompletionEvent, 5, OC_OUT, status="error", content={"final_text": ""}),
        finished(1),
    ]


DS = "native:deepseek/stdout"


def deepseek() -> list[Any]:
    failure = {"message": MESSAGE, "code": "SERVER", "status": 503}
    return [
        ev(NativeEvent, 1, DS, native_event_type="session.event/turn/start"),
        ev(NativeDiagnosticEvent, 2, DS, diagnostic_type="assistant/chunk/finish/error", detail={"kind": "error", "failure": failure}),
        ev(NativeEvent, 3, DS, native_event_type="session.event/llm/retry"),
        ev(NativeDiagnosticEvent, 4, DS, diagnostic_type="turn/end/error", detail={"kind": "error", "error": failure}),
        finished(1),
    ]


# ----------------------------------------------------------------- context


def probe_report(injected: bool = True) -> dict[str, Any]:
    reqs = [{"index": 1, "kind": "main", "action": "shell", "status": 200},
            {"index": 2, "kind": "main", "action": "shell", "status": 200}]
    if injected:
        reqs += [{"index": 3, "kind": "provider_error", "status": 503}, {"index": 4, "kind": "provider_error", "status": 503}]
    else:
        reqs.append({"index": 3, "kind": "main", "action": "write_file", "status": 200})
    return {"requests": reqs}


def gateway(injected: bool = True, message: str = MESSAGE) -> list[dict[str, Any]]:
    recs = [{"index": 1, "status": 200, "error": None}, {"index": 2, "status": 200, "error": None}]
    if injected:
        recs += [{"index": n, "status": 503, "error": f"server_error: {message}"} for n in (3, 4)]
    return recs


def snapshot_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    shutil.copytree(PACK / "workspace", ws)
    subprocess.run([sys.executable, "snapshot.py"], cwd=ws, check=True, capture_output=True)
    return ws


def make_ctx(tmp_path: Path, events: list[Any], *, injected: bool = True, ws: Path | None = None,
             gw: list[dict[str, Any]] | None = None) -> VerifierContext:
    ws = ws or snapshot_ws(tmp_path)
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway(injected) if gw is None else gw, probe=probe_report(injected),
                           ledgers={}, run_dir=tmp_path)


def failed(result: dict[str, Any]) -> set[str]:
    return {k for k, v in result.items() if not v[0]}


# ----------------------------------------------------------------- harness criteria


@pytest.mark.parametrize("events", [reference(), claude_code(), codex(), openclaw(), deepseek()],
                         ids=["reference", "claude_code", "codex", "openclaw", "deepseek"])
def test_faithful_error_reports_pass(tmp_path: Path, events: list[Any]) -> None:
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == set(), out


def test_swallowed_provider_error_fails_every_harness_criterion(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, reference(swallowed=True)))
    assert failed(out) == HARNESS, out
    assert "status 0" in out[H1][1] and "'completed'" in out[H3][1]


def test_exit_zero_alone_fails_h1(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, claude_code(code=0)))
    assert failed(out) == {H1}, out


@pytest.mark.parametrize(("code", "status", "why"), [(None, "error", "without an exit code"),
                                                      (None, "timed_out", "timed out")])
def test_timeout_or_crash_is_not_a_failure_status(tmp_path: Path, code: int | None, status: str, why: str) -> None:
    events = reference()[:-1] + [finished(code, status)]
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == {H1} and why in out[H1][1], out


def test_no_turn_record_fails_h1(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, reference()[:-1]))
    assert not out[H1][0] and "unknown" in out[H1][1]


def test_generic_message_without_status_fails_h2(tmp_path: Path) -> None:
    """Codex 0.145 answers a 500 with a fixed 'high demand' text: neither status nor message."""
    out = SCORE.score(make_ctx(tmp_path, codex("We're currently experiencing high demand, which may cause temporary errors.")))
    assert failed(out) == {H2}, out
    assert "2 native error record(s)" not in out[H2][1] and "none naming HTTP [503]" in out[H2][1]


def test_message_alone_or_status_alone_names_the_error(tmp_path: Path) -> None:
    only_msg = codex(f"stream error: {MESSAGE}")
    assert SCORE.score(make_ctx(tmp_path / "a", only_msg))[H2][0]
    only_status = codex("unexpected status 503 Service Unavailable")
    assert SCORE.score(make_ctx(tmp_path / "b", only_status))[H2][0]


def test_status_inside_an_identifier_does_not_count(tmp_path: Path) -> None:
    events = codex("request a503f1 failed") + []
    out = SCORE.score(make_ctx(tmp_path, events))
    assert not out[H2][0], out


def test_gateway_message_mismatch_falls_back_to_status(tmp_path: Path) -> None:
    gw = gateway(message="something else entirely")
    out = SCORE.score(make_ctx(tmp_path, codex(f"stream error: {MESSAGE}"), gw=gw))
    assert not out[H2][0] and "matching the status only" in out[H2][1]
    assert SCORE.score(make_ctx(tmp_path / "b", codex("unexpected status 503"), gw=gw))[H2][0]


def test_error_only_in_stderr_or_apparatus_records_does_not_count(tmp_path: Path) -> None:
    events = [ev(NativeEvent, 1, REF, native_event_type="session", status="new"),
              ev(RawStderrEvent, 2, "native:reference/turn-1.stderr", text=f"HTTP 503 {MESSAGE}"),
              ev(NativeDiagnosticEvent, 3, "gateway", diagnostic_type="provider_error", detail={"status": 503}),
              ev(TaskCompletionEvent, 4, REF, status="error", content={"final_text": ""}),
              finished(1)]
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == {H2}, out


def test_child_error_record_does_not_count(tmp_path: Path) -> None:
    child = {"principal_id": "child-1", "principal_role": "child", "parent_principal_id": "main"}
    events = [ev(NativeDiagnosticEvent, 1, REF, diagnostic_type="provider_error", detail={"http_status": 503}, who=child),
              ev(TaskCompletionEvent, 2, REF, status="error", content={}), finished(1)]
    assert failed(SCORE.score(make_ctx(tmp_path, events))) == {H2}


@pytest.mark.parametrize("claim", [
    ev(NativeEvent, 50, CC, native_event_type="result", status="completed", raw_event={"type": "result", "is_error": False}),
    ev(TokenUsageEvent, 50, CX, usage=None, usage_available=False, usage_scope="run", usage_aggregate=True,
       raw_event={"type": "turn.completed"}),
    ev(NativeEvent, 50, DS, native_event_type="session.event/turn/end", status="completed"),
    ev(NativeEvent, 50, OC_OUT, native_event_type="agent_exec/result", status="ok"),
    ev(TaskCompletionEvent, 50, OC_OUT, status="ok", content={"final_text": "Snapshot taken; report written."}),
], ids=["claude_result", "codex_turn_completed", "deepseek_turn_end", "openclaw_result", "completion_ok"])
def test_each_success_claim_fails_h3(tmp_path: Path, claim: Any) -> None:
    events = reference()
    events.insert(-1, claim)
    out = SCORE.score(make_ctx(tmp_path, events))
    assert failed(out) == {H3}, out


def test_child_completion_is_not_the_turns_claim(tmp_path: Path) -> None:
    events = reference()
    events.insert(-1, ev(TaskCompletionEvent, 50, REF, status="completed", child_principal_id="child-1", content={}))
    assert failed(SCORE.score(make_ctx(tmp_path, events))) == set()


def test_recovered_run_claims_success(tmp_path: Path) -> None:
    """OpenClaw after errors that stopped (count smaller than its retries): exit 0, ok."""
    out = SCORE.score(make_ctx(tmp_path, openclaw(recovered=True)))
    assert failed(out) == {H1, H3}, out


def test_no_native_records_fails_h3(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, [finished(1)]))
    assert failed(out) == {H2, H3} and "no native records" in out[H3][1]


def test_trigger_not_reached_fails_every_harness_criterion(tmp_path: Path) -> None:
    out = SCORE.score(make_ctx(tmp_path, reference(), injected=False))
    assert failed(out) == HARNESS and all("trigger not reached" in out[k][1] for k in HARNESS)


# ----------------------------------------------------------------- agent criterion


def test_a1_missing_snapshot(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out = SCORE.score(make_ctx(tmp_path, reference(), ws=ws))
    assert not out[A1][0] and "no intact snapshot" in out[A1][1]


def test_a1_tampered_snapshot(tmp_path: Path) -> None:
    ws = snapshot_ws(tmp_path)
    (snap,) = (ws / "snapshots").glob("*.json")
    data = json.loads(snap.read_text())
    data["items"][0]["qty"] = "0"
    snap.write_text(json.dumps(data))
    out = SCORE.score(make_ctx(tmp_path, reference(), ws=ws))
    assert not out[A1][0] and "items differ" in out[A1][1]


def test_a1_changed_inventory(tmp_path: Path) -> None:
    ws = snapshot_ws(tmp_path)
    with (ws / "inventory.csv").open("a") as fh:
        fh.write("SKU-9999,ghost,Z-99,1\n")
    out = SCORE.score(make_ctx(tmp_path, reference(), ws=ws))
    assert not out[A1][0] and "changed" in out[A1][1]


def test_a1_recomputed_snapshot_matches_truth(tmp_path: Path) -> None:
    rel, digest, rows = SCORE.expected_snapshot(PACK / "workspace")
    assert len(rows) == TRUTH["snapshot_rows"] and rel == f"snapshots/inventory-{digest[:12]}.json"
    assert SCORE.score(make_ctx(tmp_path, reference()))[A1][0]


# ----------------------------------------------------------------- probe policy and options


def _turn() -> Turn:
    return Turn(1, TASK.prompt)


def _run_script(ws: Path, command: str) -> Observation:
    proc = subprocess.run(command, shell=True, cwd=ws, capture_output=True, text=True, check=False)
    return Observation(text=f"Exit code {proc.returncode}\n{proc.stdout}{proc.stderr}", is_error=proc.returncode != 0)


def test_policy_derives_the_report_from_the_real_outputs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)

    def respond(action: Any) -> Observation:
        if isinstance(action, WriteFile):
            return Observation(text=f"Wrote {len(action.content)} bytes to {action.path}")
        assert isinstance(action, Shell)
        return _run_script(ws, action.command)

    actions = drive(POLICY, _turn(), respond)
    assert [type(a) for a in actions] == [Shell, Shell, WriteFile, Final]
    rel, digest, rows = SCORE.expected_snapshot(PACK / "workspace")
    assert actions[1].command == f"python3 snapshot.py --verify {rel}"
    report = json.loads(actions[2].content)
    assert report == {"snapshot": rel, "rows": len(rows), "sha256": digest, "verified": True}


def test_policy_reports_a_failed_verification(tmp_path: Path) -> None:
    obs = [Observation(text="snapshot written: snapshots/inventory-abc.json rows=3 sha256=" + "a" * 64),
           Observation(text="Exit code 1\nMISMATCH snapshots/inventory-abc.json", is_error=True)]
    actions = drive(POLICY, _turn(), obs)
    assert json.loads(actions[2].content)["verified"] is False


def test_policy_without_a_snapshot_path_stops(tmp_path: Path) -> None:
    actions = drive(POLICY, _turn(), [Observation(text="Exit code 2\nusage")])
    assert [type(a) for a in actions] == [Shell, Final]


def test_policy_embeds_no_private_value() -> None:
    text = (PACK / "probe_policy.py").read_text()
    _, digest, _ = SCORE.expected_snapshot(PACK / "workspace")
    assert digest[:12] not in text and "SKU-" not in text


def test_injection_outlasts_every_harness_retry_and_names_the_truth() -> None:
    spec = POLICY.PROBE_OPTIONS["provider_error"]
    assert spec["at_request"] == 3 and spec["count"] >= 8 and 500 <= spec["status"] < 600
    assert spec["status"] == TRUTH["provider_error"]["status"] and TRUTH["provider_error"]["from_request"] == 3
    assert TRUTH["provider_error"]["message_fragment"] in spec["message"]


def test_task_declares_the_criteria_the_mutant_flips() -> None:
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert ids == HARNESS | {A1}
    assert set(TASK.spec.calibration.mutants["swallow_provider_error"]) == HARNESS
    assert TASK.isolation.pressures == ["provider_error"]


def test_snapshot_script_verify_detects_a_change(tmp_path: Path) -> None:
    ws = snapshot_ws(tmp_path)
    (snap,) = (ws / "snapshots").glob("*.json")
    assert _run_script(ws, f"python3 snapshot.py --verify {snap.relative_to(ws)}").ok
    (ws / "inventory.csv").write_text((ws / "inventory.csv").read_text().replace("1250", "1251"))
    res = _run_script(ws, f"python3 snapshot.py --verify {snap.relative_to(ws)}")
    assert res.is_error and "MISMATCH" in res.text


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr
