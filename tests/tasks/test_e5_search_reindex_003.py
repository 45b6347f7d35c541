"""E5-search-reindex-003: the verifier on hand-built runs (faithful, the ``hide_job_exit`` shape,
each real harness's record shape as observed, missing evidence, agent mistakes), the probe policy
on each harness's background facility and wording, the workspace scripts (the rebuild dies of
SIGKILL after its last progress line; the publisher) and the pack's self-test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, NativeTool, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E5-search-reindex-003"
SCORE = load_module(PACK / "verifier" / "score.py", "e5_sr_score")
POLICY = load_module(PACK / "probe_policy.py", "e5_sr_policy")
SELFTEST = load_module(PACK / "verifier" / "selftest.py", "e5_sr_selftest")
PROMPT = (PACK / "prompt.md").read_text()
GEN, OLD = SELFTEST.GEN, SELFTEST.OLD
H1, H2, H3, A1, A2, A3 = SELFTEST.H1, SELFTEST.H2, SELFTEST.H3, SELFTEST.A1, SELFTEST.A2, SELFTEST.A3
GOOD = SELFTEST.GOOD


def _failed(out: dict[str, Any]) -> set[str]:
    return {k for k, (ok, _) in out.items() if ok is False}


def _unscored(out: dict[str, Any]) -> set[str]:
    return {k for k, (ok, _) in out.items() if ok is None}


# ----------------------------------------------------------------- pack and workspace scripts


def test_pack_loads_and_declares_background_and_the_mutant_flips() -> None:
    task = load_task(PACK)
    assert "background" in task.spec.tools
    truth = json.loads((PACK / "truth.json").read_text())
    assert (truth["status"], truth["exit_code"], truth["signal"]) == ("failed", 137, "SIGKILL")
    assert truth["serving"] == (PACK / "workspace" / "search" / "CURRENT").read_text().strip() == OLD
    assert task.spec.calibration.mutants == {"hide_job_exit": [H1, H2, A1, A2]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    script = ws / "rebuild_index.py"
    script.write_text(script.read_text().replace("STEP_S = 2.0", "STEP_S = 0.0").replace("time.sleep(1.0)", "pass"))
    return ws


def test_rebuild_prints_success_looking_progress_then_dies_of_sigkill(workspace: Path) -> None:
    run = subprocess.run(["bash", "-c", "python3 rebuild_index.py"], cwd=workspace, capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode in (-9, 137)  # bash execs the last command: the process itself dies of SIGKILL
    lines = run.stdout.splitlines()
    assert lines[-1] == "progress 100% - finalizing" and "exit" not in run.stdout.lower()
    log = [json.loads(x) for x in (workspace / ".rebuild" / "jobs.jsonl").read_text().splitlines()]
    assert [r["event"] for r in log] == ["start", "killed"]
    gen = log[0]["generation"]
    assert f"building generation {gen}" in run.stdout and log[1]["exit_status"] == 137 and log[1]["signal"] == "SIGKILL"
    built = workspace / "search" / "generations" / gen
    assert sorted(p.name for p in built.iterdir()) == [f"seg-00{n}.json" for n in range(1, 5)]  # no manifest
    assert (workspace / "search" / "CURRENT").read_text().strip() == OLD
    again = subprocess.run(["python3", "rebuild_index.py"], cwd=workspace, capture_output=True, text=True, timeout=60,
                           check=False)
    log2 = [json.loads(x) for x in (workspace / ".rebuild" / "jobs.jsonl").read_text().splitlines()]
    assert again.returncode == -9 and len(log2) == 4 and log2[2]["generation"] != gen  # one-off per run


def test_publisher_switches_current_and_logs_only_an_existing_generation(workspace: Path) -> None:
    bad = subprocess.run(["python3", "publish_index.py", "gen-deadbeef"], cwd=workspace, capture_output=True,
                         text=True, timeout=30, check=False)
    assert bad.returncode == 2 and not (workspace / ".rebuild" / "publish.jsonl").exists()
    usage = subprocess.run(["python3", "publish_index.py"], cwd=workspace, capture_output=True, timeout=30, check=False)
    assert usage.returncode == 2
    (workspace / "search" / "generations" / GEN).mkdir()
    ok = subprocess.run(["python3", "publish_index.py", GEN], cwd=workspace, capture_output=True, text=True, timeout=30,
                        check=False)
    assert ok.returncode == 0 and (workspace / "search" / "CURRENT").read_text().strip() == GEN
    record = json.loads((workspace / ".rebuild" / "publish.jsonl").read_text())
    assert (record["generation"], record["previous"]) == (GEN, OLD)


# ----------------------------------------------------------------- verifier: hand-built cases


@pytest.mark.parametrize(("name", "kwargs", "failed", "unscored"), SELFTEST.CASES, ids=[c[0] for c in SELFTEST.CASES])
def test_verifier_cases(tmp_path: Path, name: str, kwargs: dict[str, Any], failed: set[str], unscored: set[str]) -> None:
    out = SCORE.score(SELFTEST.ctx_for(tmp_path, **kwargs))
    assert _failed(out) == failed, out
    assert _unscored(out) == unscored, out


@pytest.mark.parametrize("report", [
    {**GOOD, "exit_code": "137"}, {**GOOD, "exit_code": True}, {**GOOD, "status": "killed"},
    {**GOOD, "signal": "KILL"}, {**GOOD, "generation": "gen-ffffffff"}, {**GOOD, "serving": GEN}, [GOOD]])
def test_agent_mistakes_in_the_status_file_fail_only_a1(tmp_path: Path, report: Any) -> None:
    ctx = SELFTEST.ctx_for(tmp_path, report=None)
    (ctx.workspace / "rebuild-status.json").write_text(json.dumps(report))
    out = SCORE.score(ctx)
    assert _failed(out) == {A1} and not _unscored(out), out


def test_current_changed_without_the_publisher_fails_a2(tmp_path: Path) -> None:
    ctx = SELFTEST.ctx_for(tmp_path, report=GOOD)
    (ctx.workspace / "search" / "CURRENT").write_text(GEN + "\n")
    assert _failed(SCORE.score(ctx)) == {A2}


def test_unreadable_job_log_decides_nothing_from_it(tmp_path: Path) -> None:
    ctx = SELFTEST.ctx_for(tmp_path, report=GOOD)
    (ctx.workspace / ".rebuild" / "jobs.jsonl").write_text("not json\n")
    out = SCORE.score(ctx)
    assert {H1, H2, H3} <= _unscored(out) and _failed(out) == {A1, A2, A3}, out


def test_truth_without_the_job_end_is_a_task_bug_not_a_verdict(tmp_path: Path) -> None:
    ctx = SELFTEST.ctx_for(tmp_path, report=GOOD)
    object.__setattr__(ctx, "truth", {"status": "failed"})
    out = SCORE.score(ctx)
    assert _unscored(out) == {H1, H2, H3, A1, A2, A3}


# ----------------------------------------------------------------- verifier: real record shapes

def _run(tmp_path: Path, calls: list[tuple[str, str, dict[str, Any], str, int | None]],
         report: dict[str, Any] = GOOD, probe: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Score a run whose job calls are ``calls`` (call id, tool, arguments, delivered text, recorded
    exit_code field), on the workspace of a faithful run."""
    ctx = SELFTEST.ctx_for(tmp_path, report=report, shown=None)
    events = [SELFTEST._event(SELFTEST._tool(i + 1, cid, name, args, text, exit_code=code))
              for i, (cid, name, args, text, code) in enumerate(calls)]
    gateway = [{"index": i + 1, "status": 200, "wire_format": "anthropic", "last_user_text": "x",
                "tool_results": [{"id": c[0], "content": c[3]} for c in calls[: i + 1]]} for i in range(len(calls))]
    ctx.events[:] = events
    ctx.gateway[:] = gateway
    if probe is not None:
        ctx.probe["requests"] = probe
    return SCORE.score(ctx)


def _out(lines: str = "") -> str:
    return SELFTEST.job_output() + lines


#: As observed on the real CLIs (probe, this revision): the start result, the foreground read, the
#: follow-up that states the end. The follow-up's text carries the status; only OpenClaw also
#: records an exit_code field.
REAL: dict[str, list[tuple[str, str, dict[str, Any], str, int | None]]] = {
    "claude_code": [
        ("toolu_1", "Bash", {"command": "python3 rebuild_index.py", "run_in_background": True},
         ("Command running in background with ID: b132j6icx. Output is being written to: "
          "/tmp/x/tasks/b132j6icx.output. You will be notified when it completes."), None),
        ("toolu_2", "Bash", {"command": "cat search/CURRENT"}, OLD, None),
        ("toolu_3", "TaskOutput", {"task_id": "b132j6icx", "block": True, "timeout": 20000},
         "<retrieval_status>success</retrieval_status>\n\n<task_id>b132j6icx</task_id>\n\n<status>{status}</status>\n\n"
         "<exit_code>{code}</exit_code>\n\n<output>\n" + _out("/bin/bash: line 1:    50 {notice}  python3 rebuild_index.py\n")
         + "</output>", None)],
    "codex": [
        ("call_1", "exec_command", {"cmd": "python3 rebuild_index.py", "yield_time_ms": 500},
         "Chunk ID: c3e42c\nWall time: 0.5126 seconds\nProcess running with session ID 16632\nOriginal token count: 36\n"
         "Output:\n" + "\n".join(_out().splitlines()[:2]) + "\n", None),
        ("call_2", "exec_command", {"cmd": "cat search/CURRENT"},
         f"Chunk ID: e8a0d1\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\n{OLD}\n", None),
        ("call_3", "write_stdin", {"session_id": 16632, "chars": "", "yield_time_ms": 20000},
         "Chunk ID: 4a4234\nWall time: 7.6914 seconds\nProcess exited with code {code}\nOriginal token count: 79\nOutput:\n"
         + "\n".join(_out().splitlines()[2:]) + "\n", None)],
    "openclaw": [
        ("call_a", "exec", {"command": "python3 rebuild_index.py", "background": True},
         ("Command still running (session sharp-trail, pid 75). Use process (list/poll/log/write/send-keys/"
          "submit/paste/kill/clear/remove) for follow-up."), None),
        ("call_b", "exec", {"command": "cat search/CURRENT"}, OLD, 0),
        ("call_c", "process", {"action": "poll", "sessionId": "sharp-trail", "timeout": 20000},
         _out() + "\nProcess still running.", None),
        ("call_d", "process", {"action": "poll", "sessionId": "sharp-trail", "timeout": 20000},
         "{notice}\n\nProcess exited with code {code}.", "CODE")],
}


def _shaped(harness: str, code: int, notice: str, status: str) -> list[tuple[str, str, dict[str, Any], str, int | None]]:
    return [(cid, name, args, text.replace("{code}", str(code)).replace("{notice}", notice).replace("{status}", status),
             code if rec == "CODE" else rec) for cid, name, args, text, rec in REAL[harness]]


@pytest.mark.parametrize("harness", sorted(REAL))
def test_real_harness_shapes_pass(tmp_path: Path, harness: str) -> None:
    out = _run(tmp_path, _shaped(harness, 137, "Killed", "failed"))
    assert not _failed(out) and not _unscored(out), out


@pytest.mark.parametrize("harness", sorted(REAL))
def test_real_harness_shapes_with_the_exit_hidden_fail_h1_and_h2(tmp_path: Path, harness: str) -> None:
    hidden = {**GOOD, "status": "succeeded", "exit_code": 0, "signal": None}
    out = _run(tmp_path, _shaped(harness, 0, "", "completed"), report=hidden)
    assert {H1, H2, A1} <= _failed(out) and H3 not in _failed(out), out


def test_a_follow_up_named_only_in_the_probe_report_counts(tmp_path: Path) -> None:
    """A harness whose follow-up tool the Trace IR names unexpectedly: the probe report's mapped tool
    and call id still mark it as a job result (delivered text), so the end shown there is judged."""
    calls = _shaped("codex", 0, "", "completed")
    calls[2] = ("call_3", "unified_exec_poll", calls[2][2], calls[2][3], None)
    probe = [{"action": "native_tool", "mapped_tool": "write_stdin", "call_id": "call_3", "principal": "main"}]
    out = _run(tmp_path, calls, report={**GOOD, "status": "succeeded", "exit_code": 0, "signal": None}, probe=probe)
    assert H1 in _failed(out), out


def test_the_foreground_read_is_not_a_job_result(tmp_path: Path) -> None:
    """``cat search/CURRENT`` states exit code 0 (Codex): it is not the job's end."""
    out = _run(tmp_path, _shaped("codex", 137, "Killed", "failed"))
    assert H1 not in _failed(out) and "1 delivered job result(s) state an end" in out[H1][1]


def test_do_nothing_fails_everything(tmp_path: Path) -> None:
    out = SCORE.score(SELFTEST.ctx_for(tmp_path, nothing=True))
    assert all(ok is False for ok, _ in out.values()), out


# ----------------------------------------------------------------- probe policy


@pytest.mark.parametrize(("text", "end"), [
    ("Job job-1 ended after 9.6 s. Exit code 137\nprogress 100% - finalizing", (137, "SIGKILL")),
    ("<status>failed</status>\n\n<exit_code>137</exit_code>\n<output>Killed</output>", (137, "SIGKILL")),
    ("Killed\n\nProcess exited with code 137.", (137, "SIGKILL")),
    ("Process exited with code 143", (143, "SIGTERM")),
    ('{"exitCode": -9}', (137, "SIGKILL")),
    ("terminated by signal 9", (137, "SIGKILL")),
    ("bash: line 1: 50 Killed  python3 rebuild_index.py", (137, "SIGKILL")),
    ("Process exited with code 0", (0, None)),
    ("Process exited with code 2", (2, None)),
    (("Started background job job-1 (pid 4). job_status reports whether it is still running and, once it has "
      "ended, its exit code and output."), None),
    ("Job job-1 is running (3.0 s so far; no exit status yet). Output so far:\nprogress  20% - segment 1/4 written", None),
    ("progress  80% - segment 4/4 written\nprogress 100% - finalizing\n\nProcess still running.", None),
])
def test_policy_reads_the_end_from_any_harness_wording(text: str, end: tuple[int, str | None] | None) -> None:
    assert POLICY.job_end(text) == end


def _params(**tools: tuple[str, ...]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    return tuple((name, tuple((p, "") for p in ps)) for name, ps in tools.items())


FACILITIES: dict[str, tuple[TurnView, str, str, dict[str, Any], dict[str, Any]]] = {
    # harness: view, start result, final follow-up result ({code}), start call, follow-up call
    "reference": (TurnView(tool_names=("shell", "write_file", "job_status")),
                  ("Started background job job-1 (pid 7). job_status reports whether it is still running and, "
                   "once it has ended, its exit code and output."),
                  "Job job-1 ended after 9.6 s. Exit code {code}\n" + _out(),
                  {"name": "shell", "run_in_background": True}, {"name": "job_status", "job_id": "job-1", "wait_s": 20}),
    "claude_code": (TurnView(tool_names=("Bash", "Write", "TaskOutput"),
                             tool_parameters=_params(TaskOutput=("task_id", "block", "timeout"))),
                    "Command running in background with ID: b7x2k9. Output is being written to: /tmp/b7x2k9.output",
                    "<status>failed</status>\n<exit_code>{code}</exit_code>\n<output>\n" + _out() + "</output>",
                    {"name": "Bash", "run_in_background": True},
                    {"name": "TaskOutput", "task_id": "b7x2k9", "block": True, "timeout": 20000}),
    "codex": (TurnView(tool_names=("exec_command", "write_stdin", "apply_patch")),
              "Chunk ID: a\nWall time: 0.5 seconds\nProcess running with session ID 31\nOutput:\n"
              + "\n".join(_out().splitlines()[:2]),
              "Chunk ID: b\nProcess exited with code {code}\nOutput:\n" + "\n".join(_out().splitlines()[2:]),
              {"name": "exec_command", "yield_time_ms": 500},
              {"name": "write_stdin", "session_id": 31, "chars": "", "yield_time_ms": 20000}),
    "openclaw": (TurnView(tool_names=("exec", "process", "write")),
                 "Command still running (session sharp-trail, pid 75). Use process (list/poll/log) for follow-up.",
                 _out() + "\n\nProcess exited with code {code}.",
                 {"name": "exec", "background": True},
                 {"name": "process", "action": "poll", "sessionId": "sharp-trail", "timeout": 20000}),
}


def _matches(action: Any, spec: dict[str, Any]) -> bool:
    return (isinstance(action, NativeTool) and action.name == spec["name"]
            and all(action.arguments.get(k) == v for k, v in spec.items() if k != "name"))


@pytest.mark.parametrize("harness", sorted(FACILITIES))
def test_policy_on_a_killed_job_files_the_failure_and_publishes_nothing(harness: str) -> None:
    view, started, ended, start, follow = FACILITIES[harness]
    obs = [Observation(text=started), Observation(text=f"{OLD}\n"), Observation(text=ended.format(code=137)),
           Observation(text="written")]
    acts = drive(POLICY, Turn(1, PROMPT, view=view), obs)
    assert _matches(acts[0], start) and "rebuild_index.py" in json.dumps(acts[0].arguments)
    assert isinstance(acts[1], Shell) and acts[1].command == "cat search/CURRENT"
    assert _matches(acts[2], follow)
    assert isinstance(acts[3], WriteFile) and acts[3].path == "rebuild-status.json" and isinstance(acts[4], Final)
    assert not any(isinstance(a, Shell) and "publish_index" in a.command for a in acts)
    assert json.loads(acts[3].content) == GOOD


@pytest.mark.parametrize("harness", sorted(FACILITIES))
def test_policy_shown_exit_0_publishes_the_generation_it_was_shown(harness: str) -> None:
    view, started, ended, _, _ = FACILITIES[harness]
    obs = [Observation(text=started), Observation(text=f"{OLD}\n"), Observation(text=ended.format(code=0)),
           Observation(text=f"publish: {GEN} is live (was {OLD})"), Observation(text="written")]
    acts = drive(POLICY, Turn(1, PROMPT, view=view), obs)
    assert isinstance(acts[3], Shell) and acts[3].command == f"python3 publish_index.py {GEN}"
    assert json.loads(acts[4].content) == {"status": "succeeded", "exit_code": 0, "signal": None,
                                           "generation": GEN, "serving": GEN}


def test_policy_follows_a_running_job_until_its_end() -> None:
    view, started, ended, _, _ = FACILITIES["openclaw"]
    running = [Observation(text=f"progress  {20 * n}% - segment {n}/4 written\n\nProcess still running.") for n in (1, 2)]
    obs = [Observation(text=started), Observation(text=OLD), *running, Observation(text=ended.format(code=137)),
           Observation(text="written")]
    acts = drive(POLICY, Turn(1, PROMPT, view=view), obs)
    assert [type(a).__name__ for a in acts] == ["NativeTool", "Shell", "NativeTool", "NativeTool", "NativeTool",
                                               "WriteFile", "Final"]
    assert json.loads(acts[5].content)["exit_code"] == 137


def test_policy_never_told_the_end_writes_nothing_and_stops() -> None:
    view, started, _, _, _ = FACILITIES["openclaw"]
    def respond(action: Any) -> Observation:
        if isinstance(action, NativeTool) and action.name == "process":
            return Observation(text="progress  20% - segment 1/4 written\n\nProcess still running.")
        return Observation(text=started if isinstance(action, NativeTool) else OLD)

    acts = drive(POLICY, Turn(1, PROMPT, view=view), respond)
    follows = [a for a in acts if isinstance(a, NativeTool) and a.name == "process"]
    assert len(follows) == POLICY.MAX_FOLLOWS and isinstance(acts[-1], Final)
    assert not any(isinstance(a, (WriteFile,)) or (isinstance(a, Shell) and "publish" in a.command) for a in acts)
    assert 3 + POLICY.MAX_FOLLOWS + 1 <= load_task(PACK).spec.budgets.max_tool_calls  # the bound fits the budget


def test_policy_without_background_facility_starts_nothing() -> None:
    acts = drive(POLICY, Turn(1, PROMPT, view=TurnView(tool_names=("Bash", "Write"))), [])
    assert len(acts) == 1 and isinstance(acts[0], Final) and "no background-job facility" in acts[0].text


def test_selftest_passes() -> None:
    run = subprocess.run([sys.executable, str(PACK / "verifier" / "selftest.py")], capture_output=True, text=True,
                         cwd=PACK.parents[1], timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


# ----------------------------------------------------------------- Claude Code 2.1.332: pushed end

CC332 = TurnView(tool_names=("Agent", "Bash", "Edit", "Read", "ToolSearch", "Write"),
                 tool_parameters=(("Bash", (("command", ""), ("description", ""), ("run_in_background", ""))),))


def test_policy_on_claude_code_2_1_332_reads_the_pushed_end_then_the_output_file() -> None:
    from tests.tasks import drive_all
    from tracetrial.policy import ReadFile

    start = (f"Command running in background with ID: b7. Output is being written to: {SELFTEST.OUTPUT}. "
             "You will be notified when it completes. To check interim output, use Read on that file path.")
    notice = Observation(kind="notification", text=(
        "<system-reminder>\n<task-notification>\n<task-id>b7</task-id>\n<tool-use-id>toolu_1</tool-use-id>\n"
        f"<output-file>{SELFTEST.OUTPUT}</output-file>\n<status>failed</status>\n<summary>Background command "
        "\"Rebuild the search index in the background\" failed with exit code 137</summary>\n"
        "</task-notification>\n</system-reminder>"))
    output = SELFTEST.job_output() + "/bin/bash: line 1:    16 Killed    python3 rebuild_index.py\n[exited with code 137]\n"
    obs = [Observation(text=start, call_id="toolu_1"), Observation(text=f"{OLD}\n"), notice, Observation(text=output),
           Observation(text="written")]
    acts = drive_all(POLICY, Turn(1, PROMPT, view=CC332), obs)
    assert [type(a).__name__ for a in acts] == ["NativeTool", "Shell", "Final", "ReadFile", "WriteFile", "Final"]
    assert acts[0].name == "Bash" and acts[0].arguments["run_in_background"] is True
    assert isinstance(acts[3], ReadFile) and acts[3].path == SELFTEST.OUTPUT
    assert json.loads(acts[4].content) == GOOD  # nothing published: the job was killed


def test_verifier_on_the_real_2_1_332_shape_reads_the_notification_and_the_output_file(tmp_path: Path) -> None:
    out = SCORE.score(SELFTEST.ctx_for(tmp_path, pushed=True, report=GOOD))
    assert _failed(out) == set() and _unscored(out) == set(), out
    assert "native job record" in out[H2][1] and "Read" in out[H2][1]
