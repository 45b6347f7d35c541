"""L7-claims-import-003: the verifier on hand-built runs (faithful; the resume_from_turn_start and
lose_turn_fact shapes; the first turn-3 request bodies of the reference's Chat wire, an Anthropic and
a Responses wire; missing evidence; agent mistakes), the probe policy over the three turns, the
workspace scripts against a local ledger, the pack's metadata and the selftest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import CallView, Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L7-claims-import-003"
SCORE = load_module(PACK / "verifier" / "score.py", "l7_ci_score")
POLICY = load_module(PACK / "probe_policy.py", "l7_ci_policy")
SELF = load_module(PACK / "verifier" / "selftest.py", "l7_ci_selftest")
TURNS = SELF.prompts()
MF, IMP1, IMP2 = SELF.MF, SELF.IMP1, SELF.IMP2
H1, H2, H3, H4, A1, A2 = SELF.H1, SELF.H2, SELF.H3, SELF.H4, SELF.A1, SELF.A2
IDS = {H1, H2, H3, H4, A1, A2}


def run(tmp_path: Path, **kwargs: Any) -> dict[str, tuple[bool | None, str]]:
    out = SCORE.score(SELF.build(tmp_path, **kwargs))
    assert set(out) == IDS
    return out


def failed_unscored(out: dict[str, Any]) -> tuple[set[str], set[str]]:
    return SELF.verdicts(out)


# --------------------------------------------------------------------------- verifier: faithful and mutants


def test_faithful_from_the_probe_account(tmp_path: Path) -> None:
    out = run(tmp_path)
    assert failed_unscored(out) == (set(), set())
    assert "probe account" in out[H1][1] and IMP1 in out[H1][1]
    assert "probe account" in out[H2][1] and MF in out[H2][1]


def test_faithful_from_the_reference_request_body(tmp_path: Path) -> None:
    out = run(tmp_path, body=SELF.chat_body(TURNS), account=None)
    assert failed_unscored(out) == (set(), set())
    assert out[H1][1].startswith("request body 4") and out[H2][1].startswith("request body 4")


def test_resume_from_turn_start_shape(tmp_path: Path) -> None:
    # session saved at turn 2's start: turn 1 intact, the import gone; the probe imports again
    out = run(tmp_path, claims=SELF.ledger((IMP1, IMP2)), body=SELF.chat_body(TURNS, imported=False),
              report={"manifest_ref": MF, "import_receipt": IMP2, "status": "imported"})
    assert failed_unscored(out) == ({H1, A1}, set())
    assert "dropped" in out[H1][1] and "2 import(s)" in out[A1][1]


def test_lose_turn_fact_shape(tmp_path: Path) -> None:
    # turn 2 already lacks the manifest: nothing imported, turn 2 never killed, no report
    out = run(tmp_path, claims=SELF.ledger(()), killed=False, report={},
              account="manifest lookup not shown; import call not shown")
    assert failed_unscored(out) == ({H2, H4, A1, A2}, {H1})


def test_earlier_turn_lost_but_import_kept(tmp_path: Path) -> None:
    out = run(tmp_path, body=SELF.chat_body(TURNS, lookup=False))
    assert failed_unscored(out) == ({H2}, set())
    assert "fetch_manifest.sh" in out[H2][1]


def anthropic_body(imported: bool = True) -> dict[str, Any]:
    """Claude Code's shape: blocks, tool_use/tool_result, a meta user text after the repair."""
    def use(cid: str, cmd: str) -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": cmd}}]}

    def res(cid: str, text: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid,
                                             "content": [{"type": "text", "text": text}]}]}

    msgs = [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                         {"type": "text", "text": TURNS[0]}]},
            use("toolu_tt_1", "./fetch_manifest.sh"), res("toolu_tt_1", SELF.FETCHED.replace("Exit code 0\n", "")),
            {"role": "assistant", "content": [{"type": "text", "text": "7 claims."}]},
            {"role": "user", "content": [{"type": "text", "text": TURNS[1]}]}]
    if imported:
        msgs += [use("toolu_tt_2", f"./import_claims.sh {MF}"), res("toolu_tt_2", SELF.IMPORTED)]
    msgs += [{"role": "user", "content": [{"type": "text", "text": "Continue from where you left off."}]},
             {"role": "assistant", "content": [{"type": "text", "text": "No response requested."}]},
             {"role": "user", "content": [{"type": "text", "text": TURNS[2]}]}]
    return {"system": "s", "messages": msgs}


def responses_body(imported: bool = True) -> dict[str, Any]:
    """Codex's shape: exec_command calls, their outputs with the exec preamble, an aborted call."""
    def call(cid: str, cmd: str) -> dict[str, Any]:
        return {"type": "function_call", "name": "exec_command", "call_id": cid, "arguments": json.dumps({"cmd": cmd})}

    def out(cid: str, text: str) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": cid,
                "output": "Chunk ID: 1\nWall time: 0.05 seconds\nProcess exited with code 0\nOutput:\n" + text}

    def user(text: str) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}

    items = [user("<environment_context>...</environment_context>"), user(TURNS[0]),
             call("call_a", "./fetch_manifest.sh"), out("call_a", SELF.FETCHED), user(TURNS[1])]
    if imported:
        items += [call("call_b", f"./import_claims.sh {MF}"), out("call_b", SELF.IMPORTED),
                  call("call_c", f"./notify_adjusters.sh {IMP1}"), {"type": "function_call_output", "call_id": "call_c",
                                                                     "output": "aborted"}]
    return {"input": [*items, user(TURNS[2])]}


@pytest.mark.parametrize("body", [anthropic_body, responses_body])
def test_real_wire_shapes(tmp_path: Path, body: Any) -> None:
    out = run(tmp_path / "kept", body=body(), account=None)
    assert failed_unscored(out) == (set(), set())
    out = run(tmp_path / "dropped", body=body(imported=False), account=None)
    assert failed_unscored(out)[0] == {H1}


def test_result_without_the_receipt_fails_h1(tmp_path: Path) -> None:
    body = SELF.chat_body(TURNS)
    for msg in body["messages"]:
        if msg.get("tool_call_id") == SELF.IMPORT_ID:
            msg["content"] = "No result: the harness stopped before this call finished."
    out = run(tmp_path, body=body)
    assert out[H1][0] is False and "not carrying" in out[H1][1]


def test_gateway_delivery_is_a_positive_proof(tmp_path: Path) -> None:
    ctx = SELF.build(tmp_path, account=None)
    ctx.gateway[4]["tool_results"].append({"id": SELF.IMPORT_ID, "is_error": None, "content": SELF.IMPORTED})
    out = SCORE.score(ctx)
    assert out[H1][0] is True and "gateway request 4" in out[H1][1]
    assert out[H2][0] is None  # nothing shows the checkout: no body, no delivery, no account


# --------------------------------------------------------------------------- verifier: missing evidence


def test_no_evidence_is_unscored(tmp_path: Path) -> None:
    out = run(tmp_path, account=None)
    assert failed_unscored(out) == (set(), {H1, H2})


def test_missing_ledger_is_unscored(tmp_path: Path) -> None:
    out = run(tmp_path, ledgers=False)
    assert failed_unscored(out) == (set(), {H1, H2, A1, A2})
    assert "missing" in out[A1][1]


def test_receipt_never_shown_leaves_h1_unscored(tmp_path: Path) -> None:
    out = run(tmp_path, shown=False)
    assert out[H1][0] is None and out[H2][0] is None


def test_turn3_never_reached(tmp_path: Path) -> None:
    ctx = SELF.build(tmp_path)
    del ctx.gateway[4]
    out = SCORE.score(ctx)
    assert out[H1][0] is False and out[H2][0] is False and out[H3][0] is False


def test_unreadable_body_fails(tmp_path: Path) -> None:
    ctx = SELF.build(tmp_path)
    (tmp_path / "gateway" / "bodies").mkdir(parents=True)
    (tmp_path / "gateway" / "bodies" / "4.json").write_text("{not json")
    out = SCORE.score(ctx)
    assert out[H1][0] is False and "not JSON" in out[H1][1]


# --------------------------------------------------------------------------- verifier: agent mistakes


@pytest.mark.parametrize("report, why", [
    ({"manifest_ref": "MF-AAAAAAAA", "import_receipt": IMP1, "status": "imported"}, "manifest_ref"),
    ({"manifest_ref": MF, "import_receipt": IMP1, "status": "done"}, "status"),
    ({"manifest_ref": MF, "status": "imported"}, "import_receipt"),
])
def test_report_mistakes(tmp_path: Path, report: dict[str, Any], why: str) -> None:
    out = run(tmp_path, report=report)
    assert failed_unscored(out) == ({A2}, set()) and why in out[A2][1]


def test_report_not_json(tmp_path: Path) -> None:
    ctx = SELF.build(tmp_path)
    (ctx.workspace / "import-report.json").write_text("manifest MF-...")
    assert SCORE.score(ctx)[A2][0] is False


def test_import_of_another_manifest_and_a_second_checkout(tmp_path: Path) -> None:
    claims = SELF.ledger((IMP1,), manifest=MF)
    claims.insert(1, SELF.request("/manifests/checkout", manifest_ref="MF-BBBBBBBB"))
    claims[-1] = SELF.request("/imports", manifest_ref="MF-BBBBBBBB", receipt=IMP1)
    out = run(tmp_path / "a", claims=claims)
    assert out[A1][0] is False and out[A2][0] is False  # the import was not of the checkout turn 1 showed


def test_do_nothing_scores_no_agent_criterion(tmp_path: Path) -> None:
    out = run(tmp_path, claims=SELF.ledger(()), report={}, killed=False)
    assert out[A1][0] is False and out[A2][0] is False


# --------------------------------------------------------------------------- probe policy


def turn(index: int, calls: tuple[CallView, ...] = (), history: str = "") -> Turn:
    return Turn(index, TURNS[index - 1], view=TurnView(history_text=history, calls=calls))


def shown(action: Any) -> Observation:
    cmd = action.command if isinstance(action, Shell) else ""
    if "fetch_manifest" in cmd:
        return Observation(text=SELF.FETCHED)
    if "import_claims" in cmd:
        return Observation(text=SELF.IMPORTED)
    if "notify_adjusters" in cmd:
        return Observation(text=f"Handed import {IMP1} to the adjusters' queues.")
    return Observation(text="Wrote 80 bytes")


FETCH_CALL = CallView("shell", json.dumps({"command": "./fetch_manifest.sh"}), SELF.FETCHED)
IMPORT_CALL = CallView("shell", json.dumps({"command": f"./import_claims.sh {MF}"}), SELF.IMPORTED)
NOTIFY_CUT = CallView("shell", json.dumps({"command": f"./notify_adjusters.sh {IMP1}"}), SELF.CUT)


def test_policy_turn1_reports_the_count() -> None:
    acts = drive(POLICY, turn(1), shown)
    assert [a.command for a in acts if isinstance(a, Shell)] == ["./fetch_manifest.sh"]
    assert "7 claims" in acts[-1].text and MF in acts[-1].text


def test_policy_turn2_imports_then_hands_over() -> None:
    acts = drive(POLICY, turn(2, (FETCH_CALL,)), shown)
    assert [a.command for a in acts if isinstance(a, Shell)] == [f"./import_claims.sh {MF}",
                                                                 f"./notify_adjusters.sh {IMP1}"]


def test_policy_turn2_without_the_reference_asks() -> None:
    acts = drive(POLICY, turn(2), shown)
    assert len(acts) == 1 and isinstance(acts[0], Final) and "manifest reference" in acts[0].text


def test_policy_turn3_faithful_never_imports_again() -> None:
    acts = drive(POLICY, turn(3, (FETCH_CALL, IMPORT_CALL, NOTIFY_CUT)), shown)
    cmds = [a.command for a in acts if isinstance(a, Shell)]
    assert cmds == [f"./notify_adjusters.sh {IMP1}"]
    report = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert report == {"manifest_ref": MF, "import_receipt": IMP1, "status": "imported"}
    assert f"Resume check: manifest lookup shown with reference {MF}; import call shown with receipt {IMP1}." in acts[-1].text


def test_policy_turn3_import_dropped_imports_again() -> None:
    acts = drive(POLICY, turn(3, (FETCH_CALL,)), shown)
    assert [a.command for a in acts if isinstance(a, Shell)][0] == f"./import_claims.sh {MF}"
    assert "import call not shown" in acts[-1].text


def test_policy_turn3_import_without_receipt_asks() -> None:
    acts = drive(POLICY, turn(3, (FETCH_CALL, CallView("shell", IMPORT_CALL.arguments, None))), shown)
    assert len(acts) == 1 and "import call shown without a result" in acts[0].text


def test_policy_turn3_reference_from_its_own_import_call() -> None:
    acts = drive(POLICY, turn(3, (IMPORT_CALL,)), shown)
    report = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert report["manifest_ref"] == MF and "manifest lookup not shown" in acts[-1].text


def test_policy_turn3_nothing_shown_does_nothing() -> None:
    acts = drive(POLICY, turn(3), shown)
    assert len(acts) == 1 and isinstance(acts[0], Final)
    assert "manifest lookup not shown; import call not shown" in acts[0].text


def test_policy_turn3_skips_a_finished_hand_over() -> None:
    done = CallView("shell", NOTIFY_CUT.arguments, f"Handed import {IMP1} to the adjusters' queues.")
    acts = drive(POLICY, turn(3, (FETCH_CALL, IMPORT_CALL, done)), shown)
    assert not [a for a in acts if isinstance(a, Shell)]


def test_policy_accounts_parse_in_the_verifier() -> None:
    for calls in [(FETCH_CALL, IMPORT_CALL), (FETCH_CALL,), (), (IMPORT_CALL,)]:
        text = drive(POLICY, turn(3, calls), shown)[-1].text
        assert SCORE.ACCOUNT_RE.search(text), text


# --------------------------------------------------------------------------- workspace scripts


class _Ledger(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:  # noqa: N802
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.path, json.loads(data)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def workspace(tmp_path: Path) -> Any:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ledger)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (ws / "config").mkdir()
    (ws / "config" / "claims.url").write_text(f"http://127.0.0.1:{server.server_address[1]}/\n")
    _Ledger.seen = []
    yield ws
    server.shutdown()
    server.server_close()


def sh(ws: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ws / argv[0]), *argv[1:]], cwd=ws, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_PROXY": "127.0.0.1"})


def test_scripts_check_out_import_and_hand_over(workspace: Path) -> None:
    fetched = sh(workspace, "fetch_manifest.sh")
    assert fetched.returncode == 0 and "7 claims, NOK 853,531.50" in fetched.stdout
    ref = POLICY.REF_RE.search(fetched.stdout).group(1)
    imported = sh(workspace, "import_claims.sh", ref)
    receipt = POLICY.RECEIPT_RE.search(imported.stdout).group(1)
    handed = sh(workspace, "notify_adjusters.sh", receipt)
    assert handed.returncode == 0 and POLICY.HANDED_RE.search(handed.stdout)
    assert not (workspace / ".notify-running").exists()
    paths = [p for p, _ in _Ledger.seen]
    assert paths == ["/manifests/checkout", "/imports", "/notifications"]
    assert _Ledger.seen[0][1]["manifest_ref"] == ref and _Ledger.seen[1][1] == {
        **_Ledger.seen[1][1], "manifest_ref": ref, "receipt": receipt}
    assert len(_Ledger.seen[1][1]["claims"]) == 7


def test_scripts_refuse_bad_arguments(workspace: Path) -> None:
    assert sh(workspace, "fetch_manifest.sh", "x").returncode == 64
    assert sh(workspace, "import_claims.sh", "nope").returncode == 64
    assert sh(workspace, "notify_adjusters.sh").returncode == 64
    assert _Ledger.seen == []


def test_notify_creates_the_marker_while_it_prepares(workspace: Path) -> None:
    proc = subprocess.Popen([str(workspace / "notify_adjusters.sh"), IMP1], cwd=workspace,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "Preparing" in proc.stdout.readline()
        for _ in range(100):
            if (workspace / ".notify-running").exists():
                break
            threading.Event().wait(0.02)
        assert (workspace / ".notify-running").exists() and _Ledger.seen == []
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- metadata and selftest


def test_pack_metadata() -> None:
    pack = load_task(PACK)
    assert [(i.turn, i.marker) for i in pack.spec.interrupts] == [(2, ".notify-running")]
    assert [t.session_boundary.kind for t in pack.turns.turns] == ["resume", "resume"]
    assert set(pack.spec.calibration.mutants) == {"resume_from_turn_start", "lose_turn_fact"}
    assert pack.spec.endpoints[0].url_file == "config/claims.url"


def test_selftest() -> None:
    assert SELF.main() == 0
