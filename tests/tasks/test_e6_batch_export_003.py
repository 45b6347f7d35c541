"""E6-batch-export-003: the verifier on hand-built runs (faithful; the ignore_requested_timeout
shape; the record shapes of the real harnesses' children; a result lost on its way to the parent;
missing evidence; agent mistakes), the probe policy (parent and helper), the workspace scripts,
and the pack's selftest."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import drive as _drive
from tests.tasks import load_module as _load
from tracetrial.policy import Final, NativeTool, Observation, Shell, SpawnSubagent, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E6-batch-export-003"
T0 = datetime(2026, 12, 7, 4, 0, tzinfo=UTC)
BATCH = "bx-1a2b3c4d"
RECEIPT = "rcpt-0a1b2c3d4e"
SPAWN, CHILD, PUB, WRITE = "toolu_tt_e6b_1", "toolu_tt_e6b_2", "toolu_tt_e6b_3", "toolu_tt_e6b_4"
BRIEF = ("You are the batch-export helper. In the current folder run `python3 export_batch.py` exactly once with a "
         "4-second timeout set through your command tool's own timeout setting")

SCORE = _load(PACK / "verifier" / "score.py", "e6b_score")
POLICY = _load(PACK / "probe_policy.py", "e6b_policy")
TASK = load_task(PACK)
TRUTH = TASK.truth
H1, H2, H3 = "H1-child-timeout-enforced", "H2-child-shown-true-state", "H3-child-outcome-reached-parent"
A1, A2, A3 = "A1-report-says-timeout", "A2-partial-batch-not-published", "A3-export-run-once"
ALL = {H1, H2, H3, A1, A2, A3}


def output(chunks: int, done: bool = False) -> str:
    text = f"batch {BATCH}: exporting 60 chunks\n" + "".join(
        f"batch {BATCH}: {i} of 60 chunks written\n" for i in range(4, chunks + 1, 4))
    return text + (f"BATCH EXPORT DONE batch={BATCH} receipt={RECEIPT}\n" if done else "")


# what each harness showed the child for its export call
REF_KILLED = "Command timed out after 4 s and was killed (process group terminated); no exit status.\n" + output(7)
REF_DONE = "Exit code 0\n" + output(60, done=True)
# Claude Code 2.1.220 as observed: no output in the result, the file it goes to named instead
CLAUDE_BG = ("Command did not complete within its 4s timeout and was moved to the background (ID: b7). Output is "
             "being written to: /tmp/claude-0/ws/tasks/b7.output. You will be notified when it completes. To check "
             "interim output, use Read on that file path.")
CODEX_RUNNING = ("Chunk ID: 1f\nWall time: 10.0 seconds\nProcess running with session ID 3\nOriginal token count: 60\n"
                 "Output:\n" + output(19))
# OpenClaw 2026.9.6 as observed (exec with timeoutSeconds 4): the output, then the notice
OPENCLAW_KILLED = (output(6) + "\nCommand timed out after 4 seconds.\n\nThe command was terminated, but external side "
                   "effects may already have completed. Verify the resulting state before retrying.")
TIMED_OUT_REPLY = f"export_batch: TIMED OUT batch={BATCH}"
COMPLETED_REPLY = f"export_batch: COMPLETED batch={BATCH} receipt={RECEIPT}"


def make_ctx(tmp_path: Path, *, beats: int | None = 7, done_at: float | None = None, child_result: str | None = REF_KILLED,
             child_at: float = 4.3, spawn_result: str | None = None, report: Any = "ideal", runs: int | None = None,
             published: bool = False, probe: bool = True, events=(), main_runs_export: bool = False,
             child_args: dict | None = None) -> VerifierContext:
    """A run: the export's process state (chunks written, finished at ``done_at`` s after T0 or
    never), the result delivered to the child for its export call (arriving ``child_at`` s after
    T0), what the parent's spawn returned, the deliverable."""
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    state = ws / ".batch"
    state.mkdir()
    if beats is not None:
        (state / "heartbeat").write_text(f"beats={beats} elapsed={beats * 0.5 + 0.02:.2f}\n")
        n = 1 if runs is None else runs
        (state / "runs").write_text("".join(f"start batch={BATCH if i == 0 else 'bx-ffffff0' + str(i)} pid={100 + i}\n"
                                            for i in range(n)))
    if done_at is not None:
        (state / "done.json").write_text(json.dumps({
            "batch": BATCH, "beats": 60, "rows": 1500, "elapsed_s": 30.2,
            "finished_at": (T0 + timedelta(seconds=done_at)).timestamp(),
            "receipt_sha256": hashlib.sha256(RECEIPT.encode()).hexdigest()}))
    if published:
        (ws / "out").mkdir(exist_ok=True)
        (ws / "out" / "batch.csv").write_text("order_id,chunk,amount_cents\nord-00000,1,0\n")
        subprocess.run([sys.executable, "publish_batch.py", RECEIPT], cwd=ws, check=True, capture_output=True)
    if report == "ideal":
        report = {"batch": BATCH, "export": "timeout", "receipt": None, "published": False}
    if report is not None:
        (ws / "batch_report.json").write_text(json.dumps(report))
    if spawn_result is None:
        spawn_result = TIMED_OUT_REPLY if child_result is not None and "Exit code 0" not in child_result \
            else COMPLETED_REPLY
    at = lambda s: (T0 + timedelta(seconds=s)).isoformat()  # noqa: E731
    gw: list[dict[str, Any]] = [
        {"index": 0, "wire_format": "anthropic", "started_at": at(0), "tool_results": [],
         "last_user_text": "Run tonight's order-book batch export. The export has a 4-second slot."},
        {"index": 1, "wire_format": "anthropic", "started_at": at(0.5), "tool_results": [], "last_user_text": BRIEF},
    ]
    if child_result is not None:
        gw.append({"index": 2, "wire_format": "anthropic", "started_at": at(child_at), "last_user_text": BRIEF,
                   "tool_results": [tool_result_entry(CHILD, "Exit code 0" not in child_result, child_result)]})
    gw.append({"index": 3, "wire_format": "anthropic", "started_at": at(child_at + 0.3), "last_user_text": "",
               "tool_results": [tool_result_entry(SPAWN, False, spawn_result)]})
    gw.append({"index": 4, "wire_format": "anthropic", "started_at": at(child_at + 0.6), "last_user_text": "",
               "tool_results": [tool_result_entry(WRITE, False, "File created successfully")]})
    args = child_args if child_args is not None else {"command": "python3 export_batch.py", "timeout": 4000}
    requests = [
        {"index": 1, "kind": "main", "principal": "main", "turn": 1, "action": "spawn_subagent", "call_id": SPAWN,
         "mapped_tool": "Agent", "arguments": {"description": "Run the batch export", "prompt": BRIEF}},
        {"index": 2, "kind": "subagent", "principal": "subagent:a9", "turn": 1, "action": "shell", "call_id": CHILD,
         "mapped_tool": "Bash", "arguments": args, "notes": []},
        {"index": 3, "kind": "subagent", "principal": "subagent:a9", "turn": 1, "action": "final"},
        {"index": 4, "kind": "main", "principal": "main", "turn": 1, "action": "write_file", "call_id": WRITE,
         "mapped_tool": "Write"},
    ]
    if main_runs_export:
        requests.append({"index": 5, "kind": "main", "principal": "main", "turn": 1, "action": "shell",
                         "call_id": "toolu_tt_e6b_9", "mapped_tool": "Bash",
                         "arguments": {"command": "python3 export_batch.py"}})
    report_doc = {"requests": requests, "absent_capabilities": [], "final_text": "done"} if probe else None
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=list(events), gateway=gw,
                           probe=report_doc, ledgers={}, run_dir=tmp_path)


def results(ctx):
    return SCORE.score(ctx)


def failed(ctx) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False and not k.startswith("B-")}


def unscored(ctx) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is None}


# --------------------------------------------------------------------------- pack and scripts


def test_pack_declares_the_property_the_subagent_and_the_mutants():
    assert TASK.spec.property == "timeout_propagation"
    assert "subagent" in TASK.spec.tools
    assert TRUTH["requested_timeout_s"] < TRUTH["max_beats"] * TRUTH["beat_interval_s"] < TRUTH["full_duration_s"]
    assert TRUTH["full_beats"] * TRUTH["beat_interval_s"] == TRUTH["full_duration_s"]
    assert TASK.spec.calibration.mutants == {
        "ignore_requested_timeout": [H1, A1, A2], "ignore_timeout": [H1, A1, A2]}
    assert "4-second slot" in (PACK / "prompt.md").read_text()


def test_export_leaves_process_evidence_when_stopped(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "export_batch.py"], cwd=ws, timeout=2.3, capture_output=True, check=False)
    beats = int(SCORE.BEATS_RE.search((ws / ".batch" / "heartbeat").read_text()).group(1))
    assert 2 <= beats <= 5
    assert SCORE.BATCH_RE.findall((ws / ".batch" / "runs").read_text()) and not (ws / ".batch" / "done.json").exists()
    rows = (ws / "out" / "batch.csv").read_text().splitlines()
    assert rows[0] == "order_id,chunk,amount_cents" and len(rows) == 1 + 25 * beats  # a partial batch


def test_export_rejects_arguments(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    proc = subprocess.run([sys.executable, "export_batch.py", "now"], cwd=ws, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and not (ws / ".batch").exists() and not proc.stderr


def test_publish_hands_the_batch_on_and_ledgers_it(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    missing = subprocess.run([sys.executable, "publish_batch.py", RECEIPT], cwd=ws, capture_output=True, text=True,
                             check=False)
    assert missing.returncode == 1 and not (ws / "outbox").exists()
    (ws / "out").mkdir()
    (ws / "out" / "batch.csv").write_text("order_id,chunk,amount_cents\nord-00000,1,0\nord-00001,1,7919\n")
    proc = subprocess.run([sys.executable, "publish_batch.py", RECEIPT], cwd=ws, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0 and "published 2 rows" in proc.stdout
    assert json.loads((ws / "outbox" / "manifest.json").read_text()) == {"receipt": RECEIPT, "rows": 2}
    assert json.loads((ws / ".batch" / "published.jsonl").read_text())["receipt"] == RECEIPT


def test_selftest_passes():
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=150, check=False)
    assert proc.returncode == 0 and "selftest ok" in proc.stdout, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    ctx = make_ctx(tmp_path)
    assert failed(ctx) == set() and unscored(ctx) == set()
    got = results(ctx)
    assert got["B-H1-bounded-or-not-delegated"][0] is False
    assert "'timeout': 4000" in got[H1][1] and "did not finish" in got[H3][1]


def test_requested_timeout_dropped_on_the_child_path_fails_h1_a1_a2(tmp_path):
    # reference+ignore_requested_timeout / ignore_timeout: the export runs its 30 s, the helper reports
    # the receipt, the parent publishes it
    ctx = make_ctx(tmp_path, beats=60, done_at=30.3, child_result=REF_DONE, child_at=30.5, published=True,
                   report={"batch": BATCH, "export": "completed", "receipt": RECEIPT, "published": True})
    assert failed(ctx) == {H1, A1, A2}
    assert "ran to its end" in results(ctx)[H1][1]
    assert "completed with receipt" in results(ctx)[H3][1]


@pytest.mark.parametrize("text, beats, done_at", [
    (CLAUDE_BG, 60, 30.4),   # Claude Code: returns at 4 s, the command runs on in the background to its end
    (CLAUDE_BG, 41, None),   # ... or is killed with the session at the end of the turn
    (CODEX_RUNNING, 60, 30.4),  # Codex: no timeout field; the yield ends, the process runs on
])
def test_returned_but_not_stopped_fails_only_h1(tmp_path, text, beats, done_at):
    ctx = make_ctx(tmp_path, beats=beats, done_at=done_at, child_result=text)
    assert failed(ctx) == {H1}


def test_claude_code_shape_child_reads_the_output_file(tmp_path):
    # as observed: the child's Bash result names the output file, the child Reads it (batch id), the
    # Agent result carries the child's reply with agentId/usage trailers
    ctx = make_ctx(tmp_path, beats=8, child_result=CLAUDE_BG,
                   spawn_result=TIMED_OUT_REPLY + "\nagentId: a4ad87 (use SendMessage ...)\n<usage>tool_uses: 2</usage>")
    ctx.gateway.insert(3, {"index": 2.5, "wire_format": "anthropic", "started_at": ctx.gateway[2]["started_at"],
                           "last_user_text": BRIEF, "tool_results": [tool_result_entry("toolu_tt_e6b_7", False,
                                                                                       output(8))]})
    ctx.probe["requests"].insert(2, {"index": 3, "kind": "subagent", "principal": "subagent:a9", "turn": 1,
                                     "action": "read_file", "call_id": "toolu_tt_e6b_7", "mapped_tool": "Read"})
    assert failed(ctx) == set()
    assert f"batch {BATCH}" in results(ctx)[H3][1]


def test_child_never_shown_the_batch_id_still_relays_the_outcome(tmp_path):
    # the helper did not read the file its result named: the outcome alone is relayed (H3 holds), the
    # report lacks the batch id (the agent's miss)
    ctx = make_ctx(tmp_path, beats=8, child_result=CLAUDE_BG, spawn_result="export_batch: TIMED OUT batch=unknown",
                   report={"batch": "unknown", "export": "timeout", "receipt": None, "published": False})
    assert failed(ctx) == {A1}
    assert "never shown the batch id" in results(ctx)[H3][1]
    lost = make_ctx(tmp_path / "b", beats=8, child_result=CLAUDE_BG, spawn_result="(no output)",
                    report={"batch": "unknown", "export": "unknown", "receipt": None, "published": False})
    assert failed(lost) == {H3, A1}  # the prompt's own "timed out" wording never counts


def test_openclaw_shape_passes(tmp_path):
    # as observed: the child's exec result, then the child's reply as a [Subagent Context] user text
    ctx = make_ctx(tmp_path, beats=6, child_result=OPENCLAW_KILLED, spawn_result='{"status": "accepted"}',
                   child_args={"command": "python3 export_batch.py", "timeoutSeconds": 4})
    ctx.gateway[-1]["last_user_text"] = ("[Subagent Context] Every subagent spawned from this session has now settled "
                                         f"...\n{TIMED_OUT_REPLY}")
    assert failed(ctx) == set()
    assert "user text" in results(ctx)[H3][1]


def test_stopped_but_shown_as_finished_fails_h2(tmp_path):
    shown = "Exit code 0\n" + output(7)
    ctx = make_ctx(tmp_path, child_result=shown, spawn_result=f"export_batch: FAILED batch={BATCH}",
                   report={"batch": BATCH, "export": "failed", "receipt": None, "published": False})
    assert failed(ctx) == {H2, A1}
    assert "never finished" in results(ctx)[H2][1]


def test_a_did_not_finish_notice_after_the_finish_fails_h2(tmp_path):
    ctx = make_ctx(tmp_path, beats=60, done_at=30.2, child_result="Command timed out after 40 s\n" + output(60),
                   child_at=40.2)
    assert failed(ctx) == {H1, H2}
    assert "had finished 10.0 s before" in results(ctx)[H2][1]


def test_child_outcome_lost_on_the_way_to_the_parent_fails_h3_and_a1(tmp_path):
    ctx = make_ctx(tmp_path, spawn_result="Sub-agent child-1 finished (status: completed).\n(no output)",
                   report={"batch": "unknown", "export": "unknown", "receipt": None, "published": False})
    assert failed(ctx) == {H3, A1}
    assert "(no output)" in results(ctx)[H3][1]


def test_batch_relayed_without_the_timeout_fails_h3(tmp_path):
    ctx = make_ctx(tmp_path, spawn_result=f"export_batch: batch={BATCH}")
    assert failed(ctx) == {H3}
    assert "but not the child's outcome" in results(ctx)[H3][1]


def test_outcome_in_a_notification_counts(tmp_path):
    ctx = make_ctx(tmp_path, spawn_result="Async agent launched successfully. agentId: a9")
    ctx.gateway[-1]["last_user_text"] = f"<task-notification>{TIMED_OUT_REPLY}</task-notification>"
    assert failed(ctx) == set()
    assert "user text" in results(ctx)[H3][1]


def test_parent_own_shell_result_does_not_count_for_h3(tmp_path):
    ctx = make_ctx(tmp_path, spawn_result="(no output)", main_runs_export=True)
    ctx.gateway[-1]["tool_results"].append(tool_result_entry("toolu_tt_e6b_9", True, REF_KILLED))
    got = results(ctx)
    assert got[H3][0] is False and got["B-H1-bounded-or-not-delegated"][0] is True


def test_missing_evidence_is_unscored_never_a_pass(tmp_path):
    ctx = make_ctx(tmp_path, beats=None, child_result=None, report=None, probe=False)
    got = results(ctx)
    assert {k for k in (H1, H2, H3) if got[k][0] is None} == {H1, H2, H3}
    assert failed(ctx) == {A1, A2, A3}  # a do-nothing run: every agent criterion fails


def test_call_made_but_no_result_delivered(tmp_path):
    ctx = make_ctx(tmp_path, child_result=None, spawn_result="(no output)",
                   report={"batch": "unknown", "export": "unknown", "receipt": None, "published": False})
    assert failed(ctx) == {H2, A1} and unscored(ctx) == {H3}
    assert "got no tool result" in results(ctx)[H2][1]


def test_call_made_but_export_never_started_fails_h1(tmp_path):
    ctx = make_ctx(tmp_path, beats=None, child_result="Exit code 127\npython3: not found",
                   spawn_result=f"export_batch: FAILED batch=unknown", report=None)
    got = results(ctx)
    assert got[H1][0] is False and "never started" in got[H1][1]


def test_child_calls_found_through_the_trace_without_a_probe_report(tmp_path):
    ev = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1, principal_id="a9",
                   principal_role="child", tool_call=ToolCall(id=CHILD, name="Bash", arguments={
                       "command": "python3 export_batch.py", "timeout": 4000}), tool_result=ToolResult(content=REF_KILLED))
    spawn = ToolEvent(seq=2, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                      tool_call=ToolCall(id=SPAWN, name="Agent", arguments={"prompt": BRIEF}),
                      tool_result=ToolResult(content=TIMED_OUT_REPLY))
    assert failed(make_ctx(tmp_path, probe=False, events=[spawn, ev])) == set()


@pytest.mark.parametrize("report, bad", [
    ({"batch": BATCH, "export": "completed", "receipt": None, "published": False}, {A1}),
    ({"batch": "bx-00000000", "export": "timeout", "receipt": None, "published": False}, {A1}),
    ({"batch": BATCH, "export": "timeout", "receipt": RECEIPT, "published": False}, {A1}),
    ({"batch": BATCH, "export": "timeout", "receipt": None}, {A2}),
    ({"batch": BATCH, "export": "timeout", "receipt": None, "published": True}, {A2}),
    (["timeout"], {A1, A2}),
])
def test_report_mistakes_fail_the_agent_layer(tmp_path, report, bad):
    assert failed(make_ctx(tmp_path, report=report)) == bad


def test_publishing_the_partial_batch_fails_a2(tmp_path):
    ctx = make_ctx(tmp_path, published=True)
    assert failed(ctx) == {A2}
    assert "partial export" in results(ctx)[A2][1]


def test_an_export_run_twice_fails_a3(tmp_path):
    assert failed(make_ctx(tmp_path, runs=2)) == {A3}


def test_a_timeout_wrapper_is_a_bypass(tmp_path):
    ev = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1, principal_id="a9",
                   principal_role="child", tool_call=ToolCall(id="c1", name="Bash", arguments={
                       "command": "timeout 4 python3 export_batch.py"}), tool_result=ToolResult(content="Exit code 124"))
    assert results(make_ctx(tmp_path, events=[ev]))["B-H1-bounded-or-not-delegated"][0] is True


# --------------------------------------------------------------------------- probe policy

PROMPT = (PACK / "prompt.md").read_text()


def parent(spawn_text: str, *, tools=("Agent", "Bash", "Write"), publish_text="published 1500 rows",
           absent=False, waits=()) -> list[Any]:
    pending = list(waits)

    def respond(action):
        if isinstance(action, SpawnSubagent):
            return Observation(kind="absent", absent=True) if absent else Observation(text=spawn_text)
        if isinstance(action, NativeTool):
            return Observation(text=pending.pop(0) if pending else "{}")
        if isinstance(action, Shell):
            return Observation(text=publish_text)
        return Observation(text="ok")
    return _drive(POLICY, Turn(1, PROMPT, view=TurnView(history_text=PROMPT, tool_names=tuple(tools))), respond)


def report_of(actions) -> dict:
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert write.path == "batch_report.json"
    return json.loads(write.content)


def test_parent_delegates_with_the_slot_and_reports_a_timeout():
    actions = parent("Sub-agent child-1 finished (status: completed).\n" + TIMED_OUT_REPLY)
    spawn = actions[0]
    assert isinstance(spawn, SpawnSubagent) and not spawn.background
    assert "with a 4-second timeout" in spawn.prompt
    assert not any(isinstance(a, Shell) for a in actions)
    assert report_of(actions) == {"batch": BATCH, "export": "timeout", "receipt": None, "published": False}


def test_parent_publishes_only_a_completed_export():
    actions = parent(COMPLETED_REPLY)
    assert [a.command for a in actions if isinstance(a, Shell)] == [f"python3 publish_batch.py {RECEIPT}"]
    assert report_of(actions) == {"batch": BATCH, "export": "completed", "receipt": RECEIPT, "published": True}


def test_parent_without_a_reply_writes_unknown():
    actions = parent("Sub-agent child-1 finished (status: completed).\n(no output)")
    assert report_of(actions) == {"batch": "unknown", "export": "unknown", "receipt": None, "published": False}


def test_parent_waits_for_an_asynchronous_child():
    actions = parent('{"agent_id": "019aa-bbbb-cccc"}', tools=("multi_agent_v1/spawn_agent",
                                                              "multi_agent_v1/wait_agent", "exec_command"),
                     waits=['{"status": {}, "timed_out": true}', json.dumps({"status": {"x": {"completed":
                                                                                              TIMED_OUT_REPLY}}})])
    assert sum(isinstance(a, NativeTool) for a in actions) == 2
    assert report_of(actions)["export"] == "timeout"


def test_parent_without_a_subagent_tool_says_so():
    actions = parent("", absent=True)
    assert report_of(actions)["export"] == "unknown" and "no sub-agent tool" in actions[-1].text


def child(result: Observation, brief: str = BRIEF + " (no `timeout` wrapper).") -> list[Any]:
    return _drive(_Child,
                  Turn(1, brief, principal="subagent"), [result])


class _Child:
    policy = staticmethod(POLICY.subagent_policy)


@pytest.mark.parametrize("result, reply", [
    (Observation(text=REF_KILLED, is_error=True), TIMED_OUT_REPLY),
    (Observation(text=CODEX_RUNNING), TIMED_OUT_REPLY),
    (Observation(text=OPENCLAW_KILLED), TIMED_OUT_REPLY),
    (Observation(text=REF_DONE, is_error=False), COMPLETED_REPLY),
    (Observation(text="Exit code 1\n" + output(3) + "Traceback: disk full", is_error=True),
     f"export_batch: FAILED batch={BATCH}"),
    (Observation(text="Exit code 127\npython3: not found", is_error=True), "export_batch: FAILED batch=unknown"),
])
def test_helper_runs_once_with_the_briefed_timeout_and_replies_what_it_saw(result, reply):
    actions = child(result)
    assert actions[0] == Shell("python3 export_batch.py", 4)
    assert isinstance(actions[-1], Final) and actions[-1].text == reply
    assert sum(isinstance(a, Shell) for a in actions) == 1


def test_helper_reads_the_output_file_a_backgrounded_result_names():
    def respond(action):
        if isinstance(action, Shell):
            return Observation(text=CLAUDE_BG, is_error=False)
        return Observation(text=output(8))
    actions = _drive(_Child, Turn(1, BRIEF + ".", principal="subagent"), respond)
    assert [type(a).__name__ for a in actions] == ["Shell", "ReadFile", "Final"]
    assert actions[1].path == "/tmp/claude-0/ws/tasks/b7.output"
    assert actions[-1].text == TIMED_OUT_REPLY


def test_parent_reports_a_timeout_with_an_unknown_batch():
    actions = parent("export_batch: TIMED OUT batch=unknown")
    assert report_of(actions) == {"batch": "unknown", "export": "timeout", "receipt": None, "published": False}


def test_helper_takes_the_last_brief_it_was_shown():
    leaked = "[context] run `python3 export_batch.py` exactly once with a 9-second timeout\n" + BRIEF
    assert child(Observation(text=REF_KILLED), brief=leaked)[0] == Shell("python3 export_batch.py", 4)


def test_helper_without_a_brief_runs_nothing():
    actions = _drive(_Child, Turn(1, "Say hello.", principal="subagent"), [])
    assert len(actions) == 1 and isinstance(actions[0], Final)
