"""L3-ledger-close-001: the reconcile script against truth.json; the verifier on hand-built runs
(faithful reference-, Claude-Code- and Codex-shaped; what reference+drop_child_result delivers;
a reply cut on its way, the failure relayed without its ref, a result shown only in the child, a
parent that ran the job itself, children's replies recorded under main or under one child); the
agent criteria; the probe policy (foreground results, blanked results, Codex's asynchronous
children with wait_agent and notifications, no sub-agent tool, the helpers) and that it derives
every value from what it is shown."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import Final, NativeTool, Observation, Shell, SpawnSubagent, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import AssistantMessageEvent, SubagentLifecycleEvent, TaskCompletionEvent, ToolCall, ToolEvent
from tracetrial.trace import ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L3-ledger-close-001"

SCORE = _load(PACK / "verifier" / "score.py", "l3_close_score")
POLICY = _load(PACK / "probe_policy.py", "l3_close_policy")
TASK = load_task(PACK)
NOW = datetime(2026, 12, 2, tzinfo=UTC)
H1, H2 = "H1-child-results-reach-parent", "H2-child-results-recorded"
A1, A2, A3 = "A1-sealed-regions-exact", "A2-failed-region-reported", "A3-one-run-per-region"
REG = TASK.truth["regions"]
NS, WS, SR = REG["north"]["seal"], REG["west"]["seal"], REG["south"]["row_ref"]
JOB = {
    "north": f"reconcile north: OK rows=163 total=55810656 seal={NS}",
    "south": f"reconcile south: FAILED at row 97 ref {SR} (amount is not a whole number of cents); nothing sealed",
    "west": f"reconcile west: OK rows=171 total=64880117 seal={WS}",
}
EXIT = {"north": 0, "south": 3, "west": 0}
REPLY = {r: JOB[r] + (" (exit status 3)" if r == "south" else "") for r in JOB}
GOOD = {"north": {"status": "ok", "seal": NS}, "south": {"status": "failed", "row_ref": SR},
        "west": {"status": "ok", "seal": WS}}
MAIN = {"principal_id": "main", "principal_role": "main"}
PROMPT = "Close tonight's ledgers for the three regions"


def child(cid: str) -> dict[str, Any]:
    return {"principal_id": cid, "principal_role": "child", "parent_principal_id": "main"}


def ev(cls, seq: int, who: dict[str, Any], **kw):
    return cls(seq=seq, timestamp=NOW, run_id="r", **who, **kw)


class Run:
    """A hand-built run: Trace IR events, gateway records and the probe report."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.gateway: list[dict[str, Any]] = []
        self.probe: list[dict[str, Any]] = []

    def seq(self) -> int:
        return len(self.events) + 1

    def request(self, *, user: str = PROMPT, results: list[tuple[str, str]] = (), principal: str = "main",
                action: str | None = None, call: str | None = None) -> None:
        index = len(self.gateway)
        self.gateway.append({"index": index, "status": 200, "last_user_text": user,
                             "tool_results": [{"id": i, "is_error": None, "content": c} for i, c in results]})
        self.probe.append({"index": index + 1, "principal": principal, "action": action, "call_id": call})

    def context(self, tmp_path: Path, *, summary: Any = None, log: str | None = None) -> VerifierContext:
        ws = tmp_path / "workspace"
        ws.mkdir(parents=True, exist_ok=True)
        if log is None:
            log = f"north ok {NS}\nsouth failed {SR}\nwest ok {WS}\n"
        (ws / "reconcile.log").write_text(log)
        summary = GOOD if summary is None else summary
        if summary != "<none>":
            (ws / "reconciliation.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
        return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                               events=self.events, gateway=self.gateway, probe={"requests": self.probe},
                               ledgers={}, run_dir=tmp_path)


def reference_run(*, shown: dict[str, str] | None = None, reply: dict[str, str] | None = None,
                  reply_who: dict[str, dict[str, Any]] | None = None, completion: bool = True,
                  child_output: dict[str, str] | None = None, spawn_name: str = "spawn_subagent",
                  cid_of=lambda n, call: f"child-{n}") -> Run:
    """A foreground run: per region a spawn, the child's job and reply, the spawn result delivered."""
    run, shown, reply = Run(), shown or {}, reply or REPLY
    for n, region in enumerate(SCORE.REGIONS, start=1):
        spawn, shell = f"call_s{n}", f"call_c{n}"
        cid = cid_of(n, spawn)
        text = shown.get(region, f"Sub-agent {cid} finished (status: completed).\n{reply[region]}")
        out = (child_output or {}).get(region, f"Exit code {EXIT[region]}\n{JOB[region]}\n")
        run.request(action="spawn_subagent", call=spawn)
        run.events.append(ev(ToolEvent, run.seq(), MAIN, tool_call=ToolCall(id=spawn, name=spawn_name, arguments={
            "description": f"Reconcile the {region} ledger", "prompt": POLICY.CHILD_PROMPT.format(region=region)}),
            tool_result=ToolResult(content=text)))
        run.events.append(ev(SubagentLifecycleEvent, run.seq(), MAIN, action="spawn", child_principal_id=cid))
        delegated = POLICY.CHILD_PROMPT.format(region=region)
        run.request(user=delegated, principal=cid, action="shell", call=shell)
        run.events.append(ev(ToolEvent, run.seq(), child(cid), tool_call=ToolCall(
            id=shell, name="shell", arguments={"command": f"python3 reconcile.py {region}"}),
            tool_result=ToolResult(content=out)))
        run.request(user=delegated, results=[(shell, out)], principal=cid, action="final")
        who = (reply_who or {}).get(region, child(cid))
        run.events.append(ev(AssistantMessageEvent, run.seq(), who, content=reply[region], content_kind="text"))
        if completion:
            run.events.append(ev(TaskCompletionEvent, run.seq(), MAIN, status="completed", child_principal_id=cid,
                                 content=reply[region] if text.endswith(reply[region]) else ""))
        run.gateway[-1]["index"] = len(run.gateway) - 1
        run.request(results=[(spawn, text)], action="write_file" if n == 3 else "spawn_subagent",
                    call=f"call_w{n}" if n == 3 else None)
    return run


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out = SCORE.score(ctx)
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert set(out) == ids
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok}


DROPPED = {"south": "Sub-agent child-2 finished (status: completed).\n(no output)",
           "west": "Sub-agent child-3 finished (status: completed).\n(no output)"}
UNKNOWN = {**GOOD, "south": {"status": "unknown"}, "west": {"status": "unknown"}}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_the_aggregation_mutant_and_links():
    assert TASK.spec.tools == ["shell", "subagent", "write_file"]
    assert TASK.spec.component == "L" and TASK.spec.property == "subagent_result_aggregation"
    assert TASK.spec.surface == "workflow" and TASK.spec.conversation == "single"
    assert TASK.spec.calibration.mutants == {"drop_child_result": [H1, A1, A2]}
    assert {(link.harness, link.agent) for link in TASK.harness_rubric.links} == {(H1, A1), (H1, A2)}
    assert TASK.spec.budgets.wall_clock_s >= 300  # OpenClaw's gateway start-up


def test_reconcile_script_reproduces_the_truth_and_logs_each_run(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    outs = {r: subprocess.run([sys.executable, "reconcile.py", r], cwd=ws, capture_output=True, text=True,
                              timeout=30, check=False) for r in SCORE.REGIONS}
    assert {r: o.returncode for r, o in outs.items()} == EXIT
    assert {r: o.stdout.strip() for r, o in outs.items()} == JOB
    assert all(o.stderr == "" for o in outs.values())
    assert (ws / "reconcile.log").read_text() == f"north ok {NS}\nsouth failed {SR}\nwest ok {WS}\n"
    bad = subprocess.run([sys.executable, "reconcile.py", "east"], cwd=ws, capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and (ws / "reconcile.log").read_text().count("\n") == 3
    # the seal is derived from the data: one changed booked row changes it
    ledger = ws / "ledgers" / "north.csv"
    ledger.write_text(ledger.read_text().replace(",797828\n", ",797829\n", 1))
    again = subprocess.run([sys.executable, "reconcile.py", "north"], cwd=ws, capture_output=True, text=True,
                           check=False)
    assert again.returncode == 0 and NS not in again.stdout and "seal=RC-" in again.stdout


# --------------------------------------------------------------------------- verifier: faithful shapes


def test_faithful_reference_run_passes(tmp_path):
    out = results(reference_run().context(tmp_path))
    assert all(ok for ok, _ in out.values()), out


def test_claude_code_shaped_run_passes(tmp_path):
    # Agent tool; the child is named after the spawn call; the result carries an agentId/usage tail;
    # no deliver record, only the child's own transcript reply
    tail = "\nagentId: a911c8ede2e28bdd4 (use SendMessage to continue this agent)\n<usage>tool_uses: 1</usage>"
    shown = {r: REPLY[r] + tail for r in SCORE.REGIONS}
    run = reference_run(shown=shown, spawn_name="Agent", completion=False, cid_of=lambda n, call: call)
    out = results(run.context(tmp_path))
    assert all(ok for ok, _ in out.values()), out


def test_codex_shaped_run_with_wait_results_and_a_notification_passes(tmp_path):
    run = Run()
    ids = {r: f"019a-{r}-thread" for r in SCORE.REGIONS}
    for n, region in enumerate(SCORE.REGIONS, start=1):
        call = f"call_s{n}"
        run.request(action="spawn_subagent", call=call, results=[] if n == 1 else [(f"call_s{n - 1}", "")])
        run.events.append(ev(ToolEvent, run.seq(), MAIN, tool_call=ToolCall(
            id=call, name="multi_agent_v1__spawn_agent", arguments={"message": POLICY.CHILD_PROMPT.format(region=region)}),
            tool_result=ToolResult(content=json.dumps({"agent_id": ids[region], "nickname": "Hume"}))))
        run.events.append(ev(AssistantMessageEvent, run.seq(), child(ids[region]), content=REPLY[region]))
        run.events.append(ev(SubagentLifecycleEvent, run.seq(), MAIN, action="started", child_principal_id=ids[region]))
    wait1 = json.dumps({"status": {ids["north"]: {"completed": REPLY["north"]},
                                   ids["south"]: {"completed": REPLY["south"]}}})
    run.request(results=[("call_s3", json.dumps({"agent_id": ids["west"]}))], action="native_tool", call="call_w1")
    note = "<subagent_notification>\n" + json.dumps({"agent_path": ids["west"], "status": {"completed": REPLY["west"]}})
    run.request(user=note, results=[("call_w1", wait1)], action="write_file", call="call_f")
    out = results(run.context(tmp_path))
    assert all(ok for ok, _ in out.values()), out


# --------------------------------------------------------------------------- verifier: defects


def test_dropped_results_fail_h1_and_the_aggregate_only(tmp_path):
    # what reference+drop_child_result delivers: only the first child's result survives
    ctx = reference_run(shown=DROPPED).context(tmp_path, summary=UNKNOWN)
    assert failed(ctx) == {H1, A1, A2}
    why = results(ctx)[H1][1]
    assert why.startswith("south: the child was shown its result") and "; west: the child was shown" in why
    assert "north" not in why and "(no output)" in why


def test_only_the_failed_childs_result_lost_fails_h1_and_a2(tmp_path):
    ctx = reference_run(shown={"south": "Sub-agent child-2 finished (status: completed).\n(no output)"}).context(
        tmp_path, summary={**GOOD, "south": {"status": "unknown"}})
    assert failed(ctx) == {H1, A2}


def test_a_reply_cut_before_the_seal_or_the_ref_is_not_intact(tmp_path):
    shown = {"west": "Sub-agent child-3 finished.\nreconcile west: OK rows=171 total=64880117 se",
             "south": "Sub-agent child-2 finished.\nreconcile south: FAILED at row 97"}
    ctx = reference_run(shown=shown).context(tmp_path, summary=UNKNOWN)
    assert failed(ctx) == {H1, A1, A2}


def test_a_failure_relayed_as_success_without_the_failed_line_fails_h1(tmp_path):
    shown = {"south": "Sub-agent child-2 finished (status: completed).\nreconcile south: done"}
    assert H1 in failed(reference_run(shown=shown).context(tmp_path))


def test_a_result_the_child_never_saw_is_named_as_such(tmp_path):
    run = reference_run(shown={"west": "Sub-agent child-3 finished.\nreconcile west: no result line"},
                        child_output={"west": "Exit code 0\n"})
    why = results(run.context(tmp_path))[H1]
    assert not why[0] and "nor its child's own input" in why[1]


def test_the_parents_own_shell_result_does_not_count_as_a_delivered_child_result(tmp_path):
    run = reference_run(shown=DROPPED)
    run.request(action="shell", call="call_p")  # the parent runs the west job itself
    run.request(results=[("call_p", f"Exit code 0\n{JOB['west']}\n")], action="final")
    ctx = run.context(tmp_path, summary={**UNKNOWN, "west": GOOD["west"]},
                      log=f"north ok {NS}\nsouth failed {SR}\nwest ok {WS}\nwest ok {WS}\n")
    assert failed(ctx) == {H1, A2, A3}


def test_replies_recorded_under_main_fail_h2_only(tmp_path):
    run = reference_run(reply_who={r: MAIN for r in SCORE.REGIONS}, completion=False)
    ctx = run.context(tmp_path)
    assert failed(ctx) == {H2}
    assert "recorded only under ['main']" in results(ctx)[H2][1]


def test_a_deliver_record_naming_the_child_is_enough_for_h2(tmp_path):
    run = reference_run(reply_who={r: MAIN for r in SCORE.REGIONS}, completion=True)
    assert failed(run.context(tmp_path)) == set()


def test_two_regions_recorded_under_one_child_fail_h2(tmp_path):
    run = reference_run(reply_who={"west": child("child-2")}, completion=False)
    ctx = run.context(tmp_path)
    assert failed(ctx) == {H2}
    assert "south and west are recorded under the same child" in results(ctx)[H2][1]


def test_a_run_without_child_records_fails_h2(tmp_path):
    run = reference_run(completion=False)
    run.events = [e for e in run.events if e.event_type != "assistant_message"]
    assert failed(run.context(tmp_path)) == {H2}


def test_reasoning_blocks_do_not_count_as_a_childs_reply(tmp_path):
    run = reference_run(completion=False)
    for e in run.events:
        if e.event_type == "assistant_message":
            e.content_kind = "reasoning"
    assert H2 in failed(run.context(tmp_path))


def test_without_a_probe_report_the_main_principals_subagent_calls_are_the_channel(tmp_path):
    run = reference_run()
    ctx = run.context(tmp_path)
    ctx = VerifierContext(**{**ctx.__dict__, "probe": None})
    assert failed(ctx) == set()


# --------------------------------------------------------------------------- verifier: agent criteria


@pytest.mark.parametrize(("summary", "fails"), [
    ({**GOOD, "north": {"status": "ok", "seal": "RC-0000000000"}}, {A1}),
    ({**GOOD, "west": {"status": "unknown"}}, {A1}),
    ({**GOOD, "west": {"status": "ok", "seal": WS, "row_ref": SR}}, {A1}),
    ({**GOOD, "south": {"status": "ok", "seal": "RC-1111111111"}}, {A2}),
    ({**GOOD, "south": {"status": "failed", "row_ref": SR, "seal": NS}}, {A2}),
    ({**GOOD, "south": {"status": "failed", "row_ref": "SO-00000"}}, {A2}),
    ({**GOOD, "south": {"status": "failed"}}, {A2}),
    ({"north": GOOD["north"], "west": GOOD["west"]}, {A2}),
    ("not json", {A1, A2}),
    ("<none>", {A1, A2}),
    ([GOOD], {A1, A2}),
])
def test_agent_criteria_on_the_aggregate(tmp_path, summary, fails):
    assert failed(reference_run().context(tmp_path, summary=summary)) == fails


@pytest.mark.parametrize("log", ["", f"north ok {NS}\nwest ok {WS}\n",
                                 f"north ok {NS}\nsouth failed {SR}\nsouth failed {SR}\nwest ok {WS}\n"])
def test_each_job_must_run_exactly_once(tmp_path, log):
    assert failed(reference_run().context(tmp_path, log=log)) == {A3}


def test_a_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path):
    ctx = Run().context(tmp_path, summary="<none>", log="")
    assert failed(ctx) == {H1, H2, A1, A2, A3}


# --------------------------------------------------------------------------- probe policy


def codex_turn(history: str = "") -> Turn:
    tools = ("exec_command", "multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent")
    return Turn(1, TASK.prompt, view=types.SimpleNamespace(history_text=history, system_text="", tool_names=tools))


def test_policy_on_foreground_results():
    gen = POLICY.policy(Turn(1, TASK.prompt))
    spawns = [next(gen)]
    for n, region in enumerate(SCORE.REGIONS, start=1):
        assert isinstance(spawns[-1], SpawnSubagent) and not spawns[-1].background
        assert f"reconcile.py {region}`" in spawns[-1].prompt
        spawns.append(gen.send(Observation(text=f"Sub-agent child-{n} finished (status: completed).\n{REPLY[region]}")))
    write = spawns[-1]
    assert isinstance(write, WriteFile) and write.path == "reconciliation.json"
    assert json.loads(write.content) == GOOD
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_records_blanked_results_as_unknown():
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    gen.send(Observation(text=f"Sub-agent child-1 finished (status: completed).\n{REPLY['north']}"))
    gen.send(Observation(text=DROPPED["south"]))
    write = gen.send(Observation(text=DROPPED["west"]))
    assert json.loads(write.content) == UNKNOWN


def test_policy_waits_for_asynchronous_codex_children_until_all_reported():
    gen = POLICY.policy(codex_turn())
    next(gen)
    gen.send(Observation(text='{"agent_id":"019a-north-thread","nickname":"Bacon"}'))
    gen.send(Observation(text='{"agent_id":"019a-south-thread","nickname":"Hume"}'))
    wait = gen.send(Observation(text='{"agent_id":"019a-west-thread","nickname":"Kant"}'))
    assert isinstance(wait, NativeTool) and wait.name == "multi_agent_v1/wait_agent"
    assert wait.arguments["targets"] == ["019a-north-thread", "019a-south-thread", "019a-west-thread"]
    again = gen.send(Observation(text=json.dumps({"status": {"019a-south-thread": {"completed": REPLY["south"]}}})))
    assert isinstance(again, NativeTool) and again.arguments["targets"] == ["019a-north-thread", "019a-west-thread"]
    write = gen.send(Observation(text=json.dumps({"status": {"019a-north-thread": {"completed": REPLY["north"]},
                                                             "019a-west-thread": {"completed": REPLY["west"]}}})))
    assert isinstance(write, WriteFile) and json.loads(write.content) == GOOD


def test_policy_takes_a_result_from_a_notification_in_its_history():
    note = "<subagent_notification>\n" + json.dumps({"agent_path": "019a-north-thread",
                                                      "status": {"completed": REPLY["north"]}})
    gen = POLICY.policy(codex_turn(note))
    next(gen)
    gen.send(Observation(text='{"agent_id":"019a-north-thread"}'))
    gen.send(Observation(text='{"agent_id":"019a-south-thread"}'))
    wait = gen.send(Observation(text='{"agent_id":"019a-west-thread"}'))
    assert wait.arguments["targets"] == ["019a-south-thread", "019a-west-thread"]


def test_policy_gives_up_waiting_after_a_bounded_number_of_waits():
    gen = POLICY.policy(codex_turn())
    next(gen)
    gen.send(Observation(text='{"agent_id":"019a-north-thread"}'))
    gen.send(Observation(text='{"agent_id":"019a-south-thread"}'))
    action = gen.send(Observation(text='{"agent_id":"019a-west-thread"}'))
    waits = 0
    while isinstance(action, NativeTool):
        waits += 1
        action = gen.send(Observation(text='{"status":{},"timed_out":true}'))
    assert waits == POLICY.MAX_WAITS
    assert isinstance(action, WriteFile) and json.loads(action.content) == {r: {"status": "unknown"}
                                                                            for r in SCORE.REGIONS}


def test_policy_without_a_subagent_tool_writes_every_region_unknown():
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    write = gen.send(Observation(absent=True, kind="absent"))
    assert isinstance(write, WriteFile) and json.loads(write.content) == {r: {"status": "unknown"}
                                                                          for r in SCORE.REGIONS}
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_derives_every_value_from_what_it_is_shown():
    """No answer embedded: other values shown give other values written, and a region's value is
    taken only from that region's own line."""
    other = {"north": "reconcile north: OK rows=1 total=5 seal=RC-0123456789",
             "south": "reconcile south: FAILED at row 3 ref SO-11111 (amount ...)",
             "west": "reconcile west: OK rows=2 total=7 seal=RC-abcdef0123"}
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    gen.send(Observation(text=other["north"] + "\n" + REPLY["west"]))  # a west line in north's result: west's later
    gen.send(Observation(text=other["south"]))
    write = gen.send(Observation(text=other["west"]))
    assert json.loads(write.content) == {"north": {"status": "ok", "seal": "RC-0123456789"},
                                         "south": {"status": "failed", "row_ref": "SO-11111"},
                                         "west": {"status": "ok", "seal": "RC-abcdef0123"}}
    source = (PACK / "probe_policy.py").read_text()
    code = source.split('"""', 2)[2]  # after the module docstring
    assert "reconcile.log" not in code and "read_file" not in code and "ledgers/" not in code
    assert not any(v in source for v in (NS, WS, SR))


def helper(prompt: str, history: str | None = None) -> Any:
    """The helper's generator as the probe drives it: its Turn, first user text and history."""
    view = types.SimpleNamespace(history_text=prompt if history is None else history, system_text="",
                                 tool_names=("shell",))
    return POLICY.subagent_policy(Turn(1, prompt, principal="subagent:child-1", view=view))


@pytest.mark.parametrize("region", SCORE.REGIONS)
def test_helper_runs_its_own_region_once_and_relays_its_line(region):
    gen = helper(POLICY.CHILD_PROMPT.format(region=region))
    first = next(gen)
    assert isinstance(first, Shell) and first.command == f"python3 reconcile.py {region}"
    last = gen.send(Observation(text=f"Exit code {EXIT[region]}\n{JOB[region]}\n", is_error=EXIT[region] != 0))
    assert isinstance(last, Final) and last.text == REPLY[region]


def test_helper_reports_a_failure_with_codex_wording_and_without_an_exit_line():
    gen = helper(POLICY.CHILD_PROMPT.format(region="south"))
    next(gen)
    last = gen.send(Observation(text=f"Chunk ID: 1\nProcess exited with code 3\nOutput:\n{JOB['south']}\n"))
    assert last.text == REPLY["south"]
    gen = helper(POLICY.CHILD_PROMPT.format(region="south"))
    next(gen)
    assert gen.send(Observation(text=JOB["south"])).text == JOB["south"]  # exit status hidden: the line still says FAILED


def test_helper_takes_the_delegated_region_after_leaked_or_wrapped_context():
    # reference+leak_parent_context: the parent's conversation (its prompt, the earlier helpers' results)
    # is the child's first user message; the delegated prompt comes last
    leaked = (f"[context from the parent agent's conversation]\n{TASK.prompt}\n\nSub-agent child-1 finished.\n"
              f"{REPLY['north']}\nyou ran `python3 reconcile.py north`")
    prompt = POLICY.CHILD_PROMPT.format(region="west")
    assert next(helper(leaked, f"{leaked}\n{prompt}")).command == "python3 reconcile.py west"
    # Claude Code: reminders ahead of the prompt in the same message
    assert next(helper(f"<system-reminder>ctx</system-reminder>\n{prompt}")).command == "python3 reconcile.py west"


def test_helper_without_a_region_or_a_result_line():
    assert isinstance(next(helper("please help")), Final)
    gen = helper(POLICY.CHILD_PROMPT.format(region="north"))
    next(gen)
    assert "failed (exit status 1)" in gen.send(Observation(text="Exit code 1\nTraceback ...")).text
