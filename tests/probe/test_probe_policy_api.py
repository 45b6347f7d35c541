"""The policy API (tracetrial.policy), policy loading, and registration from a real task pack."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from probe_http import SimHarness, tools_for

from apparatus.probe import PolicyLoadError, load_policy
from tracetrial.policy import MCP_WAIT_TOOL, NativeTool, Observation, Turn, TurnView, await_mcp, call_tool, final, shell
from tracetrial.task import load_task


def test_turn_find_uses_last_match_and_groups():
    turn = Turn(2, "q", view=TurnView(history_text="code: A1\nlater code: B2\nname=x", system_text="sys code: S0"))
    assert turn.find(r"code: (\w+)") == "B2"
    assert turn.find(r"name=\w+") == "name=x"  # no group: whole match
    assert turn.find(r"missing (\d+)", default="none") == "none"
    assert turn.find(r"sys code: (\w+)") is None
    assert turn.find(r"sys code: (\w+)", include_system=True) == "S0"
    assert turn.find_all(r"code: (\w+)") == ["A1", "B2"]


class _Connecting:
    """A view whose declared tools change as the agent waits: the server connects after ``after`` waits."""

    def __init__(self, after: int | None) -> None:
        self.after, self.waited = after, 0
        self.history_text = self.system_text = ""

    @property
    def tool_names(self) -> tuple[str, ...]:
        if self.after is not None and self.waited >= self.after:
            return ("Bash", "mcp__bank__statement")
        return ("Bash", MCP_WAIT_TOOL)


@pytest.mark.parametrize(("after", "expected"), [(0, 0), (2, 2), (None, 4)])
def test_await_mcp_waits_until_the_server_connects_and_is_bounded(after, expected):
    view = _Connecting(after)
    turn = Turn(1, "q", view=view)
    steps = []
    gen = await_mcp(turn, "bank")
    try:
        action = next(gen)
        while True:
            steps.append(action)
            view.waited += 1
            action = gen.send(Observation(text="still connecting"))
    except StopIteration:
        pass
    assert len(steps) == expected
    assert all(isinstance(a, NativeTool) and a.name == MCP_WAIT_TOOL and a.arguments == {"servers": ["bank"]}
               for a in steps)


def test_await_mcp_yields_nothing_without_the_wait_tool():
    turn = Turn(1, "q", view=TurnView(tool_names=("exec_command",)))
    assert list(await_mcp(turn, "bank", waits=3)) == []


def test_observation_flags():
    assert Observation(text="x").ok
    assert not Observation(text="x", is_error=True).ok
    assert Observation(kind="missing").missing and not Observation(kind="missing").ok
    assert Observation(absent=True, kind="absent").absent
    assert Observation(text="total=12\ntotal=13").find(r"total=(\d+)") == "13"


def test_actions_describe_themselves():
    assert shell("ls", timeout_s=3).describe() == {"kind": "shell", "command": "ls", "timeout_s": 3}
    assert call_tool("s", "t", {"a": 1}).describe() == {"kind": "call_tool", "server": "s", "tool": "t",
                                                        "arguments": {"a": 1}}
    assert final("done").describe() == {"kind": "final", "text": "done"}


@pytest.mark.parametrize("source,fragment", [
    ("def policy(turn):\n    return 1\n", "written as a generator"),
    ("x = 1\n", "needs `def policy(turn)`"),
    ("def policy(turn):\n    yield 1\nPROBE_OPTIONS = {'report_usage_token': 5}\n", "PROBE_OPTIONS is invalid"),
    ("def policy(turn):\n    yield 1\ndef subagent_policy(p):\n    return 'x'\n", "subagent_policy must be a generator"),
    ("raise ImportError('nope')\n", "importing it raised ImportError: nope"),
])
def test_policy_load_errors_are_precise(tmp_path, source, fragment):
    path = tmp_path / "probe_policy.py"
    path.write_text(source)
    with pytest.raises(PolicyLoadError, match="probe_policy.py") as err:
        load_policy(path)
    assert fragment in str(err.value)


def test_missing_policy_file(tmp_path):
    with pytest.raises(PolicyLoadError, match="not found"):
        load_policy(tmp_path / "nope.py")


def test_register_rejects_bad_run_ids_and_duplicates(probe, write_policy):
    path = write_policy("from tracetrial.policy import final\ndef policy(turn):\n    yield final('x')\n")
    with pytest.raises(ValueError, match="one URL path segment"):
        probe.register_run("a/b", path)
    probe.register_run("dup-1", path)
    with pytest.raises(ValueError, match="already registered"):
        probe.register_run("dup-1", path)
    probe.finish_run("dup-1")
    with pytest.raises(KeyError, match="no probe run registered"):
        probe.finish_run("dup-1")


def _write_pack(root: Path) -> Path:
    pack = root / "C3-fact-carry-001"
    (pack / "workspace").mkdir(parents=True)
    (pack / "verifier").mkdir()
    (pack / "task.yaml").write_text(textwrap.dedent("""
        id: C3-fact-carry-001
        title: Carry a fact across turns
        component: C
        property: cross_turn_fact_retention
        surface: workflow
        conversation: multi
        budgets: {max_user_turns: 2}
    """))
    (pack / "prompt.md").write_text("Run `cat ticket.txt` and remember the release code.\n")
    (pack / "turns.json").write_text(json.dumps({"turns": [{"user": "Now write the release code to code.txt."}]}))
    rule = "criteria:\n  - id: {id}\n    type: rule\n    statement: s\n    rule: {{kind: file_exists, path: code.txt}}\n"
    (pack / "verifier" / "harness_score.yaml").write_text(rule.format(id="h1"))
    (pack / "verifier" / "agent_score.yaml").write_text(rule.format(id="a1"))
    (pack / "verifier" / "score.py").write_text("")
    (pack / "probe_policy.py").write_text(textwrap.dedent("""
        from tracetrial.policy import final, shell, write_file

        PROBE_OPTIONS = {"extra": {"out": "code.txt"}}

        def policy(turn):
            if turn.index == 1:
                yield shell("cat ticket.txt")
                yield final("Noted.")
            else:
                code = turn.find(r"release code: (\\w+)", default="UNKNOWN")
                yield write_file(turn.options["out"], code)
                yield final("Wrote " + code)
    """))
    return pack


def test_register_task_pack_drives_a_multi_turn_run(probe, tmp_path):
    task = load_task(_write_pack(tmp_path))
    probe.register_run("pack-run", task)
    sim = SimHarness("anthropic", probe.run_url("pack-run"), tools_for("anthropic"))
    sim.run(task.prompt, lambda o: ("release code: R7QX", False))
    outs = sim.run(task.turns.turns[0].user, lambda o: ("", False))
    assert outs[0].name == "Write" and outs[0].arguments["content"] == "R7QX"
    assert outs[-1].text == "Wrote R7QX"
    report = probe.finish_run("pack-run")
    assert report.task_id == "C3-fact-carry-001"
    assert [r.turn for r in report.requests] == [1, 1, 2, 2]


def test_options_override_module_options(probe, write_policy, run_id):
    path = write_policy("""
        from tracetrial.policy import final
        PROBE_OPTIONS = {"extra": {"who": "module"}}
        def policy(turn):
            yield final(turn.options["who"])
    """)
    probe.register_run(run_id, path, {"extra": {"who": "caller"}})
    assert SimHarness("chat", probe.run_url(run_id), tools_for("chat")).run("x", lambda o: ("", None))[-1].text == "caller"
    with pytest.raises(PolicyLoadError, match="options for run"):
        probe.register_run("bad-opts", path, {"provider_error": {"status": 500}})


def test_module_docstring_example_runs(probe, tmp_path):
    """The example in tracetrial.policy's docstring is real, working code."""
    import tracetrial.policy as api

    doc = api.__doc__ or ""
    block = doc.split("probe_policy.py``::", 1)[1].split("\nRules", 1)[0]
    source = textwrap.dedent(block)
    path = tmp_path / "probe_policy.py"
    path.write_text(source)
    probe.register_run("doc-example", path, {"turns": ["Build it.", "What is the release code?"]})
    sim = SimHarness("anthropic", probe.run_url("doc-example"), tools_for("anthropic"))
    outs = sim.run("Build it.", lambda o: ("Exit code 1\nlink error", True))
    assert outs[1].arguments["content"] == '{"build": "failed"}' and outs[-1].text == "Build failed."
    sim.user("FYI release code: QX42")
    assert sim.run("What is the release code?", lambda o: ("", None))[-1].text == "The code is QX42."
    probe.finish_run("doc-example")


def test_concurrent_runs_stay_separate(probe, write_policy):
    """Runs are served concurrently (one lock per run); each keeps its own script and ids."""
    import threading

    path = write_policy("""
        from tracetrial.policy import final, shell

        def policy(turn):
            seen = []
            for i in range(4):
                obs = yield shell(f"echo {i}")
                seen.append(obs.text)
            yield final(",".join(seen))
    """)
    results: dict[str, str] = {}

    def drive(rid: str, fmt: str) -> None:
        sim = SimHarness(fmt, probe.run_url(rid), tools_for(fmt))
        results[rid] = sim.run("go", lambda o: (f"{rid}:{json.dumps(o.arguments, sort_keys=True)}", False))[-1].text

    rids = [(f"conc-{i}", fmt) for i, fmt in enumerate(["anthropic", "responses", "chat"] * 2)]
    for rid, _ in rids:
        probe.register_run(rid, path)
    threads = [threading.Thread(target=drive, args=r) for r in rids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for rid, fmt in rids:
        key = "cmd" if fmt == "responses" else "command"
        assert results[rid] == ",".join(f'{rid}:{{"{key}": "echo {i}"}}' for i in range(4))
        assert len(probe.finish_run(rid).requests) == 5


# The three wire shapes of a resumed request whose earlier call was answered (c1) or left without
# a result (c2: the call a harness kept from a killed turn without answering it).
_CHAT = {"model": "probe", "messages": [
    {"role": "user", "content": "pay"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"command": "cat a.json"}'}},
        {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": '{"command": "./pay.sh INV-1"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"invoice\": \"INV-1\"}"},
    {"role": "user", "content": "continue"}]}
_ANTHROPIC = {"model": "probe", "messages": [
    {"role": "user", "content": "pay"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": "cat a.json"}},
                                      {"type": "tool_use", "id": "c2", "name": "Bash", "input": {"command": "./pay.sh INV-1"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "{\"invoice\": \"INV-1\"}"},
                                 {"type": "text", "text": "continue"}]}]}
_RESPONSES = {"model": "probe", "input": [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "pay"}]},
    {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "cat a.json"}', "call_id": "c1"},
    {"type": "function_call_output", "call_id": "c1", "output": "{\"invoice\": \"INV-1\"}"},
    {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "./pay.sh INV-1"}', "call_id": "c2"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "continue"}]}]}


@pytest.mark.parametrize(("parse", "body", "tool"), [("parse_chat", _CHAT, "shell"), ("parse_anthropic", _ANTHROPIC, "Bash"),
                                                     ("parse_responses", _RESPONSES, "exec_command")])
def test_a_policy_sees_its_own_earlier_calls_and_which_have_a_result(parse: str, body: dict, tool: str) -> None:
    from apparatus.probe import conversation

    view = getattr(conversation, parse)(body).view()
    turn = Turn(2, "continue", view=view)
    assert [(c.name, "pay.sh" in c.arguments, c.result) for c in turn.calls] == [
        (tool, False, '{"invoice": "INV-1"}'), (tool, True, None)]
    assert "pay.sh" not in turn.history_text  # the model's own words stay out of history_text
    assert Turn(1, "x").calls == ()


def test_expand_skill_root_reads_the_roots_table_it_was_shown() -> None:
    """Codex 0.171.0 lists a skill as ``r1/<skill>/SKILL.md`` under a "### Skill roots" table."""
    from tracetrial.policy import expand_skill_root

    table = ("### Skill roots\n- `r0` = `/h/.codex/skills/.system`\n- `r1` = `/w/.agents/skills/`\n"
             "### Available skills\n- rate-card: Rates. (file: r1/rate-card/SKILL.md)")
    for view in (TurnView(history_text=table), TurnView(system_text=table)):
        turn = Turn(1, "q", view=view)
        assert expand_skill_root(turn, "r1/rate-card/SKILL.md") == "/w/.agents/skills/rate-card/SKILL.md"
        assert expand_skill_root(turn, "r0/imagegen/SKILL.md") == "/h/.codex/skills/.system/imagegen/SKILL.md"
        assert expand_skill_root(turn, "r2/x/SKILL.md") == "r2/x/SKILL.md"  # not in the table
        assert expand_skill_root(turn, "/abs/x/SKILL.md") == "/abs/x/SKILL.md"
        assert expand_skill_root(turn, ".agents/skills/x/SKILL.md") == ".agents/skills/x/SKILL.md"
    assert expand_skill_root(Turn(1, "q"), "r1/rate-card/SKILL.md") == "r1/rate-card/SKILL.md"
