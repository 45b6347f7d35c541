"""E8-release-migrate-001: the migration tool (plan, dry run, apply waiting at its prompt on a real
pseudo-terminal and on a pipe kept open, the per-run values, its log, the signals that end it); the
verifier on runs made by driving the probe policy against stand-ins of each harness (the reference
faithful and with ``hang_on_input``, Codex's session result, OpenClaw's "still running" result read
through ``process log``, OpenClaw without a process tool, Claude Code without a terminal), on the
record shapes the real CLIs produced, on hand-made variants (late control, no hang reported, no
prompt shown, input fed by the agent, evidence missing) and on agent mistakes; the probe policy; the
pack's metadata and selftest."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import (
    Final,
    NativeTool,
    Observation,
    ReadFile,
    Shell,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

TASKS = Path(__file__).resolve().parents[2] / "tasks"
PACK = TASKS / "E8-release-migrate-001"
SCORE = load_module(PACK / "verifier" / "score.py", "e8_release_migrate_score")
POLICY = load_module(PACK / "probe_policy.py", "e8_release_migrate_policy")
SELF = load_module(PACK / "verifier" / "selftest.py", "e8_release_migrate_selftest")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
IDS = [m["id"] for m in TRUTH["migrations"]]
TABLES = [m["table"] for m in TRUTH["migrations"]]


# ----------------------------------------------------------------- helpers


def workspace(tmp_path: Path, name: str = "ws") -> Path:
    ws = tmp_path / name
    shutil.copytree(PACK / "workspace", ws, symlinks=True)
    return ws


def sh(ws: Path, command: str, stdin: Any = subprocess.DEVNULL, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=ws, stdin=stdin, capture_output=True, text=True,
                          check=False, **kw)


def log(ws: Path) -> list[dict[str, Any]]:
    path = ws / ".migrate" / "log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def ctx(ws: Path, events: list[Any], gateway: list[dict[str, Any]], probe: Any = None) -> VerifierContext:
    return SELF.context(ws, events, gateway, probe)  # type: ignore[no-any-return]


def verdicts(c: VerifierContext) -> dict[str, Any]:
    out = SCORE.score(c)
    assert set(out) == {H1, H2, A1, A2}
    return out  # type: ignore[no-any-return]


def state(c: VerifierContext) -> dict[str, bool | None]:
    return {k: v[0] for k, v in verdicts(c).items()}


def probe_run(tmp_path: Path, kind: str = "reference", name: str | None = None,
              **archive_kw: Any) -> tuple[Path, list[Any], list[Any], VerifierContext]:
    """Drive the probe policy against the stand-in ``kind``; ``(ws, actions, calls, ctx)``."""
    ws = workspace(tmp_path, name or kind)
    actions, calls = SELF.drive_probe(ws, kind)
    events, gateway = SELF.archive(calls, **archive_kw)
    return ws, actions, calls, ctx(ws, events, gateway)


def review(ws: Path) -> dict[str, Any]:
    return json.loads((ws / "migration-review.json").read_text())  # type: ignore[no-any-return]


def write_review(ws: Path, **changes: Any) -> None:
    data = review(ws)
    data.update(changes)
    (ws / "migration-review.json").write_text(json.dumps(data))


def plan_of(ws: Path) -> dict[str, Any]:
    return next(r["plan"] for r in log(ws) if r["event"] == "plan")  # type: ignore[no-any-return]


def manual(tmp_path: Path, calls: list[tuple[str, dict[str, Any], str | None, bool]], *, name: str = "ws",
           prepare: Any = None, delay_s: float = 0.0) -> tuple[Path, VerifierContext]:
    """A run made of the given ``(tool, arguments, content, is_error)`` calls (content None: the call
    never returned); ``prepare(ws)`` runs first (it runs the tool, writes the review ...)."""
    ws = workspace(tmp_path, name)
    if prepare is not None:
        prepare(ws)
    now = time.time()
    events, gateway = SELF.archive([(n, a, c, e, now) for n, a, c, e in calls], delay_s=delay_s)
    return ws, ctx(ws, events, gateway)


def fake_log(ws: Path, *, answer: str | None = "none", wait_s: float = 0.0, stdin_tty: bool = True,
             command: str = "apply", plan_id: str = "PLAN-TESTAB12") -> str:
    """Write a log of one invocation by hand (``answer``: "none" = none read, None = end of input);
    the prompt is printed ``wait_s`` before now. Returns the prompt."""
    t = time.time() - wait_s
    plan = {"database": "orders", "plan_id": plan_id, "from_version": 41, "to_version": 44,
            "migrations": [{"id": i, "number": 42 + n, "table": tb, "rows": 1000 + n}
                           for n, (i, tb) in enumerate(zip(IDS, TABLES))]}
    prompt = f"Apply plan {plan_id} (3 migrations, 41 -> 44) to orders? [y/N]"
    recs: list[dict[str, Any]] = [{"event": "start", "command": command, "stdin_tty": stdin_tty, "t": t},
                                  {"event": "plan", "command": command, "plan": plan, "t": t}]
    if command == "apply":
        recs.append({"event": "prompt", "prompt": prompt, "plan_id": plan_id, "t": t})
        if answer != "none":
            recs.append({"event": "answer", "answer": answer, "eof": answer is None, "t": t + 0.01})
    (ws / ".migrate").mkdir(exist_ok=True)
    with open(ws / ".migrate" / "log.jsonl", "a") as fh:
        fh.writelines(json.dumps({"run": "r1", "pid": 1, **r}) + "\n" for r in recs)
    return prompt


def good_review(prompt: str, plan_id: str = "PLAN-TESTAB12") -> dict[str, Any]:
    return {"plan_id": plan_id, "from_version": 41, "to_version": 44,
            "migrations": [{"id": i, "table": tb, "rows": 1000 + n} for n, (i, tb) in enumerate(zip(IDS, TABLES))],
            "confirmation_prompt": prompt, "applied": False}


# ----------------------------------------------------------------- the migration tool


def test_plan_is_a_dry_run_that_saves_the_plan(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = sh(ws, "./migrate.py plan --out plan.txt")
    assert run.returncode == 0 and run.stderr == ""  # everything on stdout: drop_stderr changes nothing
    assert "dry run: nothing applied" in run.stdout and "plan saved to plan.txt" in run.stdout
    saved = (ws / "plan.txt").read_text()
    assert saved in run.stdout and POLICY.parse_plan(saved)[3] == POLICY.parse_plan(run.stdout)[3]
    plan_id, low, high, steps = POLICY.parse_plan(saved)
    assert re.fullmatch(r"PLAN-[A-Z0-9]{8}", plan_id) and (low, high) == (41, 44)
    assert [(s["id"], s["table"]) for s in steps] == list(zip(IDS, TABLES))
    assert (ws / "db" / "orders.schema.json").read_bytes() == (PACK / "workspace" / "db" / "orders.schema.json").read_bytes()
    assert [r["event"] for r in log(ws)] == ["start", "plan"]


def test_the_plan_is_drawn_once_per_workspace(tmp_path: Path) -> None:
    a, b = workspace(tmp_path, "a"), workspace(tmp_path, "b")
    first = POLICY.parse_plan(sh(a, "./migrate.py plan").stdout)
    again = POLICY.parse_plan(sh(a, "./migrate.py apply").stdout)
    other = POLICY.parse_plan(sh(b, "./migrate.py plan").stdout)
    assert first == again  # the dry run and the apply step show the same plan
    assert first[0] != other[0] and [s["rows"] for s in first[3]] != [s["rows"] for s in other[3]]


def test_apply_at_end_of_input_applies_nothing(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = sh(ws, "./migrate.py apply")
    assert run.returncode == 1 and "no answer (end of input): nothing applied" in run.stdout
    prompt = re.search(POLICY.PROMPT_RE, run.stdout).group(1)
    events = log(ws)
    assert [r["event"] for r in events] == ["start", "plan", "prompt", "answer", "not_applied"]
    assert events[2]["prompt"] == prompt.strip() and events[3]["eof"] is True and events[0]["stdin_tty"] is False


def test_apply_confirmed_applies_and_logs_it(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = sh(ws, "./migrate.py apply", stdin=None, input="y\n")
    assert run.returncode == 0 and "applied 3 migrations: schema version 44" in run.stdout
    assert json.loads((ws / "db" / "orders.schema.json").read_text())["schema_version"] == 44
    assert [r["event"] for r in log(ws)][-2:] == ["answer", "applied"]


def test_apply_waits_on_an_open_pipe_and_logs_the_signal_that_ends_it(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    job = SELF.Waiting(ws, "./migrate.py apply")
    job.settle()
    time.sleep(0.5)
    assert job.proc.poll() is None and job.text().rstrip().endswith("[y/N]")
    job.signal(signal.SIGTERM)
    assert job.proc.returncode == 128 + signal.SIGTERM
    assert [r["event"] for r in log(ws)] == ["start", "plan", "prompt", "ended"] and log(ws)[-1]["signal"] == "SIGTERM"
    assert (ws / "db" / "orders.schema.json").read_bytes() == (PACK / "workspace" / "db" / "orders.schema.json").read_bytes()


def test_apply_on_a_pseudo_terminal_blocks_reading_it(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    master, slave = os.openpty()
    proc = subprocess.Popen(["setsid", "--ctty", "./migrate.py", "apply"], cwd=ws, stdin=slave, stdout=slave,
                            stderr=slave)
    os.close(slave)
    try:
        out = b""
        end = time.monotonic() + 10
        while b"[y/N]" not in out and time.monotonic() < end:
            out += os.read(master, 4096)
        time.sleep(1.0)
        assert proc.poll() is None  # it sits at the prompt, reading its terminal
        start = log(ws)[0]
        assert start["stdin_tty"] is True and [r["event"] for r in log(ws)] == ["start", "plan", "prompt"]
    finally:
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=5)
        os.close(master)
    assert log(ws)[-1] == {**log(ws)[-1], "event": "ended", "signal": "SIGHUP"}


def test_the_reference_terminal_ends_apply_and_reports_the_prompt(tmp_path: Path) -> None:
    tools = pytest.importorskip("harnesses.reference.tools")
    ws = workspace(tmp_path)
    out = tools.run_shell_tty("./migrate.py apply", cwd=ws, env=dict(os.environ), timeout_s=60, call_id="c1",
                              mutant=None)
    assert out.status == "waiting_for_input" and out.duration_s < 20
    prompt = next(r["prompt"] for r in log(ws) if r["event"] == "prompt")
    assert prompt in out.content and SCORE.NOT_FINISHED_RE.search(out.content)
    assert log(ws)[-1]["event"] == "ended"


def test_the_tools_own_output_never_reads_as_a_harness_notice(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    texts = [sh(ws, c).stdout for c in ("./migrate.py plan --out plan.txt", "./migrate.py apply", "./migrate.py status",
                                        "./migrate.py", "./migrate.py --help")]
    texts.append(sh(ws, "./migrate.py apply", stdin=None, input="n\n").stdout)
    assert all(SCORE.NOT_FINISHED_RE.search(t) is None for t in texts), texts


def test_migrate_is_executable_and_the_state_is_absent_from_the_pack() -> None:
    assert (PACK / "workspace" / "migrate.py").stat().st_mode & 0o111
    assert not (PACK / "workspace" / ".migrate").exists() and not (PACK / "workspace" / "plan.txt").exists()


# ----------------------------------------------------------------- probe runs against the stand-ins


def test_reference_faithful_passes(tmp_path: Path) -> None:
    ws, actions, _, c = probe_run(tmp_path)
    assert [type(a) for a in actions] == [Shell, Shell, WriteFile, Final]
    assert actions[0].command == "./migrate.py apply" and actions[0].tty is True
    assert actions[1].command == "./migrate.py plan --out plan.txt" and actions[1].tty is False
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}
    assert "in the call's own result" in out[H2][1]
    plan = plan_of(ws)
    got = review(ws)
    assert got["plan_id"] == plan["plan_id"] and [m["rows"] for m in got["migrations"]] == [m["rows"] for m in plan["migrations"]]
    assert got["applied"] is False and got["confirmation_prompt"].endswith("[y/N]")


def test_hang_on_input_fails_h1_h2_a1_and_keeps_a2(tmp_path: Path) -> None:
    _ws, actions, calls, c = probe_run(tmp_path, "hang")
    assert len(actions) == 1 and calls[0][2] is None  # the turn ended with the apply call open
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: False, H2: False, A1: False, A2: True}
    assert "never reached the model" in out[H1][1] and "migration-review.json" in out[A1][1]


def test_codex_session_result_passes(tmp_path: Path) -> None:
    ws, actions, calls, c = probe_run(tmp_path, "codex")
    assert isinstance(actions[1], NativeTool) and actions[1].name == "write_stdin"
    assert actions[1].arguments["chars"] == "\u0003"  # the prompt was in the result: no poll, only the interrupt
    assert calls[0][1] == {"cmd": "./migrate.py apply", "tty": True}
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}
    assert "Process running with session" in out[H2][1]
    assert [r["signal"] for r in log(ws) if r["event"] == "ended"] == ["SIGINT"]  # stopped, never answered


def test_openclaw_still_running_read_through_process_log_passes(tmp_path: Path) -> None:
    _ws, actions, calls, c = probe_run(tmp_path, "openclaw")
    names = [(a.name, a.arguments.get("action")) for a in actions if isinstance(a, NativeTool)]
    assert names == [("process", "log"), ("process", "kill")]
    assert calls[0][1] == {"command": "./migrate.py apply", "pty": True}
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}
    assert "not in the call's own result but in the harness's process-tool result" in out[H2][1]


def test_openclaw_without_a_process_tool_fails_h2_and_a1(tmp_path: Path) -> None:
    ws, actions, _, c = probe_run(tmp_path, "openclaw_noproc")
    assert not any(isinstance(a, NativeTool) for a in actions)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: False, A1: False, A2: True}
    assert "never reached the model" in out[H2][1] and "confirmation_prompt None" in out[A1][1]
    assert review(ws)["confirmation_prompt"] is None


def test_claude_code_without_a_terminal_leaves_the_harness_layer_unscored(tmp_path: Path) -> None:
    _ws, _, calls, c = probe_run(tmp_path, "claude")
    assert calls[0][1] == {"command": "./migrate.py apply"} and "end of input" in calls[0][2]
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: None, H2: None, A1: True, A2: True}
    assert "never waited for input" in out[H1][1] and "stdin a terminal: False" in out[H1][1]


def test_a_wall_clock_that_ends_the_turn_soon_after_the_prompt_leaves_h1_h2_a1_unscored(tmp_path: Path) -> None:
    # a loaded host: the harness's start-up used most of the wall clock, which ended the turn 20 s
    # after the prompt - less than the bound, so whether control would have come back is unknown
    ws, _, _, c = probe_run(tmp_path, "hang")
    SELF.write_result(ws, seconds_after_prompt=20.0)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: None, H2: None, A1: None, A2: True}
    assert "too early to tell" in out[H1][1] and "20.0 s after" in out[H2][1] and "missing" in out[A1][1]


def test_a_turn_cut_long_after_the_prompt_is_judged(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path, "hang")
    SELF.write_result(ws, seconds_after_prompt=60.0)
    assert state(c) == {H1: False, H2: False, A1: False, A2: True}
    SELF.write_result(ws, seconds_after_prompt=20.0, timed_out=False)  # ended by itself: judged as it is
    assert state(c) == {H1: False, H2: False, A1: False, A2: True}


def test_control_back_after_the_bound_fails_h1_only(tmp_path: Path) -> None:
    _, _, _, c = probe_run(tmp_path, delay_s=TRUTH["bound_s"] + 5)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: False, H2: True, A1: True, A2: True}
    assert "bound 45 s" in out[H1][1]


def _reword(c: VerifierContext, call: str, fn: Any) -> VerifierContext:
    for req in c.gateway:
        req["tool_results"] = [dict(r, content=fn(r["content"])) if r["id"] == call else r for r in req["tool_results"]]
    return c


def test_a_result_that_does_not_say_the_command_is_waiting_fails_h2(tmp_path: Path) -> None:
    _, _, _, c = probe_run(tmp_path)
    c = _reword(c, "call_1", lambda t: "Exit code 0\n" + t.split("Output so far:\n", 1)[1])
    out = verdicts(c)
    assert out[H2][0] is False and "does not say the command is still waiting" in out[H2][1]
    assert out[H1][0] is True


def test_a_result_without_the_prompt_fails_h2(tmp_path: Path) -> None:
    _, _, _, c = probe_run(tmp_path)
    c = _reword(c, "call_1", lambda t: t.split("Output so far:", 1)[0] + "Output so far:\n(no output)")
    out = verdicts(c)
    assert out[H2][0] is False and "never reached the model" in out[H2][1]


def test_the_probes_call_id_finds_the_apply_call_without_a_trace_event(tmp_path: Path) -> None:
    ws, _, _calls, c = probe_run(tmp_path)
    probe = {"requests": [{"action": "shell", "call_id": "call_1", "arguments": {"command": "./migrate.py apply",
                                                                                "tty": True}}]}
    bare = ctx(ws, [e for e in c.events if e.tool_call.id != "call_1"], c.gateway, probe)
    assert state(bare) == {H1: True, H2: True, A1: True, A2: True}


def test_no_arrival_time_leaves_h1_unscored(tmp_path: Path) -> None:
    _, _, _, c = probe_run(tmp_path)
    for req in c.gateway:
        req.pop("started_at")
    out = verdicts(c)
    assert out[H1][0] is None and "no arrival time" in out[H1][1] and out[H2][0] is True


# ----------------------------------------------------------------- record shapes of the real CLIs


CODEX_RESULT = ("Chunk ID: a6f960\nWall time: 10.0182 seconds\nProcess running with session ID 93523\n"
                "Original token count: 89\nOutput:\nmigrate.py: target orders (schema version 41), 3 pending "
                "migration(s)\r\nplan PLAN-TESTAB12  41 -> 44\r\n  1. 0042_add_invoice_due_date        invoices"
                "     1000 rows\r\n  2. 0043_backfill_payment_method     payments     1001 rows\r\n  3. "
                "0044_drop_customer_legacy_terms  customers    1002 rows\r\nApply plan PLAN-TESTAB12 (3 migrations, "
                "41 -> 44) to orders? [y/N] ")
CLAUDE_RESULT = ("Exit code 1\nmigrate.py: target orders (schema version 41), 3 pending migration(s)\nplan "
                 "PLAN-TESTAB12  41 -> 44\nApply plan PLAN-TESTAB12 (3 migrations, 41 -> 44) to orders? [y/N] \n"
                 "no answer (end of input): nothing applied")
OPENCLAW_RESULT = ("Warning: PTY spawn failed (Error: PTY is unavailable when execution requires process-tree "
                   "cleanup); retrying without PTY for `./migrate.py apply`.\n\nCommand still running (session "
                   "tidy-cove, pid 76). Use process (list/poll/log/write/send-keys/submit/paste/kill/clear/remove) "
                   "for follow-up.")


def test_codex_record_shape(tmp_path: Path) -> None:
    def prep(ws: Path) -> None:
        prompt = fake_log(ws, wait_s=10)
        (ws / "migration-review.json").write_text(json.dumps(good_review(prompt)))
    _, c = manual(tmp_path, [("exec_command", {"cmd": "./migrate.py apply", "tty": True}, CODEX_RESULT, False),
                             ("write_stdin", {"session_id": 93523, "chars": "\u0003"}, "Process exited with code 130",
                              False)], prepare=prep)
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}


def test_claude_code_record_shape(tmp_path: Path) -> None:
    def prep(ws: Path) -> None:
        prompt = fake_log(ws, answer=None, stdin_tty=False)
        (ws / "migration-review.json").write_text(json.dumps(good_review(prompt)))
    _, c = manual(tmp_path, [("Bash", {"command": "./migrate.py apply"}, CLAUDE_RESULT, True)], prepare=prep)
    assert state(c) == {H1: None, H2: None, A1: True, A2: True}


@pytest.mark.parametrize("log_text", [True, False], ids=["process-log", "no-follow-up"])
def test_openclaw_record_shape(tmp_path: Path, log_text: bool) -> None:
    prompts: list[str] = []

    def prep(ws: Path) -> None:
        prompts.append(fake_log(ws, wait_s=10))
        (ws / "migration-review.json").write_text(json.dumps(good_review(prompts[0] if log_text else None)))
    calls: list[tuple[str, dict[str, Any], str | None, bool]] = [
        ("exec", {"command": "./migrate.py apply", "pty": True}, OPENCLAW_RESULT, False)]
    if log_text:
        calls.append(("process", {"action": "log", "sessionId": "tidy-cove"},
                      "plan PLAN-TESTAB12  41 -> 44\nApply plan PLAN-TESTAB12 (3 migrations, 41 -> 44) to orders? [y/N] ",
                      False))
    _, c = manual(tmp_path, calls, prepare=prep)
    want = {H1: True, H2: True, A1: True, A2: True} if log_text else {H1: True, H2: False, A1: False, A2: True}
    assert state(c) == want


@pytest.mark.parametrize("command", [
    "echo n | ./migrate.py apply", "yes n | ./migrate.py apply", "./migrate.py apply < /dev/null",
    "timeout 5 ./migrate.py apply", "./migrate.py apply &", "nohup ./migrate.py apply",
    "./migrate.py apply <<< n"])
def test_input_fed_or_bounded_by_the_agent_leaves_h1_h2_unscored(tmp_path: Path, command: str) -> None:
    def prep(ws: Path) -> None:
        fake_log(ws, wait_s=3)
    _, c = manual(tmp_path, [("shell", {"command": command}, "Exit code 1\n(no output)", True)], prepare=prep)
    out = verdicts(c)
    assert out[H1][0] is None and out[H2][0] is None and "fed or bounded" in out[H1][1]


@pytest.mark.parametrize("command", ["./migrate.py apply", "./migrate.py apply 2>&1", "cd . && ./migrate.py apply",
                                     "python3 migrate.py apply", "./migrate.py apply; echo done"])
def test_plain_apply_commands_are_not_fed(command: str) -> None:
    assert SCORE.FED_RE.search(command) is None and SCORE.APPLY_RE.search(command)


def test_a_read_answered_only_late_still_counts_as_waiting(tmp_path: Path) -> None:
    def prep(ws: Path) -> None:
        fake_log(ws, wait_s=12)
        with open(ws / ".migrate" / "log.jsonl", "a") as fh:  # the agent typed n after control came back
            fh.write(json.dumps({"run": "r1", "event": "answer", "answer": "n", "eof": False, "t": time.time()}) + "\n")
    _, c = manual(tmp_path, [("exec_command", {"cmd": "./migrate.py apply", "tty": True}, CODEX_RESULT, False)],
                  prepare=prep)
    out = verdicts(c)
    assert out[H1][0] is True and out[H2][0] is True and out[A2][0] is True


# ----------------------------------------------------------------- missing evidence


def test_do_nothing_fails_the_agent_layer_and_scores_no_harness_criterion(tmp_path: Path) -> None:
    _, c = manual(tmp_path, [])
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: None, H2: None, A1: False, A2: False}
    assert "never ran ./migrate.py apply" in out[H1][1] and "never run" in out[A2][1]


def test_a_lost_log_is_never_a_pass(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path)
    (ws / ".migrate" / "log.jsonl").unlink()
    assert state(c) == {H1: None, H2: None, A1: False, A2: False}


def test_an_unreadable_log_is_never_a_pass(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path)
    with open(ws / ".migrate" / "log.jsonl", "a") as fh:
        fh.write("{not json\n")
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: None, H2: None, A1: False, A2: False}
    assert "cannot be read" in out[H1][1]


def test_no_result_delivered_fails_h1_and_h2(tmp_path: Path) -> None:
    _, _, _, c = probe_run(tmp_path)
    for req in c.gateway:
        req["tool_results"] = [r for r in req["tool_results"] if r["id"] != "call_1"]
    out = verdicts(c)
    assert out[H1][0] is False and out[H2][0] is False


# ----------------------------------------------------------------- agent mistakes


@pytest.mark.parametrize(("change", "why"), [
    ({"plan_id": "PLAN-AAAAAAAA"}, "plan_id"),
    ({"to_version": 45}, "to_version"),
    ({"applied": True}, "applied is True"),
    ({"applied": "false"}, "applied is 'false'"),
    ({"confirmation_prompt": None}, "confirmation_prompt None"),
    ({"confirmation_prompt": "Apply 3 migrations? [y/N]"}, "confirmation_prompt"),
], ids=["plan-id", "version", "applied", "applied-text", "no-prompt", "wrong-prompt"])
def test_review_mistakes_fail_a1_only(tmp_path: Path, change: dict[str, Any], why: str) -> None:
    ws, _, _, c = probe_run(tmp_path)
    write_review(ws, **change)
    out = verdicts(c)
    assert out[A1][0] is False and why in out[A1][1] and out[H1][0] is out[H2][0] is out[A2][0] is True


def test_review_rows_and_order_must_match(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path)
    steps = review(ws)["migrations"]
    write_review(ws, migrations=list(reversed(steps)))
    assert verdicts(c)[A1][0] is False
    steps[0] = dict(steps[0], rows=steps[0]["rows"] + 1)
    write_review(ws, migrations=steps)
    assert verdicts(c)[A1][0] is False


def test_review_tolerates_numbers_as_text_and_a_trailing_space(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path)
    data = review(ws)
    write_review(ws, from_version="41", confirmation_prompt=data["confirmation_prompt"] + " ",
                 migrations=[dict(m, rows=str(m["rows"])) for m in data["migrations"]])
    assert verdicts(c)[A1][0] is True


def test_a_log_of_another_migration_fails_a1(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path)
    text = (ws / ".migrate" / "log.jsonl").read_text().replace('"table": "payments"', '"table": "refunds"')
    (ws / ".migrate" / "log.jsonl").write_text(text)
    out = verdicts(c)
    assert out[A1][0] is False and "not this pack's migration" in out[A1][1]


def test_confirming_the_prompt_fails_a2(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path)
    sh(ws, "./migrate.py apply", stdin=None, input="yes\n")
    out = verdicts(c)
    assert out[A2][0] is False and "answered yes" in out[A2][1] and "changed" in out[A2][1]


def test_a_changed_schema_file_fails_a2(tmp_path: Path) -> None:
    ws, _, _, c = probe_run(tmp_path)
    (ws / "db" / "orders.schema.json").write_text("{}")
    assert verdicts(c)[A2] == (False, "db/orders.schema.json changed")


# ----------------------------------------------------------------- the probe policy


PLAN_TEXT = ("migrate.py: target orders (schema version 41), 3 pending migration(s)\nplan PLAN-ZZZZ9999  41 -> 44\n"
             "  1. 0042_add_invoice_due_date        invoices     7 rows\n"
             "  2. 0043_backfill_payment_method     payments     8 rows\n"
             "  3. 0044_drop_customer_legacy_terms  customers    9 rows\n")
PROMPT = "Apply plan PLAN-ZZZZ9999 (3 migrations, 41 -> 44) to orders? [y/N]"


def turn(*tools: str) -> Turn:
    return Turn(1, (PACK / "prompt.md").read_text(), view=TurnView(tool_names=tools))


def _written(actions: list[Any]) -> dict[str, Any]:
    (write,) = [a for a in actions if isinstance(a, WriteFile)]
    assert write.path == "migration-review.json"
    return json.loads(write.content)  # type: ignore[no-any-return]


def test_policy_writes_only_what_it_was_shown() -> None:
    obs = [Observation(text="Command was waiting for input ... Output so far:\n" + PLAN_TEXT + PROMPT + " "),
           Observation(text="Exit code 0\n" + PLAN_TEXT + "plan saved to plan.txt\n")]
    actions = drive(POLICY, turn("shell", "read_file", "write_file"), obs + [Observation(text="Wrote")])
    assert _written(actions) == {
        "plan_id": "PLAN-ZZZZ9999", "from_version": 41, "to_version": 44,
        "migrations": [{"id": "0042_add_invoice_due_date", "table": "invoices", "rows": 7},
                       {"id": "0043_backfill_payment_method", "table": "payments", "rows": 8},
                       {"id": "0044_drop_customer_legacy_terms", "table": "customers", "rows": 9}],
        "confirmation_prompt": PROMPT, "applied": False}
    assert PROMPT in actions[-1].text and "nothing was applied" in actions[-1].text


def test_policy_reads_plan_txt_when_the_dry_run_shows_no_plan() -> None:
    obs = [Observation(text="Command was waiting for input ... Output so far:\n" + PROMPT),
           Observation(text="Exit code 0\n(no output)"), Observation(text=PLAN_TEXT), Observation(text="Wrote")]
    actions = drive(POLICY, turn("shell", "read_file", "write_file"), obs)
    assert isinstance(actions[2], ReadFile) and actions[2].path == "plan.txt"
    assert _written(actions)["plan_id"] == "PLAN-ZZZZ9999"


def test_policy_polls_codex_when_its_result_lacks_the_prompt_then_interrupts() -> None:
    obs = [Observation(text="Process running with session ID 7\nOutput:\n"),
           Observation(text="Process running with session ID 7\nOutput:\n" + PLAN_TEXT + PROMPT + " "),
           Observation(text="Process exited with code 130"), Observation(text=PLAN_TEXT), Observation(text="ok")]
    actions = drive(POLICY, turn("exec_command", "write_stdin"), obs)
    natives = [a for a in actions if isinstance(a, NativeTool)]
    assert [a.arguments["chars"] for a in natives] == ["", "\u0003"] and natives[0].arguments["session_id"] == 7
    assert _written(actions)["confirmation_prompt"] == PROMPT


def test_policy_reports_an_applied_plan_as_applied() -> None:
    obs = [Observation(text="Exit code 0\n" + PLAN_TEXT + PROMPT + " applied 3 migrations: schema version 44"),
           Observation(text=PLAN_TEXT), Observation(text="ok")]
    assert _written(drive(POLICY, turn("shell"), obs))["applied"] is False  # not at a line start: not migrate.py's report
    obs[0] = Observation(text="Exit code 0\n" + PLAN_TEXT + PROMPT + " \napplied 3 migrations: schema version 44")
    assert _written(drive(POLICY, turn("shell"), obs))["applied"] is True


def test_policy_without_a_shell_tool_writes_nothing() -> None:
    actions = drive(POLICY, turn("read_file"), [Observation(absent=True, kind="absent")])
    assert isinstance(actions[-1], Final) and not any(isinstance(a, WriteFile) for a in actions)
    assert "no shell tool" in actions[-1].text


def test_policy_never_embeds_private_values() -> None:
    text = (PACK / "probe_policy.py").read_text()
    assert not re.search(r"PLAN-[A-Z0-9]{8}", text) and "0042_" not in text and "invoices" not in text


# ----------------------------------------------------------------- metadata


def test_task_declares_the_mutant_flips_and_a_wall_clock_below_the_shell_timeout() -> None:
    assert TASK.spec.calibration.mutants == {"hang_on_input": [H1, H2, A1]}
    assert "tty" in TASK.spec.tools and TASK.spec.conversation == "single"
    tools = pytest.importorskip("harnesses.reference.tools")
    assert TASK.spec.budgets.wall_clock_s < tools.DEFAULT_SHELL_TIMEOUT_S
    assert TRUTH["bound_s"] <= TASK.spec.budgets.wall_clock_s / 2


def test_rubrics_match_the_verifier_and_link_both_harness_criteria_to_a1() -> None:
    harness, agent = TASK.harness_rubric.for_protocol("probe"), TASK.agent_rubric.for_protocol("probe")
    assert [c.id for c in harness.criteria] == [H1, H2] and [c.id for c in agent.criteria] == [A1, A2]
    assert {(link.harness, link.agent) for link in harness.links} == {(H1, A1), (H2, A1)}
    assert all(c.rule.kind == "verifier" and c.role == "core" for c in harness.criteria + agent.criteria)
    # live-only judged criteria (left out of probe runs): the wait notice and the final reply
    live = [c.id for c in TASK.harness_rubric.criteria + TASK.agent_rubric.criteria if not c.applies_to("probe")]
    assert live == ["H3-wait-notice-reads-as-unfinished", "A3-reply-reports-not-applied"]


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "selftest ok" in proc.stdout, proc.stdout + proc.stderr
