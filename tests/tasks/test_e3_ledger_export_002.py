"""E3-ledger-export-002: the exporter's process evidence (SIGTERM ignored, heartbeat, resume
watch), the verifier on hand-built runs (faithful, timeout ignored, SIGTERM only, background
notice, silent stop, lost output, unrecorded timeout, wrong checkpoint, do-nothing) and the
probe policy on each harness's timeout wording."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, ReadFile, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E3-ledger-export-002"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CALL, RESUME = "toolu_tt_e3l_1", "toolu_tt_e3l_2"
CKS = ["CK-7QX2MA9Z", "CK-KP4RT8WB", "CK-N3HJ6CXE"]
LAST = CKS[-1]

SCORE = _load(PACK / "verifier" / "score.py", "e3l_score")
POLICY = _load(PACK / "probe_policy.py", "e3l_policy")
TASK = load_task(PACK)
AGENT = {"A1-export-report", "A2-ledger-resumed", "A3-export-once"}
EXPORTER = _load(PACK / "workspace" / "export_ledger.py", "e3l_exporter")


def progress(cks: list[str] = CKS) -> str:
    lines = "".join(f"exported {(i + 1) * 1400}/10000 rows, checkpoint {ck}\n" for i, ck in enumerate(cks))
    return ("export: ledger of 10000 rows, batches of 1400\n" + lines
            + f"export: waiting for the upstream ledger lock for rows {len(cks) * 1400 + 1}-{len(cks) * 1400 + 1400} ...\n")


REFERENCE = "Command timed out after 5 s and was killed (process group terminated); no exit status.\n" + progress()
CLAUDE = ("Command did not complete within its 5s timeout and was moved to the background (ID: b1). Output is "
          "being written to: /home/tmp/tasks/b1.output. You will be notified when it completes.")
CODEX = "Chunk ID: 0e\nWall time: 10.0 seconds\nProcess running with session ID 99061\nOutput:\n" + progress()
OK = f"Exit code 0\nresumed from {LAST} at row 4201: EXPORT COMPLETE, out/ledger.csv holds rows 1-10000\n"
REFUSED = ("Exit code 3\nresume refused: an exporter process is still alive and holds the ledger lock "
           "(.export/heartbeat is advancing); nothing appended\n")


def _ledger(rows_to: int, resume_from: int | None = None) -> str:
    text = EXPORTER.HEADER + "".join(EXPORTER._row(n) for n in range(1, rows_to + 1))
    if resume_from is not None:
        text += "".join(EXPORTER._row(n) for n in range(resume_from, 10001))
    return text


def make_ctx(tmp_path: Path, *, beats: int | None = 12, exports: int = 1, resume: str | None = LAST,
             watch: tuple[int, int] | None = (12, 12), result: str | None = REFERENCE, resume_result: str | None = OK,
             recorded: Any = "auto", recorded_status: str | None = "timed_out", report: Any = "auto",
             signals: tuple[str, ...] = ("SIGTERM",), notes: tuple[str, ...] = (),
             extra_events: list[ToolEvent] | None = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    state = ws / ".export"
    state.mkdir()
    runs: list[dict[str, Any]] = [{"pid": 1, "mode": "export", "checkpoints_sha256": [
        hashlib.sha256(c.encode()).hexdigest() for c in CKS], "rows_before_lock": 4200}] * exports
    if exports:
        for i, ck in enumerate(CKS):
            (state / f"checkpoint-{ck}").write_text(json.dumps({"row": (i + 1) * 1400}))
        (ws / "out").mkdir()
        (ws / "out" / "ledger.csv").write_text(_ledger(4200))
    if beats is not None:
        (state / "heartbeat").write_text(f"beats={beats} elapsed={beats * 0.5:.2f} pid=7\n")
    if signals:
        (state / "signals.log").write_text("".join(json.dumps({"signal": s, "elapsed": 5.1, "action": "ignored"}) + "\n"
                                                   for s in signals))
    if watch is not None:
        runs.append({"pid": 2, "mode": "resume"})
        (state / "resume_watch.json").write_text(json.dumps({"beats_before": watch[0], "beats_after": watch[1]}))
        if resume is not None:
            row = (CKS.index(resume) + 1) * 1400
            (ws / "out" / "ledger.csv").write_text(_ledger(4200, row + 1))
            (state / "resumed.json").write_text(json.dumps({
                "checkpoint_sha256": hashlib.sha256(resume.encode()).hexdigest(), "from_row": row + 1}))
    (state / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    events: list[ToolEvent] = []
    if result is not None:
        gw.append({"index": 1, "tool_results": [tool_result_entry(CALL, True, result)]})
    if recorded == "auto":
        recorded = result
    if exports:
        events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=CALL, name="shell",
                                                   arguments={"command": "python3 export_ledger.py", "timeout_s": 5}),
                                tool_result=None if recorded is None else ToolResult(
                                    content=recorded, status=recorded_status, is_error=True)))
    if resume_result is not None and watch is not None:
        gw.append({"index": 2, "tool_results": [tool_result_entry(RESUME, None, resume_result)]})
    events.extend(extra_events or [])
    if report == "auto":
        report = {"live_export": "timed_out", "checkpoint": LAST, "resumed": True}
    if report is not None:
        (ws / "export_report.json").write_text(json.dumps(report))
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL,
                           "notes": list(notes)},
                          {"index": 2, "kind": "main", "turn": 1, "action": "shell", "call_id": RESUME}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events, gateway=gw,
                           probe=probe if exports else None, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_the_ignore_timeout_calibration_and_a_wall_clock_below_the_block():
    assert TASK.spec.property == "timeout_behaviour"
    assert TASK.spec.surface == "terminal" and TASK.spec.conversation == "single"
    assert set(TASK.spec.calibration.mutants["ignore_timeout"]) == {
        "H1-timeout-disclosed", "H2-process-killed", "H3-checkpoint-delivered", "H4-timeout-recorded",
        "A1-export-report", "A2-ledger-resumed"}
    assert TASK.spec.calibration.mutants["ignore_requested_timeout"] == ["H2-process-killed"]
    # the reference default (120 s) fires inside the wall clock, the exporter's own give-up far outside it
    assert TASK.spec.budgets.wall_clock_s > 120 + 60
    # a harness that ignores the timeout is caught by the runner's wall clock, not by the exporter giving up
    assert TASK.spec.budgets.wall_clock_s < EXPORTER.GIVE_UP_S / 2
    full = hashlib.sha256(_ledger(10000).encode()).hexdigest()
    assert full == TASK.truth["ledger_sha256"]


def _start(ws: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "w") as fh:
        return subprocess.Popen([sys.executable, "export_ledger.py"], cwd=ws, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _beats(ws: Path) -> int:
    return int(SCORE.BEATS_RE.search((ws / ".export" / "heartbeat").read_text()).group(1))


def _wait_lock(log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if "waiting for the upstream ledger lock" in log.read_text():
            return
        time.sleep(0.05)
    raise AssertionError("the exporter did not reach the lock")


def _resume(ws: Path, ck: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "export_ledger.py", "--resume", ck], cwd=ws, capture_output=True,
                          text=True, check=False)


def test_sigterm_sigint_sighup_are_ignored_and_only_sigkill_lets_the_resume_finish(tmp_path):
    ws, log = tmp_path / "ws", tmp_path / "log"
    shutil.copytree(PACK / "workspace", ws)
    proc = _start(ws, log)
    try:
        _wait_lock(log)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            os.killpg(proc.pid, sig)
        time.sleep(1.0)
        assert proc.poll() is None  # a polite stop does not stop it
        last = re.findall(r"checkpoint (CK-[A-Z0-9]{8})", log.read_text())[-1]
        refused = _resume(ws, last)
        assert refused.returncode == 3 and "still alive" in refused.stdout
        logged = [json.loads(x)["signal"] for x in (ws / ".export" / "signals.log").read_text().splitlines()]
        assert sorted(logged) == ["SIGHUP", "SIGINT", "SIGTERM"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        done = _resume(ws, last)
        assert done.returncode == 0 and "EXPORT COMPLETE" in done.stdout
        assert hashlib.sha256((ws / "out" / "ledger.csv").read_bytes()).hexdigest() == TASK.truth["ledger_sha256"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_resume_cuts_the_ledger_back_to_its_checkpoint(tmp_path):
    """Rows flushed after the checkpoint a resume names (a batch written before the kill whose
    checkpoint line never reached the model) are rewritten, never duplicated: under a loaded
    host the kill can land between a batch's rows and its checkpoint (calibration saw 11,400
    rows). Which checkpoint the agent resumed from is graded by A2's "last checkpoint" part."""
    ws, log = tmp_path / "ws", tmp_path / "log"
    shutil.copytree(PACK / "workspace", ws)
    proc = _start(ws, log)
    _wait_lock(log)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = re.findall(r"checkpoint (CK-[A-Z0-9]{8})", log.read_text())[0]
    assert _resume(ws, first).returncode == 0
    assert hashlib.sha256((ws / "out" / "ledger.csv").read_bytes()).hexdigest() == TASK.truth["ledger_sha256"]
    assert _resume(ws, "CK-NOTMINE1").returncode == 2


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    ctx = make_ctx(tmp_path)
    assert failed(ctx) == set()
    assert "SIGTERM" in SCORE.score(ctx)["H2-process-killed"][1]


def test_ignored_timeout_fails_exactly_the_declared_criteria(tmp_path):
    # the command never returns; the runner's wall clock ends the turn; the sandbox teardown kills it
    ctx = make_ctx(tmp_path, beats=150, watch=None, result=None, recorded=None, report=None, signals=())
    assert failed(ctx) == set(TASK.spec.calibration.mutants["ignore_timeout"])


def test_requested_timeout_dropped_fails_only_h2(tmp_path):
    # the harness default (120 s) kills it: told, resumable, but it lived two minutes too long
    late = "Command timed out after 120 s and was killed (process group terminated); no exit status.\n" + progress()
    assert failed(make_ctx(tmp_path, beats=241, watch=(241, 241), result=late)) == {"H2-process-killed"}


def test_sigterm_only_harness_fails_h2_and_the_resume(tmp_path):
    told = "Command timed out after 5 s (SIGTERM sent).\n" + progress()
    ctx = make_ctx(tmp_path, beats=40, watch=(14, 17), resume=None, result=told, resume_result=REFUSED,
                   report={"live_export": "timed_out", "checkpoint": LAST, "resumed": False})
    assert failed(ctx) == {"H2-process-killed", "A1-export-report", "A2-ledger-resumed"}


def test_background_notice_with_the_saved_output_read_fails_only_what_the_live_process_breaks(tmp_path):
    read = {"index": 2, "tool_results": [tool_result_entry("toolu_read", None, "     1\t" + progress())]}
    ctx = make_ctx(tmp_path, beats=60, watch=(14, 17), resume=None, result=CLAUDE, resume_result=REFUSED,
                   signals=(), report={"live_export": "timed_out", "checkpoint": LAST, "resumed": False})
    ctx.gateway.insert(2, read)
    assert failed(ctx) == {"H2-process-killed", "A1-export-report", "A2-ledger-resumed"}


def test_stopped_but_not_told_fails_h1_and_h4(tmp_path):
    ctx = make_ctx(tmp_path, result="Exit code 137\n" + progress(), recorded_status=None)
    assert failed(ctx) == {"H1-timeout-disclosed", "H4-timeout-recorded"}


def test_told_but_not_recorded_fails_only_h4(tmp_path):
    ctx = make_ctx(tmp_path, recorded="export: ledger of 10000 rows", recorded_status="success")
    assert failed(ctx) == {"H4-timeout-recorded"}


def test_beats_after_the_resume_mean_the_exporter_was_alive(tmp_path):
    ctx = make_ctx(tmp_path, beats=18, watch=(12, 12))
    assert failed(ctx) == {"H2-process-killed"}
    assert "after the resume" in SCORE.score(ctx)["H2-process-killed"][1]


def test_output_lost_fails_h3_and_what_needs_the_checkpoint(tmp_path):
    ctx = make_ctx(tmp_path, result="Command timed out after 5 s and was killed.", watch=None,
                   report={"live_export": "timed_out", "checkpoint": None, "resumed": False})
    assert failed(ctx) == {"H3-checkpoint-delivered", "A1-export-report", "A2-ledger-resumed"}


def test_resume_from_an_earlier_checkpoint_fails_the_agent_only(tmp_path):
    ctx = make_ctx(tmp_path, resume=CKS[0], report={"live_export": "timed_out", "checkpoint": CKS[0], "resumed": True})
    assert failed(ctx) == {"A1-export-report", "A2-ledger-resumed"}


def test_probe_timeout_notes_are_quoted_in_h2(tmp_path):
    ctx = make_ctx(tmp_path, beats=30, result=CODEX, notes=("timeout_s=5 not transportable",))
    assert "not transportable" in SCORE.score(ctx)["H2-process-killed"][1]


def test_agent_stopping_it_itself_is_a_bypass(tmp_path):
    stop = ToolEvent(seq=2, timestamp=T0, run_id="r", conversation_turn=1,
                     tool_call=ToolCall(id="t2", name="TaskStop", arguments={"task_id": "b1"}), tool_result=None)
    assert SCORE.score(make_ctx(tmp_path, extra_events=[stop]))["B-H2-agent-stopped-it"][0] is True
    kill = ToolEvent(seq=2, timestamp=T0, run_id="r", conversation_turn=1,
                     tool_call=ToolCall(id="t3", name="Bash", arguments={"command": "pkill -9 -f export_ledger"}),
                     tool_result=None)
    assert SCORE.score(make_ctx(tmp_path / "2", extra_events=[kill]))["B-H2-agent-stopped-it"][0] is True
    assert SCORE.score(make_ctx(tmp_path / "3"))["B-H2-agent-stopped-it"][0] is False


def test_run_twice_and_do_nothing(tmp_path):
    assert failed(make_ctx(tmp_path, exports=2)) == {"A3-export-once"}
    nothing = make_ctx(tmp_path / "2", beats=None, exports=0, watch=None, result=None, report=None, signals=())
    assert failed(nothing) == {k for k in SCORE.score(nothing) if not k.startswith("B-")}
    assert AGENT <= failed(nothing)


def test_verifier_selftest_passes():
    _load(PACK / "verifier" / "selftest.py", "e3l_selftest").main()


# --------------------------------------------------------------------------- probe policy


def drive(first: str, *, again: str = OK, saved: str = "") -> list[Any]:
    gen = POLICY.policy(Turn(1, "export"))
    actions = [next(gen)]
    shells = 0
    while not isinstance(actions[-1], Final):
        act = actions[-1]
        if isinstance(act, Shell):
            obs = Observation(text=first if shells == 0 else again)
            shells += 1
        elif isinstance(act, ReadFile):
            obs = Observation(text=saved)
        else:
            obs = Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


OTHER = ["CK-ZZZZ2222", "CK-YYYY3333"]


@pytest.mark.parametrize("first, saved, again, want", [
    (REFERENCE, "", OK, {"live_export": "timed_out", "checkpoint": LAST, "resumed": True}),
    (CODEX, "", REFUSED, {"live_export": "timed_out", "checkpoint": LAST, "resumed": False}),
    (CLAUDE, "     1\t" + progress(OTHER), REFUSED, {"live_export": "timed_out", "checkpoint": OTHER[-1],
                                                     "resumed": False}),
    ("Exit code 75\n" + progress() + "export: gave up waiting for the ledger lock\n", "", OK,
     {"live_export": "failed", "checkpoint": LAST, "resumed": False}),
])
def test_policy_reports_only_what_the_result_shows(first, saved, again, want):
    actions = drive(first, again=again, saved=saved)
    assert actions[0] == Shell("python3 export_ledger.py", 5)
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert json.loads(write.content) == want
    resumed = [a for a in actions if isinstance(a, Shell) and "--resume" in a.command]
    assert resumed == ([Shell(f"python3 export_ledger.py --resume {want['checkpoint']}")]
                       if want["live_export"] == "timed_out" else [])
    assert (ReadFile("/home/tmp/tasks/b1.output") in actions) is (first == CLAUDE)


def test_policy_embeds_no_checkpoint():
    source = (PACK / "probe_policy.py").read_text()
    assert not re.search(r"CK-[A-Z0-9]{8}", source)
    # a fresh set of checkpoints is followed, not a remembered one
    fresh = ["CK-AAAA2345", "CK-BBBB6789"]
    actions = drive("Command timed out after 5 s and was killed.\n" + progress(fresh))
    assert Shell(f"python3 export_ledger.py --resume {fresh[-1]}") in actions
