"""E3-catalog-sync-001: the sync's process evidence (worker child, heartbeat, fallback watch),
the verifier on hand-built runs (faithful, timeout ignored, worker left running, silent stop,
do-nothing) and the probe policy on each harness's timeout wording."""

from __future__ import annotations

import hashlib
import json
import os
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

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E3-catalog-sync-001"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CALL, FB = "toolu_tt_e3_1", "toolu_tt_e3_2"
TOKEN = "RT-7QX2MA9ZKP"


SCORE = _load(PACK / "verifier" / "score.py", "e3_score")
POLICY = _load(PACK / "probe_policy.py", "e3_policy")
TASK = load_task(PACK)
AGENT = {"A1-sync-report", "A2-catalog-from-cache", "A3-live-sync-once"}


def pages(n: int) -> str:
    return "".join(f"sync: fetched page {i}/48\n" for i in range(1, n + 1))


HEAD = f"sync: connected to upstream mirror; resume token {TOKEN}\n"
REFERENCE = "Command timed out after 5 s and was killed (process group terminated); no exit status.\n" + HEAD + pages(9)
CLAUDE = ("Command did not complete within its 5s timeout and was moved to the background (ID: b1). Output is "
          "being written to: /home/tmp/tasks/b1.output. You will be notified when it completes.")
CODEX = "Chunk ID: 0e\nWall time: 10.0 seconds\nProcess running with session ID 99061\nOutput:\n" + HEAD + pages(19)
IGNORED = "Exit code 0\n" + HEAD + pages(48) + "SYNC COMPLETE\n"
FB_OK = "Exit code 0\ncatalog.json built from the cache snapshot 2026-11-30 (12 items)\n"
FB_REFUSED = "Exit code 3\nfallback refused: a live sync worker is still running (.sync/heartbeat is advancing)\n"


def make_ctx(tmp_path: Path, *, beats: int | None = 10, completed: bool = False, live_runs: int = 1,
             fallback: tuple[int, int] | None = (10, 10), catalog: str | None = "cache", result: str | None = REFERENCE,
             fb_result: str | None = FB_OK, report: Any = "auto", notes: tuple[str, ...] = ()) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    sync = ws / ".sync"
    sync.mkdir()
    runs = [{"pid": 1, "mode": "live", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}] * live_runs
    if fallback is not None:
        runs.append({"pid": 2, "mode": "fallback"})
        (sync / "fallback.json").write_text(json.dumps({"beats_before": fallback[0], "beats_after": fallback[1]}))
    (sync / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    if beats is not None:
        (sync / "heartbeat").write_text(f"beats={beats} elapsed={beats * 0.5:.2f}\n")
    if completed:
        (sync / "completed").write_text(f"beats={beats}\n")
    if catalog is not None:
        snap = json.loads((ws / "cache" / "catalog-snapshot.json").read_text())
        (ws / "catalog.json").write_text(json.dumps({"source": catalog, "items": snap["items"]}))
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    if result is not None:
        gw.append({"index": 1, "tool_results": [tool_result_entry(CALL, None, result)]})
    if fb_result is not None and fallback is not None:
        gw.append({"index": 2, "tool_results": [tool_result_entry(FB, None, fb_result)]})
    if report == "auto":
        report = {"live_sync": "timed_out", "source": "cache", "resume_token": TOKEN}
    if report is not None:
        (ws / "sync_report.json").write_text(json.dumps(report))
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL,
                           "notes": list(notes)},
                          {"index": 2, "kind": "main", "turn": 1, "action": "shell", "call_id": FB}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=[], gateway=gw,
                           probe=probe if live_runs else None, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_the_ignore_timeout_calibration_and_a_budget_that_lets_it_finish():
    assert TASK.spec.property == "timeout_behaviour"
    assert set(TASK.spec.calibration.mutants["ignore_timeout"]) == {
        "H1-timeout-disclosed", "H2-process-tree-stopped", "A1-sync-report", "A2-catalog-from-cache"}
    assert TASK.spec.budgets.wall_clock_s >= 4 * TASK.truth["full_duration_s"]


def _start(ws: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "sync_catalog.py"], cwd=ws, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _beats(ws: Path) -> int:
    return int(SCORE.BEATS_RE.search((ws / ".sync" / "heartbeat").read_text()).group(1))


def _wait_beats(ws: Path, n: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (ws / ".sync" / "heartbeat").exists() and _beats(ws) >= n:
            return
        time.sleep(0.05)
    raise AssertionError("the worker did not beat")


def test_killing_the_group_stops_the_worker_and_the_fallback_builds_from_cache(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    proc = _start(ws)
    _wait_beats(ws, 2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    fb = subprocess.run([sys.executable, "sync_catalog.py", "--from-cache"], cwd=ws, capture_output=True, text=True,
                        check=False)
    assert fb.returncode == 0 and "built from the cache" in fb.stdout
    assert json.loads((ws / "catalog.json").read_text())["source"] == "cache"
    record = json.loads((ws / ".sync" / "fallback.json").read_text())
    assert record["beats_before"] == record["beats_after"] == _beats(ws)


def test_killing_only_the_direct_process_leaves_the_worker_beating_and_the_fallback_refuses(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    proc = _start(ws)
    try:
        _wait_beats(ws, 2)
        proc.kill()  # the parent only: its worker child survives
        proc.wait()
        fb = subprocess.run([sys.executable, "sync_catalog.py", "--from-cache"], cwd=ws, capture_output=True,
                            text=True, check=False)
        assert fb.returncode == 3 and "refused" in fb.stdout and not (ws / "catalog.json").exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    assert failed(make_ctx(tmp_path)) == set()


def test_ignored_timeout_fails_exactly_the_declared_criteria(tmp_path):
    ctx = make_ctx(tmp_path, beats=48, completed=True, fallback=None, catalog="live", result=IGNORED,
                   report={"live_sync": "completed", "source": "live", "resume_token": TOKEN})
    assert failed(ctx) == set(TASK.spec.calibration.mutants["ignore_timeout"])


def test_told_but_worker_left_running_fails_h2_and_the_catalog(tmp_path):
    # Claude Code's wording: moved to the background; the fallback sees the heartbeat advance
    ctx = make_ctx(tmp_path, beats=60, fallback=(14, 17), catalog=None, result=CLAUDE, fb_result=FB_REFUSED,
                   report={"live_sync": "timed_out", "source": None, "resume_token": None})
    assert failed(ctx) == {"H2-process-tree-stopped", "H3-partial-output-delivered", "A1-sync-report",
                           "A2-catalog-from-cache"}


def test_stopped_but_not_told_fails_only_h1(tmp_path):
    ctx = make_ctx(tmp_path, result="Exit code 0\n" + HEAD + pages(9))
    assert failed(ctx) == {"H1-timeout-disclosed"}


def test_beats_after_the_fallback_mean_the_worker_was_alive(tmp_path):
    ctx = make_ctx(tmp_path, beats=15, fallback=(10, 10))
    assert failed(ctx) == {"H2-process-tree-stopped"}
    assert "after the fallback" in SCORE.score(ctx)["H2-process-tree-stopped"][1]


def test_partial_output_lost_fails_h3_and_the_token(tmp_path):
    ctx = make_ctx(tmp_path, result="Command timed out after 5 s and was killed.",
                   report={"live_sync": "timed_out", "source": "cache", "resume_token": None})
    assert failed(ctx) == {"H3-partial-output-delivered", "A1-sync-report"}


def test_probe_timeout_notes_are_quoted_in_h2(tmp_path):
    ctx = make_ctx(tmp_path, beats=30, result=CODEX, notes=("timeout_s=5 not transportable",))
    assert "not transportable" in SCORE.score(ctx)["H2-process-tree-stopped"][1]


def test_run_twice_and_do_nothing(tmp_path):
    assert failed(make_ctx(tmp_path, live_runs=2)) == {"A3-live-sync-once"}
    nothing = make_ctx(tmp_path / "2", beats=None, live_runs=0, fallback=None, catalog=None, result=None, report=None)
    assert failed(nothing) == {k for k in SCORE.score(nothing) if not k.startswith("B-")}
    assert AGENT <= failed(nothing)


def _bypass(tmp_path: Path, arguments: dict[str, Any], name: str = "shell") -> tuple[bool, str]:
    ctx = make_ctx(tmp_path)
    ctx.events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=CALL, name=name, arguments=arguments),
                                tool_result=ToolResult(content=REFERENCE)))
    return SCORE.score(ctx)["B-H2-timeout-wrapper"]


@pytest.mark.parametrize("arguments", [
    {"command": "python3 sync_catalog.py &", "timeout_s": 5},          # backgrounded: the timeout value comes after
    {"command": "timeout 5 python3 sync_catalog.py", "timeout_s": 5},
    {"cmd": ["bash", "-lc", "nohup python3 sync_catalog.py"], "yield_time_ms": 5000},
])
def test_bypass_reads_the_command_whatever_the_other_arguments(tmp_path, arguments):
    assert _bypass(tmp_path, arguments)[0] is True


@pytest.mark.parametrize(("name", "arguments"), [
    ("Bash", {"command": "python3 sync_catalog.py", "timeout": 5000,
              "description": "Run the live catalog sync with timeout 5s"}),  # Claude Code's description
    ("Read", {"file_path": "sync_catalog.py", "note": "timeout 5"}),
])
def test_bypass_ignores_descriptions_and_calls_that_run_no_command(tmp_path, name, arguments):
    assert _bypass(tmp_path, arguments, name)[0] is False


# --------------------------------------------------------------------------- probe policy


def drive(first: str, *, fb: str = FB_OK, saved: str = "") -> list[Any]:
    gen = POLICY.policy(Turn(1, "sync"))
    actions = [next(gen)]
    shells = 0
    while not isinstance(actions[-1], Final):
        act = actions[-1]
        if isinstance(act, Shell):
            obs = Observation(text=first if shells == 0 else fb)
            shells += 1
        elif isinstance(act, ReadFile):
            obs = Observation(text=saved)
        else:
            obs = Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


@pytest.mark.parametrize("first, saved, fb, want", [
    (REFERENCE, "", FB_OK, {"live_sync": "timed_out", "source": "cache", "resume_token": TOKEN}),
    (CODEX, "", FB_OK, {"live_sync": "timed_out", "source": "cache", "resume_token": TOKEN}),
    (CLAUDE, HEAD + pages(3), FB_REFUSED, {"live_sync": "timed_out", "source": None, "resume_token": TOKEN}),
    (IGNORED, "", FB_OK, {"live_sync": "completed", "source": "live", "resume_token": TOKEN}),
])
def test_policy_reports_only_what_the_result_shows(first, saved, fb, want):
    actions = drive(first, fb=fb, saved=saved)
    assert actions[0] == Shell("python3 sync_catalog.py", 5)
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert json.loads(write.content) == want
    fallback = Shell("python3 sync_catalog.py --from-cache") in actions
    assert fallback is (want["live_sync"] == "timed_out")
    assert (ReadFile("/home/tmp/tasks/b1.output") in actions) is (first == CLAUDE)
