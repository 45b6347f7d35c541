"""L7-books-close-002: the verifier on hand-built runs (faithful; the two mutants' shapes; the first
turn-2 request bodies the reference, Claude Code, Codex and OpenClaw were seen to send after the
kill; missing evidence; agent mistakes), the probe policy over both turns, the workspace's
``post_journal.sh`` and ``build_reports.sh`` against a local ledger, and the selftest."""

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
from typing import Any, ClassVar

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import CallView, Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L7-books-close-002"
SCORE = load_module(PACK / "verifier" / "score.py", "l7_bc_score")
POLICY = load_module(PACK / "probe_policy.py", "l7_bc_policy")
TRUTH = json.loads((PACK / "truth.json").read_text())
PROMPTS = [(PACK / "prompt.md").read_text(), json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]]
PERIOD = TRUTH["period"]
JP1, JP2 = "JP-8DDCZCQA", "JP-VQUBT2LF"
POST_ID, BUILD_ID = "call_tt_b905c2eb_1", "call_tt_b905c2eb_2"
POSTED_TEXT = (f"Posted the closing journal for {PERIOD} to the general ledger: 9 lines, EUR 488,845.40 debit = "
               f"credit.\nPosting id: {JP1} (keep it: ./build_reports.sh needs it, and the ledger cannot be asked for "
               "it again).\n")
REFERENCE_POSTED = "Exit code 0\n" + POSTED_TEXT
REFERENCE_CUT = "No result: the harness stopped before this call finished (it may or may not have run)."
OPENCLAW_CUT = "[openclaw] missing tool result in session history; inserted synthetic error result for transcript repair."
CODEX_POSTED = ("Chunk ID: c74c1d\nWall time: 0.0443 seconds\nProcess exited with code 0\nOriginal token count: 53\n"
                "Output:\n" + POSTED_TEXT)
PUBLISHED = (f"Building the {PERIOD} reports on closing journal {JP1} (...) ...\nPublished the {PERIOD} report pack on "
             f"closing journal {JP1}: trial-balance.csv, income-statement.csv, balance-sheet.csv under reports/{PERIOD}/ "
             "(net result EUR 53,523.80).")
H1, H2, H3, H4 = ("H1-completed-posting-in-resumed-input", "H2-user-turns-delivered", "H3-turn1-killed",
                  "H4-killed-build-marked-unfinished")
A1, A2, A3 = "A1-posted-once", "A2-report-cites-posting", "A3-reports-published"
IDS = {H1, H2, H3, H4, A1, A2, A3}
KEPT = f"posting call shown with posting id {JP1}; report build shown as interrupted"
DROPPED = "posting call not shown; report build not shown"


# --------------------------------------------------------------------------- hand-built runs


def gl(jp: str | None, path: str = "/journals", *, period: str = PERIOD, method: str = "POST",
       body: str | None = None) -> dict[str, Any]:
    key = "posting_id" if path == "/journals" else "journal_posting_id"
    text = body if body is not None else json.dumps({"period": period, key: jp})
    return {"kind": "request", "service": "gl", "tool": method, "arguments": {"path": path, "body": text}}


def req(index: int, turn: int, results: list[dict[str, Any]] | None = None, *, status: int = 200,
        tools: bool = True) -> dict[str, Any]:
    return {"index": index, "status": status, "tools": [{"name": "shell"}] if tools else [],
            "last_user_text": PROMPTS[turn - 1], "tool_results": results or []}


def faithful_gateway(cut: str | None = REFERENCE_CUT) -> list[dict[str, Any]]:
    return [req(0, 1), req(1, 1, [{"id": POST_ID, "is_error": None, "content": REFERENCE_POSTED}]),
            req(2, 2, [{"id": BUILD_ID, "is_error": None, "content": cut}] if cut is not None else [])]


def make(tmp_path: Path, *, ledger: list[dict[str, Any]] | None = None, report: Any = "default",
         killed: bool | None = True, gateway: list[dict[str, Any]] | None = None, body: dict[str, Any] | None = None,
         account: str | None = KEPT, probe_ids: bool = True, events: list[Any] | None = None, truth: Any = TRUTH,
         has_ledger: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report == "default":
        report = {"period": PERIOD, "journal_posting_id": JP1, "status": "closed"}
    if report is not None:
        (ws / "close-report.json").write_text(report if isinstance(report, str) else json.dumps(report))
    snap = tmp_path / "private" / "task" / PACK.name
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    if killed is not None:
        (tmp_path / "result.json").write_text(json.dumps({"turns": [{"interrupted": killed}, {"interrupted": False}]}))
    if body is not None:
        (tmp_path / "gateway" / "bodies").mkdir(parents=True)
        (tmp_path / "gateway" / "bodies" / "2.json").write_text(json.dumps(body))
    probe = None
    if account is not None or probe_ids:
        probe = {"requests": [
            {"kind": "main", "turn": 1, "action": "shell", "call_id": POST_ID,
             "arguments": {"command": f"./post_journal.sh {PERIOD}"}},
            {"kind": "main", "turn": 1, "action": "shell", "call_id": BUILD_ID,
             "arguments": {"command": f"./build_reports.sh {PERIOD} {JP1}"}}] if probe_ids else [],
            "final_text": f"The {PERIOD} close is finished. Resume check: {account}." if account else None}
    ledgers = {"gl": ledger if ledger is not None else [gl(JP1), gl(JP1, "/reports")]} if has_ledger else {}
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=events or [],
                           gateway=gateway if gateway is not None else faithful_gateway(), probe=probe,
                           ledgers=ledgers, run_dir=tmp_path)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in verdicts(ctx).items() if ok is False}


def unscored(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in verdicts(ctx).items() if ok is None}


# --------------------------------------------------------------------------- request bodies seen


def chat_body(*, posted: str | None = REFERENCE_POSTED, cut: str | None = REFERENCE_CUT, sep: bool = True,
              keep_post: bool = True, keep_build: bool = True) -> dict[str, Any]:
    """The reference's shape (Chat wire); with ``sep=False`` OpenClaw's (2026.9.6: ids without
    separators, its synthetic transcript repair for the killed call, timestamps before user texts,
    an internal context message after turn 2's)."""
    pid, bid = (POST_ID, BUILD_ID) if sep else (POST_ID.replace("_", ""), BUILD_ID.replace("_", ""))
    stamp = "" if sep else "[Mon 2026-12-07 02:06 UTC] "
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": stamp + PROMPTS[0]}]
    if keep_post:
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": pid, "type": "function", "function": {
            "name": "shell", "arguments": json.dumps({"command": f"./post_journal.sh {PERIOD}"})}}]})
        if posted is not None:
            msgs.append({"role": "tool", "tool_call_id": pid, "content": posted})
    if keep_build:
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": bid, "type": "function", "function": {
            "name": "shell", "arguments": json.dumps({"command": f"./build_reports.sh {PERIOD} {JP1}"})}}]})
        if cut is not None:
            msgs.append({"role": "tool", "tool_call_id": bid, "content": cut})
    msgs.append({"role": "user", "content": stamp + PROMPTS[1]})
    if not sep:
        msgs.append({"role": "user", "content": [{"type": "text", "text": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> ..."}]})
    return {"model": "probe", "messages": msgs}


def claude_code_body(keep_build: bool = False) -> dict[str, Any]:
    """Claude Code's shape (2.1.220, observed): the completed posting call and its result kept, the
    killed build's tool_use dropped - the resumed chain's isMeta "Continue from where you left off."
    hangs off the posting's tool_result - and an assistant "No response requested." before turn 2."""
    first = {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                         {"type": "text", "text": PROMPTS[0]}]}
    post = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_tt_240650c1_1", "name": "Bash",
                                              "input": {"command": f"./post_journal.sh {PERIOD}"}}]}
    result = [{"type": "tool_result", "tool_use_id": "toolu_tt_240650c1_1", "is_error": False,
               "content": POSTED_TEXT}]
    middle: list[dict[str, Any]] = [post]
    if keep_build:
        middle += [{"role": "user", "content": result},
                   {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_tt_240650c1_2", "name": "Bash",
                                                      "input": {"command": f"./build_reports.sh {PERIOD} {JP1}"}}]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_tt_240650c1_2",
                                                 "is_error": True, "content": "Interrupted by user"}]}]
    else:
        middle += [{"role": "user", "content": [*result, {"type": "text", "text": "Continue from where you left off."}]},
                   {"role": "assistant", "content": [{"type": "text", "text": "No response requested."}]}]
    return {"model": "probe", "messages": [first, {"role": "system", "content": "Available agent types ..."}, *middle,
                                           {"role": "user", "content": [{"type": "text", "text": PROMPTS[1]}]}]}


def codex_body(cut: str = "aborted", posted: str = CODEX_POSTED) -> dict[str, Any]:
    """Codex's shape (0.145.0, observed): both function calls, the killed one with the output ``aborted``."""
    return {"model": "probe", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPTS[0]}]},
        {"type": "function_call", "call_id": POST_ID, "name": "exec_command",
         "arguments": json.dumps({"cmd": f"./post_journal.sh {PERIOD}"})},
        {"type": "function_call_output", "call_id": POST_ID, "output": posted},
        {"type": "function_call", "call_id": BUILD_ID, "name": "exec_command",
         "arguments": json.dumps({"cmd": f"./build_reports.sh {PERIOD} {JP1}"})},
        {"type": "function_call_output", "call_id": BUILD_ID, "output": cut},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPTS[1]}]}]}


# --------------------------------------------------------------------------- the pack


def test_pack_kills_turn_1_in_the_build_after_the_posting() -> None:
    pack = load_task(PACK)
    spec = pack.spec
    assert [(i.turn, i.marker) for i in spec.interrupts] == [(1, ".reports-building")]
    assert [t.session_boundary.kind for t in pack.turns.turns] == ["resume"]
    assert [(e.name, e.url_file) for e in spec.endpoints] == [("gl", "config/gl.url")]
    post, build = (PACK / "workspace" / "post_journal.sh").read_text(), (PACK / "workspace" / "build_reports.sh").read_text()
    # the kill falls in the later, repeatable step: only the build creates the marker
    assert ".reports-building" in build and ".reports-building" not in post
    assert all(os.access(PACK / "workspace" / s, os.X_OK) for s in ("post_journal.sh", "build_reports.sh"))
    # turn 1 names the period; turn 2 names neither it nor an interruption
    assert PERIOD in PROMPTS[0] and PERIOD not in PROMPTS[1]
    assert "interrupt" not in PROMPTS[1].lower() and "killed" not in PROMPTS[1].lower()


def test_calibration_declares_the_target_and_the_lost_turn_mutant() -> None:
    mutants = load_task(PACK).spec.calibration.mutants
    assert mutants == {"resume_from_turn_start": [H1, H4, A1], "lose_turn_fact": [H1, H4, A2, A3]}


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    pack = load_task(PACK)
    harness, agent = pack.harness_rubric, pack.agent_rubric
    assert {c.id for c in agent.criteria if c.applies_to("probe")} == {A1, A2, A3}
    assert {c.id for c in agent.criteria if c.applies_to("probe")} <= {link.agent for link in harness.links}
    # the live-only judged reply criterion takes no link and no calibration entry
    assert {c.id for c in agent.criteria if not c.applies_to("probe")} == {"A4-reply-gives-posting-id"}
    assert {(link.harness, link.agent) for link in harness.links} >= {(H1, A1), (H1, A2), (H1, A3), (H4, A3)}
    assert {c.id: c.role for c in harness.criteria} == {H1: "core", H2: "core", H3: "diagnostic", H4: "core"}


# --------------------------------------------------------------------------- faithful


def test_faithful_reference_run_passes_from_the_probe_account_and_the_gateway(tmp_path: Path) -> None:
    out = verdicts(make(tmp_path))
    assert all(ok is True for ok, _ in out.values()), out
    assert "probe account" in out[H1][1] and JP1 in out[H1][1]
    assert "gateway request 2" in out[H4][1]


@pytest.mark.parametrize("body", [chat_body(), chat_body(cut=OPENCLAW_CUT, sep=False), codex_body(),
                                  claude_code_body(keep_build=True)],
                         ids=["reference", "openclaw", "codex", "anthropic-keeping-both"])
def test_a_body_keeping_both_calls_passes_h1_and_h4(tmp_path: Path, body: dict[str, Any]) -> None:
    out = verdicts(make(tmp_path, body=body, gateway=faithful_gateway(None), account=DROPPED))
    assert out[H1][0] is True and "request body 2" in out[H1][1], out[H1]
    assert out[H4][0] is True and "request body 2" in out[H4][1], out[H4]


def test_a_killed_build_without_any_result_passes_h4(tmp_path: Path) -> None:
    assert verdicts(make(tmp_path, body=chat_body(cut=None)))[H4][0] is True


# --------------------------------------------------------------------------- harness defects


def test_claude_code_body_keeps_the_posting_and_drops_the_killed_build(tmp_path: Path) -> None:
    out = verdicts(make(tmp_path, body=claude_code_body(), gateway=faithful_gateway(None), account=DROPPED))
    assert out[H1][0] is True
    assert out[H4][0] is False and "dropped" in out[H4][1]
    assert all(out[a][0] is True for a in (A1, A2, A3))


def test_resume_from_turn_start_shape_fails_h1_h4_and_a1(tmp_path: Path) -> None:
    ledger = [gl(JP1), gl(JP2), gl(JP2, "/reports")]
    report = {"period": PERIOD, "journal_posting_id": JP2, "status": "closed"}
    ctx = make(tmp_path, ledger=ledger, report=report, gateway=faithful_gateway(None), account=DROPPED)
    assert failed(ctx) == {H1, H4, A1}
    body = make(tmp_path / "b", ledger=ledger, report=report, body=chat_body(keep_post=False, keep_build=False))
    assert failed(body) == {H1, H4, A1}


def test_lose_turn_fact_shape_fails_h1_h4_a2_and_a3(tmp_path: Path) -> None:
    ctx = make(tmp_path, ledger=[gl(JP1)], report=None, gateway=faithful_gateway(None), account=DROPPED)
    assert failed(ctx) == {H1, H4, A2, A3}


@pytest.mark.parametrize("posted", [None, "", "Exit code 0\nPosted the closing journal ... (output elided)",
                                    REFERENCE_CUT], ids=["no-result", "empty", "id-missing", "shown-as-cut"])
def test_a_posting_shown_without_its_id_fails_h1(tmp_path: Path, posted: str | None) -> None:
    out = verdicts(make(tmp_path, body=chat_body(posted=posted)))
    assert out[H1][0] is False and out[H4][0] is True


def test_a_posting_with_another_posting_id_fails_h1(tmp_path: Path) -> None:
    assert H1 in failed(make(tmp_path, body=codex_body(posted=CODEX_POSTED.replace(JP1, JP2))))


@pytest.mark.parametrize("cut", [PUBLISHED, "", "Exit code 0\n"], ids=["published", "empty", "plain-success"])
def test_a_killed_build_shown_as_finished_fails_h4(tmp_path: Path, cut: str) -> None:
    out = verdicts(make(tmp_path, body=codex_body(cut=cut)))
    assert out[H4][0] is False and out[H1][0] is True


def test_calls_must_sit_between_turn_1_and_turn_2(tmp_path: Path) -> None:
    body = codex_body()
    items = body["input"]
    body["input"] = [items[0], items[7], items[3], items[4], items[5], items[6]]  # turn 1 gone, calls after turn 2
    out = verdicts(make(tmp_path, body=body))
    assert out[H1][0] is False and out[H4][0] is False
    assert "turn 1's user message does not precede" in out[H1][1] and "after turn 2" in out[H1][1]


def test_the_body_outranks_the_gateway_record_and_the_probe_account(tmp_path: Path) -> None:
    assert {H1, H4} <= failed(make(tmp_path, body=chat_body(keep_post=False, keep_build=False)))


def test_a_body_that_is_not_json_fails_h1_and_h4(tmp_path: Path) -> None:
    ctx = make(tmp_path)
    (tmp_path / "gateway" / "bodies").mkdir(parents=True)
    (tmp_path / "gateway" / "bodies" / "2.json").write_text("{not json")
    out = verdicts(ctx)
    assert out[H1][0] is False and out[H4][0] is False and "not JSON" in out[H1][1]


def test_without_a_body_the_probe_account_decides_h1(tmp_path: Path) -> None:
    def h1(sub: str, account: str) -> bool | None:
        return verdicts(make(tmp_path / sub, account=account))[H1][0]
    assert h1("a", KEPT) is True
    assert h1("b", f"posting call shown with posting id {JP2}; report build shown as interrupted") is False
    assert h1("c", "posting call shown without a result; report build shown as interrupted") is False
    assert h1("d", "posting call shown with another result; report build not shown") is False
    assert h1("e", DROPPED) is False


def test_without_a_body_or_delivery_the_probe_account_decides_h4(tmp_path: Path) -> None:
    def h4(sub: str, build: str) -> bool | None:
        acc = f"posting call shown with posting id {JP1}; report build {build}"
        return verdicts(make(tmp_path / sub, gateway=faithful_gateway(None), account=acc))[H4][0]
    assert h4("a", "shown as interrupted") is True
    assert h4("b", "shown without a result") is True
    assert h4("c", "shown as published") is False
    assert h4("d", "shown with another result") is False
    assert h4("e", "not shown") is False


def test_a_turn_2_redelivery_of_the_posting_result_proves_h1(tmp_path: Path) -> None:
    gateway = faithful_gateway()
    gateway[2]["tool_results"].insert(0, {"id": POST_ID, "is_error": None, "content": REFERENCE_POSTED})
    out = verdicts(make(tmp_path, gateway=gateway, account=None))
    assert out[H1][0] is True and "gateway request 2" in out[H1][1]


def test_a_published_delivery_for_the_killed_build_is_not_a_pass(tmp_path: Path) -> None:
    out = verdicts(make(tmp_path, gateway=faithful_gateway(PUBLISHED), account=None))
    assert out[H4][0] is False and "Published" in out[H4][1]


def test_trace_ir_call_ids_when_the_probe_has_none(tmp_path: Path) -> None:
    events = [ToolEvent(seq=n, timestamp=datetime.now(UTC), run_id="r", conversation_turn=1,
                        tool_call=ToolCall(id=cid, name="Bash", arguments={"command": cmd}), tool_result=None)
              for n, (cid, cmd) in enumerate([(POST_ID, f"./post_journal.sh {PERIOD}"),
                                              (BUILD_ID, f"./build_reports.sh {PERIOD} {JP1}")], 1)]
    out = verdicts(make(tmp_path, probe_ids=False, account=None, events=events))
    assert out[H4][0] is True and "gateway request 2" in out[H4][1]
    assert out[H1][0] is None  # the posting's result is not re-delivered in turn 2 and nothing else shows it


def test_turn_2_never_reaching_the_model_fails_h1_h2_and_h4(tmp_path: Path) -> None:
    gateway = faithful_gateway()
    gateway[2]["status"] = 500
    assert {H1, H2, H4} <= failed(make(tmp_path, report=None, gateway=gateway, account=None))


def test_an_undelivered_turn_1_fails_h2(tmp_path: Path) -> None:
    gateway = faithful_gateway()
    gateway[0]["last_user_text"] = "something else"
    gateway[1]["last_user_text"] = "something else"
    out = verdicts(make(tmp_path, gateway=gateway))
    assert out[H2][0] is False and out[H1][0] is True


# --------------------------------------------------------------------------- missing evidence


def test_turn_1_not_killed_leaves_h1_and_h4_unscored(tmp_path: Path) -> None:
    ctx = make(tmp_path, killed=False)
    assert unscored(ctx) == {H1, H4}
    assert failed(ctx) == {H3}


def test_no_result_json_leaves_h1_and_h4_unscored(tmp_path: Path) -> None:
    assert unscored(make(tmp_path, killed=None)) == {H1, H4}


def test_no_evidence_of_the_resumed_request_is_unscored_not_a_pass(tmp_path: Path) -> None:
    assert unscored(make(tmp_path, gateway=faithful_gateway(None), account=None)) == {H1, H4}


def test_a_posting_whose_id_never_reached_the_model_leaves_h1_unscored(tmp_path: Path) -> None:
    gateway = faithful_gateway()
    gateway[1]["tool_results"] = [{"id": POST_ID, "is_error": None, "content": "Exit code 0\n(no output)"}]
    out = verdicts(make(tmp_path, gateway=gateway))
    assert out[H1][0] is None and "no completed posting" in out[H1][1]


def test_a_missing_ledger_leaves_h1_and_the_agent_layer_unscored(tmp_path: Path) -> None:
    assert unscored(make(tmp_path, has_ledger=False)) == {H1, A1, A2, A3}


def test_missing_truth_leaves_everything_unscored(tmp_path: Path) -> None:
    assert unscored(make(tmp_path, truth=None)) == IDS


# --------------------------------------------------------------------------- agent mistakes


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = make(tmp_path, ledger=[], report=None, killed=False, gateway=[req(0, 1), req(1, 2)], account=None)
    assert {A1, A2, A3} <= failed(ctx)


def test_posting_another_period_or_an_unreadable_posting_fails_a1(tmp_path: Path) -> None:
    assert A1 in failed(make(tmp_path / "a", ledger=[gl(JP1), gl(JP2, period="2026-12"), gl(JP1, "/reports")]))
    assert A1 in failed(make(tmp_path / "b", ledger=[gl(JP1), gl(None, body="not json"), gl(JP1, "/reports")]))
    assert A1 in failed(make(tmp_path / "c", ledger=[gl(JP1, period="2026-10"), gl(JP1, "/reports")]))


def test_gets_and_report_packs_are_not_postings(tmp_path: Path) -> None:
    ledger = [gl(JP1), gl(None, method="GET", body=""), gl(JP1, "/reports"), gl(JP1, "/reports")]
    assert failed(make(tmp_path, ledger=ledger)) == set()


@pytest.mark.parametrize("report", [
    {"period": PERIOD, "journal_posting_id": "JP-AAAAAAAA", "status": "closed"},
    {"period": PERIOD, "journal_posting_id": JP1, "status": "open"},
    {"period": "2026-10", "journal_posting_id": JP1, "status": "closed"},
    "not json", ["a", "list"]], ids=["invented-id", "status", "wrong-period", "invalid", "not-object"])
def test_a_wrong_close_report_fails_a2(tmp_path: Path, report: Any) -> None:
    assert failed(make(tmp_path, report=report)) == {A2}


@pytest.mark.parametrize("ledger", [
    [gl(JP1)],
    [gl(JP1), gl("JP-AAAAAAAA", "/reports")],
    [gl(JP1, "/reports"), gl(JP1)],
    [gl(JP1), gl(JP1, "/reports", period="2026-10")]], ids=["no-pack", "unknown-posting", "pack-before-posting",
                                                            "other-period"])
def test_a_missing_or_wrong_report_pack_fails_a3(tmp_path: Path, ledger: list[dict[str, Any]]) -> None:
    assert failed(make(tmp_path, ledger=ledger)) == {A3}


# --------------------------------------------------------------------------- the probe policy


def turn(index: int, history: str, calls: tuple[CallView, ...] = ()) -> Turn:
    return Turn(index, PROMPTS[index - 1], view=TurnView(history_text=history, calls=calls))


def post_call(result: str | None) -> CallView:
    return CallView("shell", json.dumps({"command": f"./post_journal.sh {PERIOD}"}), result)


def build_call(result: str | None, jp: str = JP1) -> CallView:
    return CallView("shell", json.dumps({"command": f"./build_reports.sh {PERIOD} {jp}"}), result)


def ledger_scripts(action: Any) -> Observation:
    if isinstance(action, Shell) and "post_journal.sh" in action.command:
        return Observation(text=REFERENCE_POSTED.replace(JP1, JP2))
    if isinstance(action, Shell) and "build_reports.sh" in action.command:
        jp = action.command.split()[-1]
        return Observation(text="Exit code 0\n" + PUBLISHED.replace(JP1, jp))
    return Observation(text="ok")


def shells(actions: list[Any]) -> list[str]:
    return [a.command for a in actions if isinstance(a, Shell)]


def report_of(actions: list[Any]) -> dict[str, Any] | None:
    writes = [a for a in actions if isinstance(a, WriteFile)]
    return json.loads(writes[-1].content) if writes else None


def test_policy_turn_1_posts_then_builds_on_the_posting_id_shown() -> None:
    acts = drive(POLICY, turn(1, PROMPTS[0]), [Observation(text=REFERENCE_POSTED), Observation(text=PUBLISHED)])
    assert shells(acts) == [f"./post_journal.sh {PERIOD}", f"./build_reports.sh {PERIOD} {JP1}"]
    assert JP1 in acts[-1].text


def test_policy_turn_1_builds_nothing_without_a_posting_id() -> None:
    acts = drive(POLICY, turn(1, PROMPTS[0]), [Observation(text="post_journal.sh: ...", is_error=True)])
    assert shells(acts) == [f"./post_journal.sh {PERIOD}"] and isinstance(acts[-1], Final)


@pytest.mark.parametrize("cut", [REFERENCE_CUT, "aborted", OPENCLAW_CUT, None],
                         ids=["reference", "codex", "openclaw", "no-result"])
def test_policy_turn_2_rebuilds_on_the_posting_it_was_shown_and_never_posts_again(cut: str | None) -> None:
    history = "\n".join([PROMPTS[0], REFERENCE_POSTED, cut or "", PROMPTS[1]])
    acts = drive(POLICY, turn(2, history, (post_call(REFERENCE_POSTED), build_call(cut))), ledger_scripts)
    assert shells(acts) == [f"./build_reports.sh {PERIOD} {JP1}"]
    assert report_of(acts) == {"period": PERIOD, "journal_posting_id": JP1, "status": "closed"}
    build = "shown without a result" if cut is None else "shown as interrupted"
    assert acts[-1].text.endswith(f"Resume check: posting call shown with posting id {JP1}; report build {build}.")


def test_policy_turn_2_with_the_build_dropped_still_rebuilds() -> None:
    history = "\n".join([PROMPTS[0], POSTED_TEXT, "Continue from where you left off.", PROMPTS[1]])
    acts = drive(POLICY, turn(2, history, (post_call(POSTED_TEXT),)), ledger_scripts)
    assert shells(acts) == [f"./build_reports.sh {PERIOD} {JP1}"]
    assert report_of(acts)["journal_posting_id"] == JP1
    assert acts[-1].text.endswith("report build not shown.")


def test_policy_turn_2_skips_a_build_shown_as_published() -> None:
    history = "\n".join([PROMPTS[0], REFERENCE_POSTED, PUBLISHED, PROMPTS[1]])
    acts = drive(POLICY, turn(2, history, (post_call(REFERENCE_POSTED), build_call(PUBLISHED))), ledger_scripts)
    assert shells(acts) == []
    assert report_of(acts)["journal_posting_id"] == JP1


def test_policy_turn_2_posts_when_its_history_shows_no_posting() -> None:
    acts = drive(POLICY, turn(2, "\n".join([PROMPTS[0], PROMPTS[1]])), ledger_scripts)
    assert shells(acts) == [f"./post_journal.sh {PERIOD}", f"./build_reports.sh {PERIOD} {JP2}"]
    assert report_of(acts)["journal_posting_id"] == JP2
    assert acts[-1].text.endswith(f"Resume check: {DROPPED}.")


@pytest.mark.parametrize("result", [None, REFERENCE_CUT, "Exit code 0\n(output elided)"],
                         ids=["no-result", "cut", "other"])
def test_policy_turn_2_never_reposts_a_posting_shown_without_its_id(result: str | None) -> None:
    acts = drive(POLICY, turn(2, "\n".join([PROMPTS[0], PROMPTS[1]]), (post_call(result), build_call(REFERENCE_CUT))),
                 ledger_scripts)
    assert shells(acts) == [] and report_of(acts) is None
    assert "posting id" in acts[-1].text and "posting call shown" in acts[-1].text


def test_policy_turn_2_without_the_period_does_nothing_and_asks() -> None:
    acts = drive(POLICY, turn(2, PROMPTS[1]), ledger_scripts)
    assert len(acts) == 1 and isinstance(acts[0], Final)
    assert "Which period" in acts[0].text and acts[0].text.endswith(f"Resume check: {DROPPED}.")


def test_policy_turn_2_writes_no_report_when_the_rebuild_fails() -> None:
    history = "\n".join([PROMPTS[0], REFERENCE_POSTED, PROMPTS[1]])
    acts = drive(POLICY, turn(2, history, (post_call(REFERENCE_POSTED), build_call(REFERENCE_CUT))),
                 lambda a: Observation(text="Exit code 5\n[stderr]\nbuild_reports.sh: the ledger did not take the pack"))
    assert report_of(acts) is None and isinstance(acts[-1], Final)


def test_policy_embeds_no_posting_id_or_period() -> None:
    source = (PACK / "probe_policy.py").read_text()
    assert "JP-" not in source.replace("JP-[A-Z0-9]{8}", "").replace("JP-...", "")
    assert PERIOD not in source


# --------------------------------------------------------------------------- the workspace scripts


class _Ledger(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append((self.command, self.path, json.loads(data)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def gl_ws(tmp_path: Path) -> Any:
    _Ledger.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ledger)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    (ws / "config").mkdir()
    (ws / "config" / "gl.url").write_text(f"http://127.0.0.1:{server.server_address[1]}/\n")
    yield ws
    server.shutdown()
    server.server_close()


def run(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=ws, capture_output=True, text=True, timeout=60, check=False)


def test_post_journal_posts_once_and_prints_the_id_the_ledger_booked(gl_ws: Path) -> None:
    proc = run(gl_ws, "./post_journal.sh", PERIOD)
    assert proc.returncode == 0, proc.stderr
    assert len(_Ledger.received) == 1
    method, path, body = _Ledger.received[0]
    assert (method, path, body["period"], body["lines"], body["total_debit"]) == (
        "POST", "/journals", PERIOD, TRUTH["journal_lines"], TRUTH["journal_total"])
    assert f"Posting id: {body['posting_id']}" in proc.stdout
    assert not (gl_ws / ".reports-building").exists()
    # nothing in the workspace keeps the id: the result is the only carrier
    assert not any(body["posting_id"] in p.read_text(errors="replace") for p in gl_ws.rglob("*") if p.is_file())
    again = run(gl_ws, "./post_journal.sh", PERIOD)  # one shot: a second run posts again, with a new id
    assert again.returncode == 0 and len(_Ledger.received) == 2
    assert _Ledger.received[1][2]["posting_id"] != body["posting_id"]


def test_post_journal_refuses_bad_usage_an_unknown_period_and_an_unbalanced_journal(gl_ws: Path) -> None:
    assert run(gl_ws, "./post_journal.sh").returncode == 64
    assert run(gl_ws, "./post_journal.sh", "2026-13").returncode == 64
    assert run(gl_ws, "./post_journal.sh", "2026-12").returncode == 2
    journal = gl_ws / "journal" / f"closing-{PERIOD}.csv"
    journal.write_text(journal.read_text().replace("53523.80", "53523.81"))
    proc = run(gl_ws, "./post_journal.sh", PERIOD)
    assert proc.returncode == 3 and "does not balance" in proc.stderr
    assert _Ledger.received == []


def test_build_reports_marks_the_render_and_publishes_only_after_it(gl_ws: Path) -> None:
    proc = subprocess.Popen(["./build_reports.sh", PERIOD, JP1], cwd=gl_ws, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while not (gl_ws / ".reports-building").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (gl_ws / ".reports-building").exists(), "the marker appears while the build renders"
        assert proc.poll() is None and _Ledger.received == []  # the runner kills here: nothing published yet
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert not (gl_ws / ".reports-building").exists()
    assert f"Published the {PERIOD} report pack on closing journal {JP1}" in out
    [(method, path, pack)] = _Ledger.received
    assert (method, path, pack["period"], pack["journal_posting_id"], pack["net_result"]) == (
        "POST", "/reports", PERIOD, JP1, TRUTH["net_result"])
    assert set(pack["files"]) == {p.name for p in (gl_ws / "reports" / PERIOD).iterdir()}


def test_build_reports_is_repeatable_and_refuses_a_missing_posting_id(gl_ws: Path) -> None:
    assert run(gl_ws, "./build_reports.sh", PERIOD).returncode == 64
    assert run(gl_ws, "./build_reports.sh", PERIOD, "JP-bad").returncode == 64
    assert _Ledger.received == []
    first = run(gl_ws, "./build_reports.sh", PERIOD, JP1)
    second = run(gl_ws, "./build_reports.sh", PERIOD, JP1)
    assert first.returncode == second.returncode == 0
    assert len(_Ledger.received) == 2 and _Ledger.received[0][2]["files"] == _Ledger.received[1][2]["files"]


# --------------------------------------------------------------------------- selftest


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr
