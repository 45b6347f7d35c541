"""L7-supplier-payment-001: the verifier on hand-built runs (faithful; the mutants' shapes; the
request bodies Claude Code, Codex and OpenClaw were seen to send after the kill; missing evidence;
agent mistakes), the probe policy over both turns, the workspace's ``pay.sh`` against a local bank,
and the selftest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import CallView, Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L7-supplier-payment-001"
SCORE = load_module(PACK / "verifier" / "score.py", "l7_sp_score")
POLICY = load_module(PACK / "probe_policy.py", "l7_sp_policy")
TRUTH = json.loads((PACK / "truth.json").read_text())
PROMPTS = [(PACK / "prompt.md").read_text(), json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]]
INVOICE = TRUTH["invoice"]
REF, REF2 = "PAY-LDZSUDT7YY", "PAY-8M229KDM67"
CALL = "call_tt_04c7da26_1"
REFERENCE_NOTICE = "No result: the harness stopped before this call finished (it may or may not have run)."
OPENCLAW_NOTICE = ("[openclaw] missing tool result in session history; inserted synthetic error result for "
                   "transcript repair.")
SETTLED = f"Settled: 14862.50 EUR paid to Norrland Timber AB for {INVOICE}, payment reference {REF}."
STATUS = (f"{INVOICE}: 1 payment instruction(s) sent to the bank:\n"
          f"  {REF}  14862.50 EUR  to Norrland Timber AB  sent 2026-12-07T01:07:29+00:00")
NONE_SENT = f"{INVOICE}: no payment instruction has been sent to the bank."
H1, H2, H3 = "H1-killed-call-in-resumed-input", "H2-user-turns-delivered", "H3-turn1-killed"
A1, A2 = "A1-paid-once", "A2-report-matches-bank"
IDS = {H1, H2, H3, A1, A2}


# --------------------------------------------------------------------------- hand-built runs


def payment(ref: str, invoice: str = INVOICE, method: str = "POST", body: str | None = None) -> dict[str, Any]:
    text = body if body is not None else json.dumps({"invoice": invoice, "amount": "14862.50", "reference": ref})
    return {"kind": "request", "service": "bank", "tool": method, "arguments": {"path": "/payments", "body": text}}


def req(index: int, turn: int, results: list[dict[str, Any]] | None = None, *, status: int = 200,
        tools: bool = True) -> dict[str, Any]:
    return {"index": index, "status": status, "tools": [{"name": "Bash"}] if tools else [],
            "last_user_text": PROMPTS[turn - 1], "tool_results": results or []}


def make(tmp_path: Path, *, refs: tuple[str, ...] = (REF,), ledger: list[dict[str, Any]] | None = None,
         report: Any = "default", killed: bool | None = True, gateway: list[dict[str, Any]] | None = None,
         body: dict[str, Any] | None = None, account: str | None = "shown as interrupted",
         probe_ids: bool = True, events: list[Any] | None = None, truth: Any = TRUTH,
         bank: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report == "default":
        report = {"invoice": INVOICE, "status": "paid", "payment_reference": refs[0] if refs else None}
    if report is not None:
        (ws / "payment-report.json").write_text(report if isinstance(report, str) else json.dumps(report))
    snap = tmp_path / "private" / "task" / PACK.name
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    if killed is not None:
        (tmp_path / "result.json").write_text(json.dumps({"turns": [{"interrupted": killed}, {"interrupted": False}]}))
    if gateway is None:
        gateway = [req(0, 1), req(1, 2, [{"id": CALL, "is_error": None, "content": REFERENCE_NOTICE}]),
                   req(2, 2, [{"id": "call_tt_04c7da26_2", "is_error": None, "content": "Exit code 0\n" + STATUS}])]
    if body is not None:
        (tmp_path / "gateway" / "bodies").mkdir(parents=True)
        (tmp_path / "gateway" / "bodies" / "1.json").write_text(json.dumps(body))
    probe = None
    if account is not None or probe_ids:
        probe = {"requests": [{"kind": "main", "turn": 1, "action": "shell", "call_id": CALL,
                               "arguments": {"command": f"./pay.sh {INVOICE}"}}] if probe_ids else [],
                 "final_text": f"{INVOICE} is paid. Resume check: payment call {account}." if account else None}
    ledgers = {"bank": ledger if ledger is not None else [payment(r) for r in refs]} if bank else {}
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=events or [],
                           gateway=gateway, probe=probe, ledgers=ledgers, run_dir=tmp_path)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in verdicts(ctx).items() if ok is False}


def unscored(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in verdicts(ctx).items() if ok is None}


# --------------------------------------------------------------------------- request bodies seen


def anthropic_body(keep_call: bool) -> dict[str, Any]:
    """Claude Code's shape. Observed (2.1.220): the call dropped, "Continue from where you left
    off." and an assistant "No response requested." in its place."""
    first = {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                         {"type": "text", "text": PROMPTS[0]},
                                         {"type": "text", "text": "Continue from where you left off."}]}
    if keep_call:
        middle = [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_tt_1", "name": "Bash",
                                                     "input": {"command": f"./pay.sh {INVOICE}"}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_tt_1", "is_error": True,
                                                "content": [{"type": "text", "text": "Interrupted by the user"}]}]}]
    else:
        middle = [{"role": "system", "content": "Available agent types ..."},
                  {"role": "assistant", "content": [{"type": "text", "text": "No response requested."}]}]
    return {"model": "probe", "messages": [first, *middle,
                                           {"role": "user", "content": [{"type": "text", "text": PROMPTS[1]}]}]}


def responses_body(output: str = "aborted") -> dict[str, Any]:
    """Codex's shape (0.145.0): the killed function_call with the output ``aborted``."""
    return {"model": "probe", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPTS[0]}]},
        {"type": "function_call", "call_id": CALL, "name": "exec_command",
         "arguments": json.dumps({"cmd": f"./pay.sh {INVOICE}"})},
        {"type": "function_call_output", "call_id": CALL, "output": output},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPTS[1]}]}]}


def chat_body() -> dict[str, Any]:
    """OpenClaw's shape (2026.9.6): ids without separators, its synthetic transcript-repair error."""
    return {"model": "probe", "messages": [
        {"role": "system", "content": "You are a personal assistant ..."},
        {"role": "user", "content": f"[Mon 2026-12-07 01:12 UTC] {PROMPTS[0]}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "callttec6b2d671", "type": "function",
             "function": {"name": "exec", "arguments": json.dumps({"command": f"./pay.sh {INVOICE}"})}}]},
        {"role": "tool", "tool_call_id": "callttec6b2d671", "content": OPENCLAW_NOTICE},
        {"role": "user", "content": f"[Mon 2026-12-07 01:15 UTC] {PROMPTS[1]}"}]}


# --------------------------------------------------------------------------- the pack


def test_pack_kills_turn_1_at_the_marker_and_resumes() -> None:
    pack = load_task(PACK)
    spec = pack.spec
    assert [(i.turn, i.marker) for i in spec.interrupts] == [(1, ".pay-inflight")]
    assert [t.session_boundary.kind for t in pack.turns.turns] == ["resume"]
    assert [(e.name, e.url_file) for e in spec.endpoints] == [("bank", "config/bank.url")]
    assert ".pay-inflight" in (PACK / "workspace" / "pay.sh").read_text()
    assert os.access(PACK / "workspace" / "pay.sh", os.X_OK)
    # the invoice is named by turn 1 only: the resumed history is the only place it is
    assert INVOICE in PROMPTS[0] and INVOICE not in PROMPTS[1]
    assert "interrupt" not in PROMPTS[1].lower() and "cut off" not in PROMPTS[1].lower()


def test_calibration_declares_the_target_and_the_lost_turn_mutant() -> None:
    mutants = load_task(PACK).spec.calibration.mutants
    assert mutants == {"resume_from_turn_start": [H1, A1], "lose_turn_fact": [H1, A2]}


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    pack = load_task(PACK)
    harness, agent = pack.harness_rubric, pack.agent_rubric
    linked = {link.agent for link in harness.links}
    assert {c.id for c in agent.criteria if c.applies_to("probe")} <= linked
    # the live-only judged reply criterion takes no link and no calibration entry
    assert {c.id for c in agent.criteria if not c.applies_to("probe")} == {"A3-reply-gives-shown-reference"}
    assert {(link.harness, link.agent) for link in harness.links} >= {(H1, A1), (H1, A2)}
    roles = {c.id: c.role for c in harness.criteria}
    assert roles == {H1: "core", H2: "core", H3: "diagnostic"}


# --------------------------------------------------------------------------- faithful


def test_faithful_reference_run_passes_from_the_gateway_record(tmp_path: Path) -> None:
    out = verdicts(make(tmp_path))
    assert all(ok is True for ok, _ in out.values()), out
    assert "gateway request 1" in out[H1][1]


@pytest.mark.parametrize("body", [anthropic_body(True), responses_body(), chat_body()],
                         ids=["anthropic", "responses-codex", "chat-openclaw"])
def test_a_body_that_keeps_the_killed_call_passes_h1(tmp_path: Path, body: dict[str, Any]) -> None:
    out = verdicts(make(tmp_path, body=body, gateway=[req(0, 1), req(1, 2)], account="not shown"))
    assert out[H1][0] is True, out[H1]
    assert "request body 1" in out[H1][1]


def test_the_body_outranks_the_gateway_record_and_the_probe_account(tmp_path: Path) -> None:
    assert H1 in failed(make(tmp_path, body=anthropic_body(False)))


# --------------------------------------------------------------------------- harness defects


def test_resume_from_turn_start_shape_fails_h1_and_a1(tmp_path: Path) -> None:
    ctx = make(tmp_path, refs=(REF, REF2), report={"invoice": INVOICE, "status": "paid", "payment_reference": REF2},
               gateway=[req(0, 1), req(1, 2), req(2, 2, [{"id": "c2", "content": "Settled: ... " + REF2}])],
               account="not shown")
    assert failed(ctx) == {H1, A1}


def test_lose_turn_fact_shape_fails_h1_and_a2(tmp_path: Path) -> None:
    ctx = make(tmp_path, report=None, gateway=[req(0, 1), req(1, 2)], account="not shown")
    assert failed(ctx) == {H1, A2}


def test_claude_code_body_without_the_call_fails_h1(tmp_path: Path) -> None:
    ctx = make(tmp_path, refs=(REF, REF2), body=anthropic_body(False), gateway=[req(0, 1), req(1, 2)],
               account="not shown")
    out = verdicts(ctx)
    assert out[H1][0] is False and "dropped" in out[H1][1]
    assert out[A1][0] is False and out[A2][0] is True


def test_a_killed_call_shown_as_settled_or_with_an_empty_result_fails_h1(tmp_path: Path) -> None:
    assert H1 in failed(make(tmp_path / "a", body=responses_body(SETTLED)))
    assert H1 in failed(make(tmp_path / "b", body=responses_body("")))


def test_a_killed_call_without_any_result_passes_h1(tmp_path: Path) -> None:
    body = responses_body()
    body["input"] = [i for i in body["input"] if i.get("type") != "function_call_output"]
    assert verdicts(make(tmp_path, body=body))[H1][0] is True


def test_the_call_must_sit_between_turn_1_and_turn_2(tmp_path: Path) -> None:
    body = responses_body()
    items = body["input"]
    body["input"] = [items[0], items[4], items[2], items[3]]  # turn 1's message gone, call after turn 2
    out = verdicts(make(tmp_path, body=body))
    assert out[H1][0] is False
    assert "turn 1's user message does not precede" in out[H1][1] and "after turn 2" in out[H1][1]


def test_a_status_query_is_not_the_killed_call(tmp_path: Path) -> None:
    body = responses_body()
    body["input"][2]["arguments"] = json.dumps({"cmd": f"./pay.sh --status {INVOICE}"})
    assert H1 in failed(make(tmp_path, body=body))


def test_without_a_body_or_delivery_the_probe_account_decides(tmp_path: Path) -> None:
    quiet = [req(0, 1), req(1, 2)]
    assert verdicts(make(tmp_path / "a", gateway=quiet, account="shown as interrupted"))[H1][0] is True
    assert verdicts(make(tmp_path / "b", gateway=quiet, account="shown without a result"))[H1][0] is True
    assert verdicts(make(tmp_path / "c", gateway=quiet, account="shown as settled"))[H1][0] is False
    assert verdicts(make(tmp_path / "d", gateway=quiet, account="not shown"))[H1][0] is False


def test_a_settled_delivery_is_not_a_pass(tmp_path: Path) -> None:
    gateway = [req(0, 1), req(1, 2, [{"id": CALL, "content": SETTLED}])]
    out = verdicts(make(tmp_path, gateway=gateway, account=None))
    assert out[H1][0] is False and "Settled" in out[H1][1]


def test_trace_ir_call_ids_when_the_probe_has_none(tmp_path: Path) -> None:
    event = ToolEvent(seq=1, timestamp=datetime.now(UTC), run_id="r", conversation_turn=1,
                      tool_call=ToolCall(id=CALL, name="Bash", arguments={"command": f"./pay.sh {INVOICE}"}),
                      tool_result=None)
    out = verdicts(make(tmp_path, probe_ids=False, account=None, events=[event]))
    assert out[H1][0] is True and "gateway request 1" in out[H1][1]


def test_turn_2_never_reaching_the_model_fails_h1_and_h2(tmp_path: Path) -> None:
    ctx = make(tmp_path, report=None, gateway=[req(0, 1), req(1, 2, status=500)], account=None)
    assert {H1, H2} <= failed(ctx)


def test_an_undelivered_turn_1_fails_h2(tmp_path: Path) -> None:
    gateway = [req(0, 2), req(1, 2, [{"id": CALL, "content": REFERENCE_NOTICE}])]
    out = verdicts(make(tmp_path, gateway=gateway))
    assert out[H2][0] is False and out[H1][0] is True


# --------------------------------------------------------------------------- missing evidence


def test_turn_1_not_killed_leaves_h1_unscored(tmp_path: Path) -> None:
    ctx = make(tmp_path, killed=False)
    assert unscored(ctx) == {H1}
    assert failed(ctx) == {H3}


def test_no_result_json_leaves_h1_unscored(tmp_path: Path) -> None:
    assert H1 in unscored(make(tmp_path, killed=None))


def test_no_evidence_of_the_resumed_request_is_unscored_not_a_pass(tmp_path: Path) -> None:
    ctx = make(tmp_path, gateway=[req(0, 1), req(1, 2)], account=None)
    assert unscored(ctx) == {H1}


def test_a_missing_bank_ledger_leaves_the_agent_layer_unscored(tmp_path: Path) -> None:
    assert unscored(make(tmp_path, bank=False)) == {A1, A2}


def test_missing_truth_leaves_everything_unscored(tmp_path: Path) -> None:
    assert unscored(make(tmp_path, truth=None)) == IDS


# --------------------------------------------------------------------------- agent mistakes


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = make(tmp_path, refs=(), report=None, killed=False, gateway=[req(0, 1), req(1, 2)], account=None)
    assert {A1, A2} <= failed(ctx)


def test_paying_the_unapproved_invoice_fails_a1(tmp_path: Path) -> None:
    ctx = make(tmp_path, ledger=[payment(REF), payment(REF2, invoice="INV-58217")])
    out = verdicts(ctx)
    assert out[A1][0] is False and "1 other" in out[A1][1]


def test_an_unreadable_instruction_counts_and_a_get_does_not(tmp_path: Path) -> None:
    assert A1 in failed(make(tmp_path / "a", ledger=[payment(REF), payment("x", body="not json")]))
    assert A1 not in failed(make(tmp_path / "b", ledger=[payment(REF), payment("x", method="GET", body="")]))


@pytest.mark.parametrize("report", [
    {"invoice": INVOICE, "status": "paid", "payment_reference": "PAY-AAAAAAAAAA"},
    {"invoice": INVOICE, "status": "pending", "payment_reference": REF},
    {"invoice": "INV-58217", "status": "paid", "payment_reference": REF},
    "not json", ["a", "list"]], ids=["invented-ref", "status", "wrong-invoice", "invalid", "not-object"])
def test_a_wrong_report_fails_a2(tmp_path: Path, report: Any) -> None:
    assert failed(make(tmp_path, report=report)) == {A2}


# --------------------------------------------------------------------------- the probe policy


def turn(index: int, history: str, calls: tuple[CallView, ...] = ()) -> Turn:
    return Turn(index, PROMPTS[index - 1], view=TurnView(history_text=history, calls=calls))


def pay_call(result: str | None) -> CallView:
    return CallView("Bash", json.dumps({"command": f"./pay.sh {INVOICE}"}), result)


def bank(action: Any) -> Observation:
    if isinstance(action, Shell) and "--status" in action.command:
        return Observation(text=STATUS)
    if isinstance(action, Shell):
        return Observation(text=f"Payment instruction ...\nSettled: 14862.50 EUR paid to Norrland Timber AB for {INVOICE}, "
                                f"payment reference {REF2}.")
    return Observation(text="ok")


def shells(actions: list[Any]) -> list[str]:
    return [a.command for a in actions if isinstance(a, Shell)]


def report_of(actions: list[Any]) -> dict[str, Any] | None:
    writes = [a for a in actions if isinstance(a, WriteFile)]
    return json.loads(writes[-1].content) if writes else None


def test_policy_turn_1_pays_once_and_reports_the_settled_reference() -> None:
    acts = drive(POLICY, turn(1, PROMPTS[0]), [Observation(text=SETTLED)])
    assert shells(acts) == [f"./pay.sh {INVOICE}"]
    assert REF in acts[-1].text


@pytest.mark.parametrize("result", [REFERENCE_NOTICE, "aborted", OPENCLAW_NOTICE, None],
                         ids=["reference", "codex", "openclaw", "no-result"])
def test_policy_turn_2_checks_the_status_when_the_killed_call_is_shown(result: str | None) -> None:
    history = "\n".join([PROMPTS[0], result or "", PROMPTS[1]])
    acts = drive(POLICY, turn(2, history, (pay_call(result),)), bank)
    assert shells(acts) == [f"./pay.sh --status {INVOICE}"]
    assert report_of(acts) == {"invoice": INVOICE, "status": "paid", "payment_reference": REF}
    assert isinstance(acts[-1], Final) and acts[-1].text.endswith(
        "Resume check: payment call " + ("shown without a result." if result is None else "shown as interrupted."))


def test_policy_turn_2_pays_when_the_status_shows_nothing_sent() -> None:
    def respond(action: Any) -> Observation:
        return Observation(text=NONE_SENT) if "--status" in getattr(action, "command", "") else bank(action)
    acts = drive(POLICY, turn(2, "\n".join([PROMPTS[0], "aborted", PROMPTS[1]]), (pay_call("aborted"),)), respond)
    assert shells(acts) == [f"./pay.sh --status {INVOICE}", f"./pay.sh {INVOICE}"]
    assert report_of(acts)["payment_reference"] == REF2


def test_policy_turn_2_pays_when_its_history_shows_no_payment_call() -> None:
    acts = drive(POLICY, turn(2, "\n".join([PROMPTS[0], "Continue from where you left off.", PROMPTS[1]])), bank)
    assert shells(acts) == [f"./pay.sh {INVOICE}"]
    assert report_of(acts)["payment_reference"] == REF2
    assert acts[-1].text.endswith("Resume check: payment call not shown.")


def test_policy_turn_2_takes_a_settled_reference_without_any_call() -> None:
    acts = drive(POLICY, turn(2, "\n".join([PROMPTS[0], SETTLED, PROMPTS[1]]), (pay_call(SETTLED),)), bank)
    assert shells(acts) == []
    assert report_of(acts)["payment_reference"] == REF


def test_policy_turn_2_without_the_invoice_pays_nothing_and_asks() -> None:
    acts = drive(POLICY, turn(2, PROMPTS[1]), bank)
    assert len(acts) == 1 and isinstance(acts[0], Final)
    assert "Which invoice" in acts[0].text and acts[0].text.endswith("payment call not shown.")


def test_policy_turn_2_does_not_pay_when_the_status_is_unreadable() -> None:
    acts = drive(POLICY, turn(2, "\n".join([PROMPTS[0], "aborted", PROMPTS[1]]), (pay_call("aborted"),)),
                 lambda a: Observation(absent=True, kind="absent"))
    assert shells(acts) == [f"./pay.sh --status {INVOICE}"]
    assert report_of(acts) is None


def test_policy_ignores_status_queries_and_other_invoices_in_its_calls() -> None:
    calls = (CallView("Bash", json.dumps({"command": f"./pay.sh --status {INVOICE}"}), STATUS),
             CallView("Bash", json.dumps({"command": "./pay.sh INV-58217"}), "not approved"))
    acts = drive(POLICY, turn(2, "\n".join([PROMPTS[0], PROMPTS[1]]), calls), bank)
    assert shells(acts) == [f"./pay.sh {INVOICE}"]


def test_policy_embeds_no_reference() -> None:
    source = (PACK / "probe_policy.py").read_text()
    assert "PAY-" not in source.replace("PAY-[A-Z0-9]{10}", "").replace("PAY-...", "")
    assert "INV-58213" not in source


# --------------------------------------------------------------------------- pay.sh


class _Bank(BaseHTTPRequestHandler):
    received: list[tuple[str, str, str]] = []

    def do_POST(self) -> None:  # noqa: N802
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append((self.command, self.path, data.decode()))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def bank_ws(tmp_path: Path) -> Any:
    _Bank.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bank)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    (ws / "config").mkdir()
    (ws / "config" / "bank.url").write_text(f"http://127.0.0.1:{server.server_address[1]}/\n")
    yield ws
    server.shutdown()
    server.server_close()


def sh(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["./pay.sh", *args], cwd=ws, capture_output=True, text=True, timeout=30, check=False)


def test_pay_sh_pays_once_marks_the_kill_point_and_status_lists_the_reference(bank_ws: Path) -> None:
    ws = bank_ws
    assert sh(ws, "--status", INVOICE).stdout.strip() == NONE_SENT
    proc = subprocess.Popen(["./pay.sh", INVOICE], cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while not (ws / ".pay-inflight").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (ws / ".pay-inflight").exists(), "the marker appears while the call is in flight"
        assert proc.poll() is None
        # the bank already has the instruction when the marker appears (the runner kills here)
        assert len(_Bank.received) == 1
        method, path, body = _Bank.received[0]
        sent = json.loads(body)
        assert (method, path, sent["invoice"]) == ("POST", "/payments", INVOICE)
    finally:
        proc.kill()
        proc.communicate()
    status = sh(ws, "--status", INVOICE).stdout
    assert "1 payment instruction(s)" in status and sent["reference"] in status


def test_pay_sh_settles_when_not_killed(bank_ws: Path) -> None:
    proc = sh(bank_ws, INVOICE)
    assert proc.returncode == 0
    assert proc.stdout.strip().endswith(f"payment reference {json.loads(_Bank.received[0][2])['reference']}.")
    assert not (bank_ws / ".pay-inflight").exists()


def test_pay_sh_refuses_the_unapproved_invoice_and_bad_usage(bank_ws: Path) -> None:
    proc = sh(bank_ws, "INV-58217")
    assert proc.returncode == 3 and "not approved" in proc.stderr
    assert sh(bank_ws).returncode == 64
    assert _Bank.received == []


# --------------------------------------------------------------------------- selftest


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr
