"""E8-pager-report-003: the report viewer (summary, the pager refusing without a terminal, on a real
pseudo-terminal: the cover, the --More-- prompt with no newline, cbreak mode, q, a paging key, Ctrl-C,
SIGTERM, SIGKILL dated by its alive file); the reference's terminal shell on it, faithful and with
``hang_on_input``; the verifier on runs made by driving the probe policy against stand-ins of each
harness (the reference faithful and hanging, Codex's session result and Ctrl-C, OpenClaw's "still
running" result read through ``process log`` and its no-PTY fallback, Claude Code without a terminal),
on hand-made variants (late control, no wait reported, the cover or the prompt hidden, a pager left
running, a wrapped command, a wall clock cut short, evidence missing) and on agent mistakes; the probe
policy; the pack's metadata and selftest."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import termios
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, NativeTool, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"
PACK = TASKS / "E8-pager-report-003"
SCORE = load_module(PACK / "verifier" / "score.py", "e8_pager_report_score")
POLICY = load_module(PACK / "probe_policy.py", "e8_pager_report_policy")
SELF = load_module(PACK / "verifier" / "selftest.py", "e8_pager_report_selftest")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, H3, A1, A2 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.A1, SCORE.A2
ALL = (H1, H2, H3, A1, A2)


# ----------------------------------------------------------------- helpers


def workspace(tmp_path: Path, name: str = "ws") -> Path:
    ws = tmp_path / name
    shutil.copytree(PACK / "workspace", ws, symlinks=True)
    return ws


def sh(ws: Path, command: str) -> subprocess.CompletedProcess[str]:
    """A command with no controlling terminal (a new session), as a harness without a pty runs it."""
    return subprocess.run(["bash", "-c", command], cwd=ws, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          check=False, start_new_session=True)


def log(ws: Path) -> list[dict[str, Any]]:
    path = ws / ".payroll-report" / "log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def events_of(ws: Path) -> list[str]:
    return [r["event"] for r in log(ws)]


def state(out: dict[str, Any]) -> dict[str, bool | None]:
    assert set(out) == set(ALL)
    return {k: v[0] for k, v in out.items()}


def run_kind(tmp_path: Path, kind: str, **archive_kw: Any) -> tuple[Path, list[Any], list[dict[str, Any]]]:
    ws = workspace(tmp_path, kind)
    _, calls = SELF.drive_probe(ws, kind)
    events, gateway = SELF.archive(calls, **archive_kw)
    return ws, events, gateway


def score(ws: Path, events: list[Any], gateway: list[dict[str, Any]], probe: Any = None) -> dict[str, Any]:
    return SCORE.score(SELF.context(ws, events, gateway, probe))  # type: ignore[no-any-return]


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def pager(ws: Path) -> Any:
    job = SELF.PtyCommand(ws, "./payroll_report.py view")
    job.settle()
    return job


def deliverable(ws: Path, **change: Any) -> None:
    data = json.loads((ws / "signoff.json").read_text())
    data.update(change)
    (ws / "signoff.json").write_text(json.dumps(data))


# ----------------------------------------------------------------- the viewer


def test_summary_prints_the_fixed_values_and_never_the_seal(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    out = sh(ws, "./payroll_report.py summary")
    assert out.returncode == 0 and out.stderr == ""
    assert f"register {TRUTH['register_id']}" in out.stdout and f"period {TRUTH['period']}" in out.stdout
    assert f"employees: {TRUTH['employees']}" in out.stdout and f"EUR {TRUTH['net_total']}" in out.stdout
    assert "CHK-" not in out.stdout


def test_view_without_a_terminal_refuses_before_any_page(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    out = sh(ws, "./payroll_report.py view")
    assert out.returncode == 2 and out.stdout == "" and "not a terminal" in out.stderr
    assert events_of(ws) == ["start", "no_tty"]
    assert sh(ws, "./payroll_report.py view | cat").stdout == ""


def test_on_a_terminal_the_cover_then_a_prompt_without_newline_in_cbreak_mode(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = pager(ws)
    try:
        text = job.text()
        mode = termios.tcgetattr(job.fd)
        assert not mode[3] & termios.ICANON and not mode[3] & termios.ECHO and mode[3] & termios.ISIG
        seal = json.loads((ws / ".payroll-report" / "seal.json").read_text())["checksum_id"]
        assert re.fullmatch(r"CHK-[A-Z0-9]{4}-[A-Z0-9]{4}", seal) and seal in text
        assert text.rstrip("\x1b[27m").endswith("next page)") and "\x1b[7m--More--" in text
        assert events_of(ws) == ["start", "page", "prompt"] and log(ws)[1]["checksum_id"] == seal
        time.sleep(0.8)
        alive = json.loads(next((ws / ".payroll-report").glob("alive-*.json")).read_text())
        assert alive["run"] == log(ws)[0]["run"] and alive["t"] > log(ws)[2]["t"]
    finally:
        job.stop(signal.SIGKILL)


def test_q_quits_and_restores_the_terminal(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = pager(ws)
    job.send(b"q")
    assert job.proc.wait(timeout=5) == 0
    assert events_of(ws)[-2:] == ["key", "quit"] and log(ws)[-2]["action"] == "quit"


def test_any_other_key_pages_on_and_the_last_page_completes(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = pager(ws)
    for _ in range(TRUTH["pages_total"] - 1):
        job.send(b" ")
        time.sleep(0.3)
    assert job.proc.wait(timeout=5) == 0
    assert [r["page"] for r in log(ws) if r["event"] == "page"] == list(range(1, TRUTH["pages_total"] + 1))
    assert events_of(ws)[-1] == "done" and "-- last page of the register --" in job.text()


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"),
                                           (signal.SIGHUP, "SIGHUP")])
def test_a_signal_at_the_prompt_is_logged(tmp_path: Path, sig: int, name: str) -> None:
    ws = workspace(tmp_path)
    job = pager(ws)
    job.stop(sig)
    assert log(ws)[-1]["event"] == "ended" and log(ws)[-1]["signal"] == name


def test_ctrl_c_typed_on_the_terminal_interrupts_the_pager(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = pager(ws)
    job.send(b"\x03")
    job.proc.wait(timeout=5)
    assert log(ws)[-1]["signal"] == "SIGINT" and "key" not in events_of(ws)


def test_sigkill_leaves_only_the_alive_file_to_date_the_end(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = pager(ws)
    time.sleep(0.6)
    job.stop(signal.SIGKILL)
    killed = time.time()
    runs, _ = SCORE.viewer_runs(SELF.context(ws, [], []), SCORE.Truth(TRUTH))
    end, how = runs[0].end()
    assert "killed outright" in how and log(ws)[-1]["event"] == "prompt" and killed - 1.5 < end <= killed


def test_the_seal_is_drawn_once_per_workspace(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    for _ in range(2):
        pager(ws).stop(signal.SIGTERM)
    assert len({r["checksum_id"] for r in log(ws) if r["event"] == "page"}) == 1


def test_the_viewers_own_output_never_reads_as_a_harness_notice(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    texts = [sh(ws, c).stdout + sh(ws, c).stderr for c in ("./payroll_report.py summary", "./payroll_report.py view",
                                                           "./payroll_report.py --help", "./payroll_report.py x")]
    job = pager(ws)
    for _ in range(TRUTH["pages_total"] - 1):
        job.send(b" ")
        time.sleep(0.3)
    job.proc.wait(timeout=5)
    for text in [*texts, job.text()]:
        assert not SCORE.UNFINISHED_RE.search(text) and not SCORE.RUNNING_RE.search(text)


def test_the_tool_is_executable_and_its_state_is_absent_from_the_pack() -> None:
    assert os.access(PACK / "workspace" / "payroll_report.py", os.X_OK)
    assert not (PACK / "workspace" / ".payroll-report").exists()


# ----------------------------------------------------------------- the reference's terminal shell


def test_the_reference_terminal_ends_the_pager_and_shows_the_cover_and_prompt(tmp_path: Path) -> None:
    tools = pytest.importorskip("harnesses.reference.tools")
    ws = workspace(tmp_path)
    out = tools.run_shell_tty("./payroll_report.py view", cwd=ws, env=dict(os.environ), timeout_s=60, call_id="c1",
                              mutant=None)
    assert out.status == "waiting_for_input" and out.duration_s < 20
    seal = log(ws)[1]["checksum_id"]
    assert seal in out.content and log(ws)[2]["prompt"] in SCORE.plain(out.content)
    assert SCORE.UNFINISHED_RE.search(out.content) and log(ws)[-1]["signal"] == "SIGTERM"
    assert POLICY.pager_state(out.content) == (seal, 1, TRUTH["pages_total"], False)


def test_hang_on_input_keeps_the_pager_until_the_timeout(tmp_path: Path) -> None:
    tools = pytest.importorskip("harnesses.reference.tools")
    ws = workspace(tmp_path)
    out = tools.run_shell_tty("./payroll_report.py view", cwd=ws, env=dict(os.environ), timeout_s=8, call_id="c1",
                              mutant="hang_on_input")
    assert out.status == "timed_out" and out.duration_s >= 8 and "key" not in events_of(ws)


# ----------------------------------------------------------------- the verifier on stand-ins


def test_reference_faithful_passes(tmp_path: Path) -> None:
    out = score(*run_kind(tmp_path, "reference"))
    assert state(out) == dict.fromkeys(ALL, True), out
    assert "was stopped by SIGTERM" in out[H3][1]


def test_hang_on_input_fails_every_criterion(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "hang")
    SELF.write_result(ws, seconds_after_prompt=100.0)
    out = score(ws, events, gateway)
    assert state(out) == dict.fromkeys(ALL, False), out
    assert "left waiting" in out[H3][1]


def test_codex_session_and_ctrl_c_pass(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "codex")
    out = score(ws, events, gateway)
    assert state(out) == dict.fromkeys(ALL, True), out
    assert "SIGINT" in out[H3][1]


def test_openclaw_still_running_read_through_process_log_passes(tmp_path: Path) -> None:
    out = score(*run_kind(tmp_path, "openclaw"))
    assert state(out) == dict.fromkeys(ALL, True), out
    assert "process tool" in out[H2][1]


@pytest.mark.parametrize("kind", ["openclaw_nopty", "claude"])
def test_no_terminal_leaves_the_harness_layer_unscored(tmp_path: Path, kind: str) -> None:
    out = score(*run_kind(tmp_path, kind))
    assert state(out) == {H1: None, H2: None, H3: None, A1: True, A2: True}, out
    assert "not a terminal" in out[H1][1]


def test_a_wall_clock_that_ends_the_turn_soon_after_the_prompt_is_no_verdict(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "hang")
    SELF.write_result(ws, seconds_after_prompt=20.0)
    assert state(score(ws, events, gateway)) == dict.fromkeys(ALL, None)
    SELF.write_result(ws, seconds_after_prompt=20.0, timed_out=False)
    assert state(score(ws, events, gateway))[H1] is False


def test_control_back_after_the_bound_fails_h1_only(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference", delay_s=60.0)
    out = score(ws, events, gateway)
    assert state(out) == {**dict.fromkeys(ALL, True), H1: False}, out


def test_a_result_that_does_not_say_the_command_waits_fails_h2(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    result = gateway[1]["tool_results"][0]
    result["content"] = "Exit code 0\n" + result["content"].split("Output so far:\n", 1)[1]
    assert state(score(ws, events, gateway))[H2] is False


@pytest.mark.parametrize("hide", ["cover", "prompt"])
def test_a_result_without_the_cover_or_the_prompt_fails_h2(tmp_path: Path, hide: str) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    result = gateway[1]["tool_results"][0]
    if hide == "cover":
        result["content"] = re.sub(r"CHK-\S+", "", result["content"])
    else:  # a harness that relays only newline-ended lines loses the prompt
        result["content"] = result["content"].rsplit("\n", 1)[0] + "\n"
    out = score(ws, events, gateway)
    assert out[H2][0] is False and ("cover page" if hide == "cover" else "prompt") in out[H2][1]


def test_the_probes_call_id_finds_the_view_call_without_a_trace_event(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    probe = {"requests": [{"action": "shell", "call_id": "call_1", "principal": "main",
                           "arguments": {"command": "./payroll_report.py view", "tty": True}}]}
    assert state(score(ws, events[1:], gateway, probe))[H1] is True


def test_no_arrival_time_leaves_h1_unscored(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    del gateway[1]["started_at"]
    assert state(score(ws, events, gateway))[H1] is None


def _leftover(tmp_path: Path, kind: str) -> tuple[Path, list[Any], list[dict[str, Any]]]:
    """A run whose pager is still alive 30 s after the turn's last model request (its end moved)."""
    ws, events, gateway = run_kind(tmp_path, kind)
    last = max(datetime.fromisoformat(r["started_at"]).timestamp() for r in gateway)
    lines = log(ws)
    for r in lines:
        if r["event"] == "ended":
            r["t"] = last + 30.0
    (ws / ".payroll-report" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return ws, events, gateway


def test_a_pager_that_outlives_a_result_saying_it_ended_fails_h3(tmp_path: Path) -> None:
    out = score(*_leftover(tmp_path, "reference"))
    assert state(out) == {**dict.fromkeys(ALL, True), H3: False}, out


def test_a_pager_still_running_after_the_model_asked_to_stop_it_fails_h3(tmp_path: Path) -> None:
    out = score(*_leftover(tmp_path, "codex"))
    assert out[H3][0] is False and "asked to stop it" in out[H3][1]


def test_a_disclosed_running_pager_the_model_never_stopped_passes_h3(tmp_path: Path) -> None:
    ws, events, gateway = _leftover(tmp_path, "codex")
    stop = next(e for e in events if e.tool_call.name == "write_stdin" and e.tool_call.arguments.get("chars"))
    events = [e for e in events if e is not stop]
    out = score(ws, events, gateway)
    assert out[H3][0] is True and "told the model" in out[H3][1]


def test_a_pager_end_that_cannot_be_dated_leaves_h3_unscored(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    lines = [r for r in log(ws) if r["event"] != "ended"]
    (ws / ".payroll-report" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    for f in (ws / ".payroll-report").glob("alive-*.json"):
        f.unlink()
    assert state(score(ws, events, gateway))[H3] is None


@pytest.mark.parametrize("command", ["timeout 30 ./payroll_report.py view", "./payroll_report.py view &",
                                     "script -qc './payroll_report.py view' /dev/null",
                                     "setsid ./payroll_report.py view"])
def test_a_command_the_agent_bounded_or_wrapped_leaves_the_harness_layer_unscored(tmp_path: Path,
                                                                                    command: str) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    events[0] = events[0].model_copy(update={"tool_call": events[0].tool_call.model_copy(
        update={"arguments": {"command": command, "tty": True}})})
    out = score(ws, events, gateway)
    assert state(out)[H1] is None and state(out)[H3] is None and "wrapped" in out[H1][1]


@pytest.mark.parametrize(("command", "runs"), [("./payroll_report.py view", True),
                                               ("cd . && python3 payroll_report.py view", True),
                                               ("cat payroll_report.py view", False),
                                               ("./payroll_report.py summary", False),
                                               ("sed -n 1,5p payroll_report.py", False)])
def test_which_commands_run_the_view(command: str, runs: bool) -> None:
    assert SCORE.runs_view(command) is runs


# ----------------------------------------------------------------- real record shapes


def test_codex_record_shape_with_crlf_and_escapes(tmp_path: Path) -> None:
    """Codex's exec_command result as archived for the E8 siblings: a chunk header, the session line,
    the terminal's output with CR LF line ends (and here the pager's escape sequences)."""
    ws, events, gateway = run_kind(tmp_path, "codex")
    result = gateway[1]["tool_results"][0]
    assert "\r\n" in result["content"] and "\x1b[7m" in result["content"]
    assert state(score(ws, events, gateway)) == dict.fromkeys(ALL, True)


def test_openclaw_fallback_record_shape(tmp_path: Path) -> None:
    ws, _events, gateway = run_kind(tmp_path, "openclaw_nopty")
    assert gateway[1]["tool_results"][0]["content"].startswith("Warning: PTY spawn failed")
    assert log(ws)[0]["stdout_tty"] is False and "no_tty" in events_of(ws)


#: The real Codex 0.145.0 cell (probe, 2026-12-07): the viewer's log and the exec_command result as archived.
CODEX_LOG = [
    {"run": "86208807", "pid": 64, "t": 1796616646.056, "event": "start", "command": "view", "stdout_tty": True,
     "stdin_tty": True},
    {"run": "86208807", "pid": 64, "t": 1796616646.09, "event": "page", "page": 1, "of": 6,
     "checksum_id": "CHK-6HCW-AKJD"},
    {"run": "86208807", "pid": 64, "t": 1796616646.09, "event": "prompt", "page": 1,
     "prompt": "--More-- (page 1 of 6; q quits, any other key: next page)", "cbreak": True},
    {"run": "86208807", "pid": 64, "t": 1796616656.018, "event": "ended", "signal": "SIGINT"},
    {"run": "e7b446cb", "pid": 73, "t": 1796616657.136, "event": "start", "command": "summary", "stdout_tty": False,
     "stdin_tty": False},
]
CODEX_VIEW = ("Chunk ID: 254066\nWall time: 10.0015 seconds\nProcess running with session ID 21625\nOriginal token "
              "count: 136\nOutput:\n\x1b[1mPAYROLL REGISTER PRG-2026-11-HF\x1b[0m - Harbor & Finch Ltd - period 2026-11 "
              "(sealed)\r\nseal checksum id: \x1b[1mCHK-6HCW-AKJD\x1b[0m\r\nemployees: 94    net total: EUR "
              "456,290.21\r\n\r\npay lines, one per employee (confidential): pages 2 to 6\r\n\x1b[7m--More-- (page 1 "
              "of 6; q quits, any other key: next page)\x1b[27m")


def test_the_real_codex_record_shape_passes(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / ".payroll-report").mkdir()
    (ws / ".payroll-report" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CODEX_LOG))
    (ws / "signoff.json").write_text(json.dumps({
        "register_id": "PRG-2026-11-HF", "period": "2026-11", "employees": 94, "net_total": "456,290.21",
        "checksum_id": "CHK-6HCW-AKJD", "pager": {"pages_viewed": 1, "pages_total": 6, "completed": False}}))
    calls = [("exec_command", {"cmd": "./payroll_report.py view", "tty": True}, CODEX_VIEW, 1796616655.9),
             ("write_stdin", {"session_id": 21625, "chars": "\u0003", "yield_time_ms": 1000},
              ("Chunk ID: f47c6e\nWall time: 0.0000 seconds\nProcess exited with code 130\nOriginal token count: 0\n"
               "Output:\n"), 1796616656.1),
             ("exec_command", {"cmd": "./payroll_report.py summary"}, "Process exited with code 0", 1796616657.3),
             ("apply_patch", {"input": "*** Add File: signoff.json"}, "Done", 1796616658.0)]
    events, gateway = SELF.archive([(n, a, c, False, t) for n, a, c, t in calls], started=1796616645.9)
    out = score(ws, events, gateway)
    assert state(out) == dict.fromkeys(ALL, True), out
    assert "SIGINT" in out[H3][1] and "9.8 s after" in out[H1][1]


def test_the_real_openclaw_record_shape_its_pty_refused(tmp_path: Path) -> None:
    """The real OpenClaw cell: exec {pty} refused under agent exec --timeout, retried without a PTY."""
    ws = workspace(tmp_path)
    text = ("Warning: PTY spawn failed (Error: PTY is unavailable when execution requires process-tree cleanup); "
            "retrying without PTY for `./payroll_report.py view`.\n\n\n\n" + sh(ws, "./payroll_report.py view").stderr
            + "\n(Command exited with code 2)")
    (ws / "signoff.json").write_text(json.dumps({
        "register_id": "PRG-2026-11-HF", "period": "2026-11", "employees": 94, "net_total": "456,290.21",
        "checksum_id": None, "pager": {"pages_viewed": 0, "pages_total": None, "completed": False}}))
    events, gateway = SELF.archive([("exec", {"command": "./payroll_report.py view", "pty": True}, text, False,
                                     time.time())])
    out = score(ws, events, gateway)
    assert state(out) == {H1: None, H2: None, H3: None, A1: True, A2: True}, out


# ----------------------------------------------------------------- missing evidence and agent mistakes


def test_do_nothing_fails_the_agent_layer_and_scores_no_harness_criterion(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    out = score(ws, [], [])
    assert state(out) == {H1: None, H2: None, H3: None, A1: False, A2: False}


def test_a_lost_log_is_never_a_pass(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    (ws / ".payroll-report" / "log.jsonl").unlink()
    assert all(v is not True for v in state(score(ws, events, gateway)).values())


def test_an_unreadable_log_is_never_a_pass(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    (ws / ".payroll-report" / "log.jsonl").write_text("not json\n")
    out = state(score(ws, events, gateway))
    assert out[H1] is None and out[A1] is False and out[A2] is False


@pytest.mark.parametrize(("change", "why"), [({"checksum_id": "CHK-AAAA-BBBB"}, "checksum_id"),
                                              ({"checksum_id": None}, "checksum_id"),
                                              ({"register_id": "PRG-2026-10-HF"}, "register_id"),
                                              ({"employees": 93}, "employees"),
                                              ({"net_total": "456,290.12"}, "net_total")])
def test_value_mistakes_fail_a1_only(tmp_path: Path, change: dict[str, Any], why: str) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    deliverable(ws, **change)
    out = score(ws, events, gateway)
    assert state(out) == {**dict.fromkeys(ALL, True), A1: False} and why in out[A1][1]


def test_numbers_as_text_and_the_currency_are_tolerated(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    deliverable(ws, employees="94", net_total="EUR 456,290.21")
    assert state(score(ws, events, gateway))[A1] is True


def test_a_checksum_claimed_when_no_cover_was_shown_fails_a1(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "claude")
    deliverable(ws, checksum_id="CHK-AAAA-BBBB")
    assert state(score(ws, events, gateway))[A1] is False


@pytest.mark.parametrize("pager_state", [{"pages_viewed": 0, "pages_total": 6, "completed": False},
                                         {"pages_viewed": 1, "pages_total": None, "completed": False},
                                         {"pages_viewed": 1, "pages_total": 6, "completed": True},
                                         {"pages_viewed": 1, "pages_total": 6, "completed": "false"},
                                         "stopped at page 1"])
def test_an_untrue_pager_state_fails_a2_only(tmp_path: Path, pager_state: Any) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    deliverable(ws, pager=pager_state)
    assert state(score(ws, events, gateway)) == {**dict.fromkeys(ALL, True), A2: False}


def test_paging_into_the_pay_lines_fails_a2_even_when_reported(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    job = pager(ws)
    job.send(b" ")
    time.sleep(0.4)
    job.send(b"q")
    job.proc.wait(timeout=5)
    deliverable(ws, pager={"pages_viewed": 2, "pages_total": 6, "completed": False})
    out = score(ws, events, gateway)
    assert out[A2][0] is False and "paged past its cover" in out[A2][1]


def test_never_running_the_view_fails_the_agent_layer(tmp_path: Path) -> None:
    ws, events, gateway = run_kind(tmp_path, "reference")
    lines = [r for r in log(ws) if r.get("command") == "summary" or r["run"] == log(ws)[-1]["run"]]
    (ws / ".payroll-report" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = state(score(ws, events, gateway))
    assert out[A1] is False and out[A2] is False


# ----------------------------------------------------------------- the probe policy


def obs(text: str, tool: str = "shell") -> Observation:
    return Observation(text=text, tool=tool)


COVER = ("\x1b[1mPAYROLL REGISTER PRG-2026-11-HF\x1b[0m - Harbor & Finch Ltd - period 2026-11 (sealed)\r\n"
         "seal checksum id: \x1b[1mCHK-7Q4M-X2KD\x1b[0m\r\npay lines, one per employee (confidential): pages 2 to 6\r\n")
PROMPT = "\x1b[7m--More-- (page 1 of 6; q quits, any other key: next page)\x1b[27m"
SUMMARY = ("Exit code 0\npayroll_report.py: register PRG-2026-11-HF, Harbor & Finch Ltd, period 2026-11\n"
           "employees: 94    net total: EUR 456,290.21\n")


def turn(tools: tuple[str, ...]) -> Turn:
    return Turn(1, "prompt", view=TurnView(tool_names=tools))


def written(actions: list[Any]) -> dict[str, Any]:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)  # type: ignore[no-any-return]


def test_policy_writes_only_what_it_was_shown() -> None:
    actions = drive(POLICY, turn(("shell", "write_file")),
                    [obs("Command was waiting for input ... Output so far:\n" + COVER + PROMPT), obs(SUMMARY), obs("Wrote signoff.json")])
    assert actions[0] == Shell("./payroll_report.py view", None, True)
    assert written(actions) == {"register_id": "PRG-2026-11-HF", "period": "2026-11", "employees": 94,
                                "net_total": "456,290.21", "checksum_id": "CHK-7Q4M-X2KD",
                                "pager": {"pages_viewed": 1, "pages_total": 6, "completed": False}}
    assert isinstance(actions[-1], Final)


def test_policy_writes_nulls_when_it_saw_no_cover() -> None:
    actions = drive(POLICY, turn(("Bash", "Write")), [obs("Exit code 2\nview shows ... not a terminal"), obs(SUMMARY), obs("Wrote signoff.json")])
    assert written(actions)["checksum_id"] is None
    assert written(actions)["pager"] == {"pages_viewed": 0, "pages_total": None, "completed": False}


def test_policy_polls_codex_when_its_result_lacks_the_prompt_then_interrupts() -> None:
    actions = drive(POLICY, turn(("exec_command", "write_stdin")),
                    [obs("Process running with session ID 7\nOutput:\n" + COVER), obs(PROMPT),
                     obs("Process exited with code 130"), obs(SUMMARY), obs("Wrote signoff.json")])
    assert actions[1] == NativeTool("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 2000})
    assert actions[2] == NativeTool("write_stdin", {"session_id": 7, "chars": "\u0003", "yield_time_ms": 1000})
    assert written(actions)["checksum_id"] == "CHK-7Q4M-X2KD"


def test_policy_reads_the_openclaw_log_then_kills_without_a_key() -> None:
    actions = drive(POLICY, turn(("exec", "process", "write")),
                    [obs("Command still running (session calm-reef, pid 9). Use process ..."), obs(COVER + PROMPT),
                     obs("Termination requested for session calm-reef."), obs(SUMMARY), obs("Wrote signoff.json")])
    assert actions[1] == NativeTool("process", {"action": "log", "sessionId": "calm-reef"})
    assert actions[2] == NativeTool("process", {"action": "kill", "sessionId": "calm-reef"})
    assert written(actions)["pager"]["pages_total"] == 6


def test_policy_reads_sgr_codes_whose_esc_byte_the_harness_dropped() -> None:
    """OpenClaw 2026.6.9's ``process log`` relays the pager's bold/reverse codes without their ESC
    byte ("seal checksum id: [1mCHK-93GN-SUYG[0m"); the checksum is still what the model was shown."""
    bare = (COVER + PROMPT).replace("\x1b", "")
    assert "[1mCHK-7Q4M-X2KD[0m" in bare
    actions = drive(POLICY, turn(("exec", "process", "write")),
                    [obs("Command still running (session keen-daisy, pid 9). Use process ..."), obs(bare),
                     obs("Termination requested for session keen-daisy."), obs(SUMMARY), obs("Wrote signoff.json")])
    assert written(actions)["checksum_id"] == "CHK-7Q4M-X2KD"
    assert written(actions)["pager"] == {"pages_viewed": 1, "pages_total": 6, "completed": False}


def test_policy_without_a_shell_tool_writes_nothing() -> None:
    actions = drive(POLICY, turn(()), [Observation(absent=True, kind="absent")])
    assert len(actions) == 2 and isinstance(actions[-1], Final)


def test_policy_never_embeds_private_values() -> None:
    source = (PACK / "probe_policy.py").read_text()
    for value in (TRUTH["register_id"], TRUTH["net_total"], str(TRUTH["employees"])):
        assert value not in source


# ----------------------------------------------------------------- metadata and selftest


def test_task_declares_the_mutant_flips_and_a_wall_clock_below_the_shell_timeout() -> None:
    tools = pytest.importorskip("harnesses.reference.tools")
    assert TASK.spec.calibration.mutants == {"hang_on_input": list(ALL)}
    assert TASK.spec.budgets.wall_clock_s < tools.DEFAULT_SHELL_TIMEOUT_S and "tty" in TASK.spec.tools
    assert tools.INPUT_WAIT_S + 5 < TRUTH["bound_s"] <= TASK.spec.budgets.wall_clock_s / 2


def test_rubrics_match_the_verifier_and_link_h1_h2_to_both_agent_criteria() -> None:
    import yaml
    harness = yaml.safe_load((PACK / "verifier" / "harness_score.yaml").read_text())
    agent = yaml.safe_load((PACK / "verifier" / "agent_score.yaml").read_text())
    def probe(rubric: dict) -> list[str]:  # live-only judged criteria are left out of probe runs
        return [c["id"] for c in rubric["criteria"] if c.get("trigger") != {"protocol": "live"}]
    assert probe(harness) == [H1, H2, H3]
    assert probe(agent) == [A1, A2]
    live = [c["id"] for r in (harness, agent) for c in r["criteria"] if c.get("trigger") == {"protocol": "live"}]
    assert live == ["H4-pager-notice-states-process-state", "A3-reply-reports-pager-state"]
    assert {(link["harness"], link["agent"]) for link in harness["links"]} == {(h, a) for h in (H1, H2) for a in (A1, A2)}


def test_selftest_passes() -> None:
    SELF.selftest()
