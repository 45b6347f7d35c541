"""Replay: determinism, multi-step policies in each format, ids, compaction, turns, errors."""

from __future__ import annotations

import json

import pytest
from probe_http import PATHS, Out, SimHarness, post, tools_for

MULTI_STEP = """
    from tracetrial.policy import final, read_file, shell, write_file

    def policy(turn):
        build = yield shell("./build.sh")
        failed = bool(build.is_error) or "exit code 2" in build.text.lower()
        yield write_file("status.txt", "failed" if failed else "ok")
        log = yield read_file("build.log")
        reason = log.find(r"reason=(\\w+)", default="unknown")
        yield final(f"build {'failed' if failed else 'ok'} because {reason}")
"""


def _fake_exec(out: Out) -> tuple[str, bool | None]:
    """What a harness would deliver for each tool call in these tests."""
    args = json.dumps(out.arguments)
    if "build.sh" in args:
        return "Exit code 2\ncompiled 3 files", True
    if "build.log" in args:
        return "1\tstep one\n2\treason=linker\n", False
    return "", False


@pytest.mark.parametrize("fmt", ["anthropic", "responses", "chat"])
def test_multi_step_policy_in_each_format(probe, write_policy, run_id, fmt):
    probe.register_run(run_id, write_policy(MULTI_STEP))
    sim = SimHarness(fmt, probe.run_url(run_id), tools_for(fmt))
    outs = sim.run("fix the build", _fake_exec)
    assert outs[-1].text == "build failed because linker"
    ids = [o.call_id for o in outs if o.call_id]
    assert len(ids) == 3 and len(set(ids)) == 3
    report = probe.finish_run(run_id)
    assert [r.action for r in report.requests] == ["shell", "write_file", "read_file", "final"]
    assert report.final_text == "build failed because linker"
    assert report.apparatus_errors == [] and report.absent_capabilities == []
    assert len({r.observation_digest for r in report.requests}) == 4


def test_same_request_gives_byte_identical_answer(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(MULTI_STEP))
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.user("fix the build")
    first = post(sim.base_url + PATHS["anthropic"], sim.body())[2]
    again = post(sim.base_url + PATHS["anthropic"], sim.body())[2]
    assert first == again
    # a later step replays identically too
    out = sim.send()
    sim.assistant(out)
    sim.result(out.call_id, "ok", False)
    a = post(sim.base_url + PATHS["anthropic"], sim.body())[2]
    b = post(sim.base_url + PATHS["anthropic"], sim.body())[2]
    assert a == b and b"Write" in a


def test_ids_are_unique_across_runs(probe, write_policy):
    path = write_policy(MULTI_STEP)
    ids = []
    for rid in ("ids-a", "ids-b"):
        probe.register_run(rid, path)
        sim = SimHarness("responses", probe.run_url(rid), tools_for("responses"))
        sim.user("fix the build")
        ids.append(sim.send().call_id)
        probe.finish_run(rid)
    assert ids[0] != ids[1]


def test_rewritten_ids_are_matched(probe, write_policy, run_id):
    """OpenClaw rewrites call_1 to call1 on the wire; results still match the probe's action."""
    probe.register_run(run_id, write_policy(MULTI_STEP))
    sim = SimHarness("chat", probe.run_url(run_id), tools_for("chat"))
    sim.user("fix the build")
    for _ in range(3):
        out = sim.send()
        out.call_id = out.call_id.replace("_", "")
        sim.assistant(out)
        sim.result(out.call_id, *_fake_exec(out))
    assert sim.send().text == "build failed because linker"


def test_compaction_rewrite_does_not_loop(probe, write_policy, run_id):
    """After compaction drops the earlier calls from history, the script continues from run state."""
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, shell

        def policy(turn):
            for i in range(3):
                yield shell(f"echo step{i}")
            fact = turn.find(r"FACT=(\\d+)", default="lost")
            yield final("fact " + fact)
    """))
    sim = SimHarness("responses", probe.run_url(run_id), tools_for("responses"))
    sim.user("go")
    out = sim.send()
    sim.assistant(out)
    sim.result(out.call_id, "FACT=42")
    # Codex-style compaction: tools [], a checkpoint instruction, then history replaced by a summary
    compact = sim.body()
    compact["tools"] = []
    compact["input"] = compact["input"] + [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary."}]}]
    status, _, raw = post(sim.base_url + "/v1/responses", compact,
                          {"x-codex-turn-metadata": json.dumps({"request_kind": "compaction"})})
    assert status == 200
    summary = json.loads(raw.decode().split("event: response.completed\ndata: ")[1].split("\n")[0])
    summary_text = summary["response"]["output"][0]["content"][0]["text"]
    assert "FACT=42" in summary_text and "CONTEXT CHECKPOINT" not in summary_text
    sim.messages = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary_text}]}]
    outs = [sim.send()]
    assert outs[0].arguments == {"cmd": "echo step1"}  # not step0 again
    sim.assistant(outs[0])
    sim.result(outs[0].call_id, "step1")
    out = sim.send()
    assert out.arguments == {"cmd": "echo step2"}
    sim.assistant(out)
    sim.result(out.call_id, "step2")
    assert sim.send().text == "fact 42"  # the fact survived in the summary the harness kept
    kinds = [r.kind for r in probe.finish_run(run_id).requests]
    assert kinds.count("compaction") == 1


def test_claude_compaction_request_gets_analysis_and_summary(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(MULTI_STEP))
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.user("fix the build; keep MAXCONN=7")
    sim.messages.append({"role": "assistant", "content": [{"type": "text", "text": "noted"}]})
    sim.user("CRITICAL: Respond with TEXT ONLY.\n\nYour task is to create a detailed summary of the conversation "
             "so far ... an <analysis> block followed by a <summary> block.")
    out = sim.send()
    assert out.text.startswith("<analysis>") and "<summary>" in out.text and "MAXCONN=7" in out.text
    assert probe.finish_run(run_id).requests[0].kind == "compaction"


def test_openclaw_checkpoint_summary_request_is_a_compaction(probe, write_policy, run_id):
    """OpenClaw 2026.6.9's summary request (seen in C2 cells: no tools, this wording) is answered as
    a compaction from what the request carries, not refused as unscripted."""
    probe.register_run(run_id, write_policy(MULTI_STEP))
    sim = SimHarness("chat", probe.run_url(run_id), [])
    sim.user("fix the build; keep MAXCONN=7")
    sim.messages.append({"role": "assistant", "content": "noted"})
    sim.user("<conversation>\n\n</conversation>\n\nThe messages above are a conversation to summarize. Create a "
             "structured context checkpoint summary that another LLM will use to continue the work.\n\n"
             "Use this EXACT format:\n\n## Goal\n[What is the user trying to accomplish?]")
    out = sim.send()
    assert "MAXCONN=7" in out.text and "EXACT format" not in out.text
    assert probe.finish_run(run_id).requests[0].kind == "compaction"


def test_large_usage_until_compaction(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(MULTI_STEP), {"report_usage_tokens": 900_000})
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.user("fix the build")
    out = sim.send()
    assert out.usage["input_tokens"] == 900_000
    sim.assistant(out)
    sim.result(out.call_id, "Exit code 2", True)
    compact = SimHarness("anthropic", probe.run_url(run_id), [])
    compact.messages = list(sim.messages)
    compact.user("Your task is to create a detailed summary of the conversation so far.")
    assert compact.send().usage["input_tokens"] < 900_000
    assert sim.send().usage["input_tokens"] < 900_000  # one compaction answered: back to content-sized


def test_title_request(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(MULTI_STEP))
    sim = SimHarness("anthropic", probe.run_url(run_id), [],
                     system="Generate a concise, sentence-case title (3-7 words) for this coding session.")
    sim.user("<session>\nfix the build please now\n</session>\n\nWrite the title.")
    body = dict(sim.body(), output_config={"format": {"type": "json_schema", "schema": {
        "type": "object", "properties": {"title": {"type": "string"}}}}})
    status, _, raw = post(sim.base_url + PATHS["anthropic"], body)
    assert status == 200
    text = "".join(json.loads(line[6:])["delta"].get("text", "") for line in raw.decode().split("\n")
                   if line.startswith("data: ") and '"content_block_delta"' in line)
    assert json.loads(text) == {"title": "Fix the build please now"}
    assert probe.finish_run(run_id).requests[0].kind == "title"


def test_unscripted_request_fails_loudly(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(MULTI_STEP))
    sim = SimHarness("anthropic", probe.run_url(run_id), [])
    sim.user("what is the bash prefix of: ls -la")
    status, _, raw = post(sim.base_url + PATHS["anthropic"], sim.body())
    assert status == 500 and b"unscripted request 1" in raw
    report = probe.finish_run(run_id)
    assert report.requests[0].kind == "unscripted" and "unscripted request 1" in report.apparatus_errors[0]


def test_multi_turn_with_known_turns(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, shell

        def policy(turn):
            if turn.index == 1:
                obs = yield shell("cat ticket.txt")
                yield final("noted")
            else:
                yield final("code is " + turn.find(r"code: (\\w+)", default="?"))
    """), {"turns": ["Read the ticket.", "What was the code?"]})
    sim = SimHarness("responses", probe.run_url(run_id), tools_for("responses"))
    assert sim.run("Read the ticket.", lambda o: ("code: K9Z", None))[-1].text == "noted"
    assert sim.run("What was the code?", lambda o: ("", None))[-1].text == "code is K9Z"
    report = probe.finish_run(run_id)
    assert [(r.turn, r.action) for r in report.requests] == [(1, "shell"), (1, "final"), (2, "final")]


def test_multi_turn_without_declared_turns(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final

        def policy(turn):
            yield final(f"turn {turn.index}: {turn.user_text}")
    """))
    sim = SimHarness("chat", probe.run_url(run_id), tools_for("chat"))
    assert sim.run("first", lambda o: ("", None))[-1].text == "turn 1: first"
    assert sim.run("second", lambda o: ("", None))[-1].text == "turn 2: second"


def test_notification_after_final_resumes_policy(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, spawn_subagent

        def policy(turn):
            yield spawn_subagent("child", "compute", background=True)
            note = yield final("started the child")
            yield final("child said " + (note.find(r"<result>(.*?)</result>") or "nothing"))
    """))
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    outs = sim.run("go", lambda o: ("Async agent launched successfully.", None))
    assert outs[0].name == "Agent" and outs[0].arguments["run_in_background"] is True
    assert outs[-1].text == "started the child"
    again = sim.send()  # a retry of the same request: same final again, not a notification
    assert again.text == "started the child"
    sim.user("[SYSTEM NOTIFICATION - NOT USER INPUT]\n<task-notification><result>42</result></task-notification>")
    assert sim.send().text == "child said 42"


def test_subagent_requests_use_subagent_policy(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, shell, spawn_subagent

        def policy(turn):
            res = yield spawn_subagent("child", "Count the files in data/ and reply with the number.")
            yield final("child answered " + res.text)

        def subagent_policy(prompt_text):
            obs = yield shell("ls data | wc -l")
            yield final(obs.text.strip() + " files")
    """))
    url = probe.run_url(run_id)
    parent = SimHarness("anthropic", url, tools_for("anthropic"))
    parent.user("go")
    call = parent.send()
    assert call.name == "Agent" and call.arguments["run_in_background"] is False
    child = SimHarness("anthropic", url, tools_for("anthropic"), headers={"x-claude-code-agent-id": "a1b2"})
    outs = child.run(call.arguments["prompt"], lambda o: ("3\n", False))
    assert outs[0].arguments["command"] == "ls data | wc -l" and outs[-1].text == "3 files"
    parent.assistant(call)
    parent.result(call.call_id, outs[-1].text)
    assert parent.send().text == "child answered 3 files"
    report = probe.finish_run(run_id)
    assert [r.kind for r in report.requests] == ["main", "subagent", "subagent", "main"]
    assert report.requests[1].principal == "subagent:a1b2"
    assert report.final_text == "child answered 3 files"


def test_default_subagent_answers_the_prompt(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(MULTI_STEP))
    child = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"),
                       system="x-anthropic-billing-header: cc_version=2.1.220; cc_is_subagent=true;\nYou are a child.")
    assert child.run("Summarise x", lambda o: ("", None))[-1].text == "Done: Summarise x"


def test_missing_result_is_observed_not_reissued(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, shell

        def policy(turn):
            obs = yield shell("long-job")
            yield final(f"kind={obs.kind}")
    """))
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.user("go")
    out = sim.send()
    sim.assistant(out)   # the harness keeps the call but never delivers a result
    sim.user("continue")
    assert sim.send().text == "kind=missing"


@pytest.mark.parametrize("source,fragment", [
    ("""
        import itertools
        _n = itertools.count()
        from tracetrial.policy import final, shell
        def policy(turn):
            yield shell(f"echo {next(_n)}")
            yield final("x")
    """, "not replay-deterministic at step 0"),
    ("""
        from tracetrial.policy import shell
        def policy(turn):
            yield shell("true")
    """, "ended without yielding final"),
    ("""
        from tracetrial.policy import shell
        def policy(turn):
            yield "ls"
    """, "yield an action"),
    ("""
        from tracetrial.policy import shell
        def policy(turn):
            obs = yield shell("true")
            raise RuntimeError("bad policy")
    """, "RuntimeError: bad policy"),
])
def test_policy_bugs_become_apparatus_errors(probe, write_policy, run_id, source, fragment):
    probe.register_run(run_id, write_policy(source))
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.user("go")
    status, out = 200, None
    for _ in range(3):
        status, _, raw = post(sim.base_url + PATHS["anthropic"], sim.body())
        if status != 200:
            break
        from probe_http import parse_anthropic
        out = parse_anthropic(raw, True)
        sim.assistant(out)
        sim.result(out.call_id, "", False)
    assert status == 500 and fragment in raw.decode()
    report = probe.finish_run(run_id)
    assert any(fragment in e for e in report.apparatus_errors)


def test_report_json_shape(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(MULTI_STEP))
    SimHarness("chat", probe.run_url(run_id), tools_for("chat")).run("go", _fake_exec)
    data = json.loads(probe.finish_run(run_id).model_dump_json())
    assert set(data) == {"run_id", "task_id", "requests", "absent_capabilities", "apparatus_errors", "final_text"}
    assert {"index", "wire_format", "kind", "observation_digest", "action", "mapped_tool"} <= set(data["requests"][0])
    assert data["requests"][0]["wire_format"] == "chat"
    # a finished run is gone
    status, _, _ = post(probe.run_url(run_id) + "/v1/chat/completions", {"messages": []})
    assert status == 404


def test_repeated_turn_texts_advance_one_turn_at_a_time(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, shell

        def policy(turn):
            yield shell(f"echo turn{turn.index}")
            yield final(f"done {turn.index}")
    """), {"turns": ["continue", "continue", "continue"]})
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    for n in (1, 2, 3):
        outs = sim.run("continue", lambda o: ("ok", False))
        assert outs[0].arguments["command"] == f"echo turn{n}" and outs[-1].text == f"done {n}"


def test_compaction_summary_hook(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, shell

        def policy(turn):
            yield shell("cat config")
            yield final("ok")

        def compaction_summary(turn):
            return "Constraint kept: MAXCONN=" + (turn.find(r"MAXCONN=(\\d+)") or "?")
    """))
    sim = SimHarness("responses", probe.run_url(run_id), tools_for("responses"))
    sim.user("go")
    out = sim.send()
    sim.assistant(out)
    sim.result(out.call_id, "MAXCONN=9\n" + "noise " * 1000)
    sim.user("You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary.")
    sim.tools = []
    assert sim.send().text == "Constraint kept: MAXCONN=9"


def test_notification_wrapped_in_a_system_reminder_resumes_policy(probe, write_policy, run_id):
    """Claude Code 2.x wraps the background child's task-notification in <system-reminder>
    (after a boilerplate reminder): the probe reads it as the notification it is, while a
    boilerplate-only reminder after the final is still no notification."""
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final, spawn_subagent

        def policy(turn):
            yield spawn_subagent("child", "compute", background=True)
            note = yield final("started the child")
            yield final("child said " + (note.find(r"<result>(.*?)</result>") or "nothing"))
    """))
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    outs = sim.run("go", lambda o: ("Async agent launched successfully.", None))
    assert outs[-1].text == "started the child"
    sim.user("<system-reminder>\n<tools-used-before-summary>Bash</tools-used-before-summary>\n</system-reminder>")
    assert sim.send().text == "started the child"  # boilerplate only: the final stands
    sim.user("<system-reminder>\n<tools-used-before-summary>Bash</tools-used-before-summary>\n</system-reminder>\n\n"
             "<system-reminder>\n[SYSTEM NOTIFICATION - NOT USER INPUT]\n<task-notification>\n"
             "<status>completed</status>\n<result>The job finished. value: 42</result>\n</task-notification>\n"
             "</system-reminder>")
    assert sim.send().text == "child said The job finished. value: 42"


HEARTBEAT = ("Follow the heartbeat monitor scratch context when provided. Recurring tasks are automations; create "
             "or change their schedules with the automations tool, not heartbeat scratch. Do not infer or repeat old "
             "tasks from prior chats. If nothing needs attention, reply NO_REPLY.\nCurrent time: Sunday\n\n"
             "Runtime: agent=main | session=agent:main:main")


def test_an_openclaw_heartbeat_is_answered_no_reply_and_leaves_the_policy_alone(probe, write_policy, run_id):
    """OpenClaw's Gateway runs a heartbeat in the agent's main session while the parent waits: it is
    housekeeping (answered NO_REPLY, as it asks), never a step of the policy — whose pending call
    would otherwise be spent there and its result lost to the parent."""
    probe.register_run(run_id, write_policy(MULTI_STEP))
    beat = SimHarness("chat", probe.run_url(run_id), tools_for("chat"))
    beat.user(HEARTBEAT)
    assert beat.send().text == "NO_REPLY"
    sim = SimHarness("chat", probe.run_url(run_id), tools_for("chat"))
    sim.user("fix the build; keep MAXCONN=7")
    first = sim.send()
    assert first.name is not None  # the policy's first step, untouched by the heartbeat
    kinds = [r.kind for r in probe.finish_run(run_id).requests]
    assert kinds[0] == "heartbeat" and kinds[1] == "main"


def test_deepseek_0_2_runtime_context_block_is_not_the_users_turn(probe, write_policy, run_id):
    """DeepSeek Harness 0.2.x puts a "Current runtime context. …" block after the prompt of a new
    session's first message; the turn is the user's text before it (C5 x2 on 0.2.1rc2 stayed in turn 1)."""
    probe.register_run(run_id, write_policy(MULTI_STEP), {"turns": ["fix the build", "now ship it"]})
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.messages.append({"role": "user", "content": [
        {"type": "text", "text": "now ship it"},
        {"type": "text", "text": "Current runtime context. Working directory: /w. Date: 2026-12-07."}]})
    sim.send()
    assert probe.finish_run(run_id).requests[0].turn == 2
