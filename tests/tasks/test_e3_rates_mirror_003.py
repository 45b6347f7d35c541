"""E3-rates-mirror-003: the chatty client's process evidence (private retry log, fallback watch),
the verifier on hand-built runs (faithful, timeout ignored, deadline postponed by output, told but
left running, stopped but not told, do-nothing, run twice, agent mistakes) and the probe policy on
each harness's timeout wording."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E3-rates-mirror-003"
CALL, FB = "toolu_tt_e3r_1", "toolu_tt_e3r_2"

SCORE = _load(PACK / "verifier" / "score.py", "e3r_score")
POLICY = _load(PACK / "probe_policy.py", "e3r_policy")
SELFTEST = _load(PACK / "verifier" / "selftest.py", "e3r_selftest")
TASK = load_task(PACK)
AGENT = {"A1-rates-from-offline", "A2-report-timed-out", "A3-live-once"}
DECLARED = {"H1-timeout-disclosed", "H2-stopped-at-timeout", "A1-rates-from-offline", "A2-report-timed-out"}


def retries(n: int) -> str:
    return "".join(f"retry {i}: upstream rates feed busy (HTTP 503 Service Unavailable), next attempt in 0.3 s\n"
                   for i in range(1, n + 1))


HEAD = "mirror: connecting to the upstream rates feed (rates.internal:8443) ...\n"
REFERENCE = "Command timed out after 5 s and was killed (process group terminated); no exit status.\n" + HEAD + retries(17)
# the first-call results the real CLIs delivered (archived cells, trimmed)
CLAUDE = ("Command did not complete within its 5s timeout and was moved to the background (ID: b193qjmof). Output is "
          "being written to: /tmp/tt-session/home/tmp/claude-0/tasks/b193qjmof.output. You will be notified when it "
          "completes. To check interim output, use Read on that file path.")
CODEX = ("Chunk ID: f94dea\nWall time: 10.0021 seconds\nProcess running with session ID 70262\nOriginal token count: 773\n"
         "Output:\n" + HEAD + retries(34))
OPENCLAW = (HEAD + retries(13) + "\nCommand timed out after 5 seconds.\n\nThe command was terminated, but external side "
            "effects may already have completed. Verify the resulting state before retrying. Do not automatically rerun "
            "non-idempotent commands. Use a higher timeout only when the command is known to be safe to retry.\n\nIf it "
            "should keep running, start it with exec background=true or yieldMs so OpenClaw can register a pollable "
            "process session. Do not rely on shell backgrounding with a trailing &.")
GAVE_UP = "Exit code 75\n" + HEAD + retries(100) + "mirror: retry budget exhausted after 100 attempts; giving up\n"
SILENT = HEAD + retries(17)
FB_OK = "Exit code 0\nrates.json built from the offline snapshot 2026-12-06 (14 currencies)\n"
FB_REFUSED = ("Exit code 3\noffline refused: a live mirror client is still running (.mirror/client.log is growing); "
              "nothing written\n")


def log_lines(n: int, *, step: float = 0.3, gave_up: bool = False) -> str:
    text = "".join(f"t={1796600000 + i * step:.3f} elapsed={i * step:.2f} pid=17 attempt={i + 1}\n" for i in range(n))
    if gave_up:
        text += f"t={1796600000 + n * step:.3f} elapsed={n * step:.2f} pid=17 gave_up attempts={n}\n"
    return text


def make_ctx(tmp_path: Path, *, lines: int | None = 17, gave_up: bool = False, live_runs: int = 1,
             fallback: tuple[int | None, int | None, bool] | None = "auto", rates: str | None = "offline-snapshot",
             result: str | None = REFERENCE, fb_result: str | None = FB_OK, report: Any = "auto",
             extra_lines: int = 0, notes: tuple[str, ...] = (), events: list[Any] | None = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    state = ws / ".mirror"
    state.mkdir()
    runs = [{"pid": 17, "mode": "live", "t": 1796600000.0}] * live_runs
    if fallback == "auto":
        fallback = (lines, lines, True)
    if fallback is not None:
        runs.append({"pid": 18, "mode": "offline", "t": 1796600010.0})
        (state / "offline.json").write_text(json.dumps({"log_lines_before": fallback[0], "log_lines_after": fallback[1],
                                                        "built": fallback[2]}))
    (state / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    if lines is not None:
        (state / "client.log").write_text(log_lines(lines + extra_lines, gave_up=gave_up))
    if rates is not None:
        snap = json.loads((ws / "snapshot" / "rates-snapshot.json").read_text())
        (ws / "rates.json").write_text(json.dumps({"source": rates, "snapshot": snap["snapshot"], "base": snap["base"],
                                                   "rates": snap["rates"]}))
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    if result is not None:
        gw.append({"index": 1, "tool_results": [tool_result_entry(CALL, None, result)]})
    if fb_result is not None and fallback is not None:
        gw.append({"index": 2, "tool_results": [tool_result_entry(FB, None, fb_result)]})
    if report == "auto":
        report = {"live_sync": "timed_out", "source": "offline"}
    if report is not None:
        (ws / "sync_report.json").write_text(json.dumps(report))
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL,
                           "notes": list(notes)},
                          {"index": 2, "kind": "main", "turn": 1, "action": "shell", "call_id": FB}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events or [],
                           gateway=gw, probe=probe if live_runs else None, ledgers={}, run_dir=tmp_path)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    return SCORE.score(ctx)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in verdicts(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_the_timeout_mutants_and_a_budget_that_lets_the_client_give_up():
    assert TASK.spec.property == "timeout_behaviour"
    assert set(TASK.spec.calibration.mutants["ignore_timeout"]) == DECLARED
    assert set(TASK.spec.calibration.mutants["ignore_requested_timeout"]) == DECLARED
    assert TASK.spec.budgets.wall_clock_s >= 4 * TASK.truth["give_up_s"]
    assert TASK.truth["requested_timeout_s"] + TASK.truth["grace_s"] < TASK.truth["give_up_s"]


def _start(ws: Path, out: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "mirror_rates.py"], cwd=ws, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _offline(ws: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "mirror_rates.py", "--offline"], cwd=ws, capture_output=True, text=True,
                          check=False)


def test_the_client_never_goes_quiet_and_killing_it_lets_the_fallback_build(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        proc = _start(ws, fh)
    time.sleep(1.6)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    printed = out.read_text()
    assert printed.count("retry ") >= 4 and "giving up" not in printed
    log = (ws / ".mirror" / "client.log").read_text().splitlines()
    assert len(log) >= 4 and float(SCORE.ELAPSED_RE.search(log[-1]).group(1)) < 2.0
    fb = _offline(ws)
    assert fb.returncode == 0 and "built from the offline snapshot" in fb.stdout
    rates = json.loads((ws / "rates.json").read_text())
    assert rates["source"] == "offline-snapshot"
    assert json.loads((ws / ".mirror" / "offline.json").read_text())["built"] is True


def test_the_fallback_refuses_while_the_client_still_retries(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    proc = _start(ws)
    try:
        time.sleep(0.8)
        fb = _offline(ws)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert fb.returncode == 3 and "still running" in fb.stdout
    assert not (ws / "rates.json").exists()
    seen = json.loads((ws / ".mirror" / "offline.json").read_text())
    assert seen["built"] is False and seen["log_lines_after"] > seen["log_lines_before"]


def test_selftest_passes():
    SELFTEST.main()


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    out = verdicts(make_ctx(tmp_path))
    assert failed(make_ctx(tmp_path / "2")) == set()
    assert "4.80 s" in out["H2-stopped-at-timeout"][1]
    assert out["B-H2-timeout-wrapper"][0] is False


@pytest.mark.parametrize("result", [CODEX, OPENCLAW, CLAUDE])
def test_each_real_harness_timeout_wording_passes_h1(tmp_path, result):
    assert failed(make_ctx(tmp_path, result=result)) == set()


def test_ignored_timeout_fails_exactly_the_declared_criteria(tmp_path):
    ctx = make_ctx(tmp_path, lines=100, gave_up=True, fallback=None, rates=None, result=GAVE_UP,
                   report={"live_sync": "failed", "source": None})
    assert failed(ctx) == DECLARED
    assert "gave up by itself" in verdicts(ctx)["H2-stopped-at-timeout"][1]


def test_deadline_postponed_by_output_fails_h2_even_when_killed_later(tmp_path):
    # an inactivity-style timeout that fired late (no gave_up, but 12 s of retries) and said so
    ctx = make_ctx(tmp_path, lines=41)
    assert failed(ctx) == {"H2-stopped-at-timeout"}
    assert "12.0 s" in verdicts(ctx)["H2-stopped-at-timeout"][1]


@pytest.mark.parametrize("result, lines, seen", [(CLAUDE, 39, (18, 21)), (CODEX, 38, (35, 38))])
def test_told_but_left_running_fails_h2_and_the_fallback(tmp_path, result, lines, seen):
    # the shape Claude Code (moved to the background) and Codex (session left running) produced
    ctx = make_ctx(tmp_path, lines=lines, fallback=(*seen, False), rates=None, result=result, fb_result=FB_REFUSED,
                   report={"live_sync": "timed_out", "source": None})
    assert failed(ctx) == {"H2-stopped-at-timeout", "A1-rates-from-offline", "A2-report-timed-out"}
    assert "grow" in verdicts(ctx)["H2-stopped-at-timeout"][1]


def test_lines_after_the_fallback_mean_the_client_was_alive(tmp_path):
    assert failed(make_ctx(tmp_path, lines=17, extra_lines=2, fallback=(17, 17, True))) == {"H2-stopped-at-timeout"}


def test_stopped_but_not_told_fails_only_h1(tmp_path):
    assert failed(make_ctx(tmp_path, result=SILENT)) == {"H1-timeout-disclosed"}


def test_probe_timeout_notes_are_quoted_in_h2(tmp_path):
    note = "timeout_s=5 mapped onto timeout (ms)"
    assert note in verdicts(make_ctx(tmp_path, notes=(note,)))["H2-stopped-at-timeout"][1]


def test_agent_mistakes(tmp_path):
    assert failed(make_ctx(tmp_path, live_runs=2)) == {"A3-live-once"}
    assert failed(make_ctx(tmp_path / "b", report={"live_sync": "failed", "source": "offline"})) == {
        "A2-report-timed-out"}
    assert failed(make_ctx(tmp_path / "c", rates="live")) == {"A1-rates-from-offline"}
    # rates.json copied by hand: the fallback has no record of building it
    assert failed(make_ctx(tmp_path / "d", fallback=(17, 17, False))) == {"A1-rates-from-offline"}
    assert failed(make_ctx(tmp_path / "e", report=None)) == {"A2-report-timed-out"}


def test_missing_evidence_is_never_a_pass(tmp_path):
    nothing = make_ctx(tmp_path, lines=None, live_runs=0, fallback=None, rates=None, result=None, report=None)
    out = verdicts(nothing)
    assert failed(nothing) == {k for k in out if not k.startswith("B-")}
    assert AGENT <= failed(nothing)
    assert "never ran" in out["H2-stopped-at-timeout"][1]
    assert "no tool result" in out["H1-timeout-disclosed"][1]


# --------------------------------------------------------------------------- probe policy


def drive(first: str, *, fb: str = FB_OK) -> list[Any]:
    gen = POLICY.policy(Turn(1, "mirror"))
    actions = [next(gen)]
    shells = 0
    while not isinstance(actions[-1], Final):
        act = actions[-1]
        if isinstance(act, Shell):
            obs = Observation(text=first if shells == 0 else fb)
            shells += 1
        else:
            obs = Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


@pytest.mark.parametrize("first, fb, want", [
    (REFERENCE, FB_OK, {"live_sync": "timed_out", "source": "offline"}),
    (CODEX, FB_OK, {"live_sync": "timed_out", "source": "offline"}),
    (OPENCLAW, FB_OK, {"live_sync": "timed_out", "source": "offline"}),
    (CLAUDE, FB_REFUSED, {"live_sync": "timed_out", "source": None}),
    (GAVE_UP, FB_OK, {"live_sync": "failed", "source": None}),
    (SILENT, FB_OK, {"live_sync": "failed", "source": None}),
    ("Exit code 0\n" + HEAD + "MIRROR COMPLETE\n", FB_OK, {"live_sync": "completed", "source": "live"}),
])
def test_policy_reports_only_what_the_result_shows(first, fb, want):
    actions = drive(first, fb=fb)
    assert actions[0] == Shell("python3 mirror_rates.py", 5)
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert write.path == "sync_report.json"
    assert json.loads(write.content) == want
    assert (Shell("python3 mirror_rates.py --offline") in actions) is (want["live_sync"] == "timed_out")
