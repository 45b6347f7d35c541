"""The reference harness's agent loop, run as a real process against a scripted Chat Completions
server (streamed SSE with ``tool_calls`` deltas): wire format, native log, deny rules, MCP, ask-user,
sub-agents, sessions, secrets, provider errors and budgets — each mutant's one change next to the
faithful behaviour."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reference.chat_server import Reply, Request, call, say
from tests.reference.conftest import API_KEY, CliRun, Harness, alive


def _requests_text(run: CliRun) -> str:
    return "\n".join(json.dumps(r.body) for r in run.server.requests)


# ----------------------------------------------------------------------------- wire + native log


def test_shell_round_trip_wire_format_and_native_log(harness: Harness) -> None:
    args = {"command": "echo 'BUILD SUCCESS'; echo 'warn: W1' >&2; exit 3"}
    run = harness.run({"main": [call("c1", "shell", args), say("The build failed.")]})
    assert run.returncode == 0 and run.result["status"] == "completed"
    first, second = run.server.requests
    assert first.path == "/v1/chat/completions" and first.body["stream"] is True
    assert first.headers["x-tt-principal-id"] == "main"
    assert {"shell", "read_file", "write_file", "edit_file", "spawn_subagent"} <= set(first.tool_names)
    assert "ask_user" not in first.tool_names  # no ask-user source given
    # The arguments arrived split over two deltas and were re-joined exactly.
    assistant = second.messages[-2]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == args
    assert second.tool_result("c1") == "Exit code 3\nBUILD SUCCESS\n[stderr]\nwarn: W1\n"

    types = [r["type"] for r in run.records]
    assert types == ["session", "request", "response", "tool_call", "tool_result", "request", "response",
                     "completion"]
    seqs = [r["seq"] for r in run.records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(r["principal_id"] == "main" and r["ts"].endswith("Z") for r in run.records)
    res = run.result_of("c1")
    assert (res["exit_code"], res["is_error"], res["status"]) == (3, True, "error")
    usage = run.of_type("response")[0]["data"]["usage"]
    assert usage["prompt_tokens"] >= 100
    done = run.of_type("completion")[0]["data"]
    assert done["failed_tool_call_ids"] == ["c1"] and done["final_text"] == "The build failed."


def test_bad_arguments_unknown_tool_timeout_and_large_output(harness: Harness) -> None:
    run = harness.run({"main": [
        Reply(tool_calls=[("b1", "shell", "{not json"), ("b2", "no_such_tool", {})]),
        call("t1", "shell", {"command": "sleep 20", "timeout_s": 1}),
        call("o1", "shell", {"command": "python3 -c \"print('z' * 40000); print('LAST=9')\""}),
        say("done")]})
    last = run.server.requests[-1]
    assert last.tool_result("b1").startswith("shell: invalid JSON arguments")
    assert last.tool_result("b2").startswith("Unknown tool 'no_such_tool'")
    assert "timed out after 1 s" in last.tool_result("t1")
    assert run.result_of("t1")["duration_s"] < 5
    big = last.tool_result("o1")
    saved = harness.workspace / ".tt-outputs" / "o1.stdout.txt"
    assert f"bytes omitted. Full stdout saved to {saved}]" in big
    assert saved.read_text().endswith("LAST=9\n") and "LAST=9" not in big


# ----------------------------------------------------------------------------- deny rules


@pytest.mark.parametrize("mutant", [None, "execute_denied"])
def test_deny_rule(harness: Harness, mutant: str | None) -> None:
    extra = ["--deny", "touch *"] + (["--mutant", mutant] if mutant else [])
    run = harness.run({"main": [call("d1", "shell", {"command": "touch forbidden.txt"}), say("ok")]}, *extra)
    policies = run.of_type("policy")
    if mutant is None:
        assert not (harness.workspace / "forbidden.txt").exists()
        res = run.result_of("d1")
        assert res["is_error"] and res["status"] == "denied"
        assert run.server.requests[-1].tool_result("d1").startswith("Permission denied")
        assert len(policies) == 1 and policies[0]["data"]["decision"] == "deny"
        assert policies[0]["data"]["execution_started"] is False and policies[0]["data"]["rule"] == "touch *"
    else:
        assert (harness.workspace / "forbidden.txt").exists()
        assert policies == [] and run.result_of("d1")["exit_code"] == 0


# ----------------------------------------------------------------------------- MCP


@pytest.mark.parametrize("mutant", [None, "hide_tool_error", "drop_tool_arg_field", "claim_without_receipt"])
def test_mcp_tools(harness: Harness, mutant: str | None) -> None:
    order = {"items": [1, 2], "note": {"gift": True, "msg": "hi"}}
    script = {"main": [call("m1", "mcp__shop__submit", {"order": order}),
                       call("m2", "mcp__shop__fail", {"code": "Q-17"}), say("done")]}
    run = harness.run(script, "--mcp-config", str(harness.mcp_config()), *(["--mutant", mutant] if mutant else []))
    assert run.returncode == 0, run.stderr
    decl = next(t for t in run.server.requests[0].body["tools"] if t["function"]["name"] == "mcp__shop__submit")
    assert decl["function"]["parameters"]["required"] == ["order"]
    assert decl["function"]["description"] == "Submit an order; returns a receipt."
    last = run.server.requests[-1]
    ok, err = json.loads(last.tool_result("m1")), json.loads(last.tool_result("m2"))
    receipt = ok["structuredContent"]["receipt_id"]
    assert ok["isError"] is False and receipt.startswith("RCPT-")
    assert err["structuredContent"] == {"error_code": "Q-17", "retryable": False}
    received = harness.mcp_ledger()[0]["arguments"]["order"]
    done = run.of_type("completion")[0]["data"]
    if mutant == "hide_tool_error":
        assert err["isError"] is False and run.result_of("m2")["is_error"] is False
    else:
        assert err["isError"] is True and run.result_of("m2")["is_error"] is True
    if mutant == "drop_tool_arg_field":
        assert received == {"items": [1, 2]}
    else:
        assert received == order
    if mutant == "claim_without_receipt":
        assert done["status"] == "completed" and done["receipts"] == [] and done["evidence_call_ids"] == []
    else:
        assert done["receipts"] == [{"call_id": "m1", "tool": "mcp__shop__submit", "key": "receipt_id",
                                     "value": receipt}]
        assert "m1" in done["evidence_call_ids"]


# ----------------------------------------------------------------------------- ask-user


def test_ask_user_answers_file_and_command(harness: Harness, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"answers": [{"match": "(?i)region", "answer": "eu-west-3"}]}))
    script = {"main": [call("a1", "ask_user", {"question": "Which region?"}), say("ok")]}
    run = harness.run(script, "--ask-user-answers", str(answers))
    assert "ask_user" in run.server.requests[0].tool_names
    assert run.server.requests[-1].tool_result("a1") == "eu-west-3"
    rec = run.of_type("ask_user")[0]["data"]
    assert (rec["question"], rec["answer"]) == ("Which region?", "eu-west-3")
    cmd = f"{sys.executable} -c \"import json,sys; print('A:' + json.load(sys.stdin)['question'].upper())\""
    run2 = harness.run({"main": [call("a2", "ask_user", {"question": "port?"}), say("ok")]},
                       "--ask-user-command", cmd)
    assert run2.server.requests[-1].tool_result("a2") == "A:PORT?"


# ----------------------------------------------------------------------------- sub-agents


def test_foreground_subagent_has_fresh_context_and_returns_its_result(harness: Harness) -> None:
    script = {"main": [call("s1", "spawn_subagent", {"description": "count", "prompt": "Count the files."}),
                       say("Child said 42.")],
              "child-1": [call("k1", "shell", {"command": "echo child-work"}), say("child says 42")]}
    run = harness.run(script, prompt="parent-only fact PF-77")
    child = run.server.of("child-1")
    assert len(child) == 2 and child[0].headers["x-tt-parent-principal-id"] == "main"
    assert [m["role"] for m in child[0].messages] == ["system", "user"]
    assert child[0].messages[1]["content"] == "Count the files."
    assert "PF-77" not in json.dumps(child[0].body)  # the parent's context does not leak in
    assert {"spawn_subagent", "ask_user"}.isdisjoint(child[0].tool_names)
    result = run.server.of("main")[-1].tool_result("s1")
    assert result == "Sub-agent child-1 finished (status: completed).\nchild says 42"
    child_recs = [r for r in run.records if r["principal_id"] == "child-1"]
    assert child_recs and all(r["parent_principal_id"] == "main" and r["principal_role"] == "child"
                              for r in child_recs)
    actions = [(r["principal_id"], r["data"]["action"]) for r in run.of_type("subagent")]
    assert actions == [("main", "spawn"), ("child-1", "finish"), ("main", "deliver")]


@pytest.mark.parametrize("mutant", [None, "premature_subagent_done"])
def test_background_subagent_pending_until_finished(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("s1", "spawn_subagent", {"prompt": "slow job", "background": True}),
                       say("Started; waiting."), say("Child result was 7.")],
              "child-1": [call("k1", "shell", {"command": "sleep 1.5"}), say("child result 7")]}
    run = harness.run(script, *(["--mutant", mutant] if mutant else []))
    main = run.server.of("main")
    spawn_result = main[1].tool_result("s1")
    done = run.of_type("completion")[0]["data"]
    if mutant is None:
        assert "status: pending" in spawn_result
        assert len(main) == 3
        note = main[2].messages[-1]
        assert note["role"] == "user" and "child result 7" in note["content"]
        deliver = [r["data"] for r in run.of_type("subagent") if r["data"]["action"] == "deliver"]
        assert deliver[0]["parent_reactivated"] is True and deliver[0]["final_text"] == "child result 7"
        assert done["status"] == "completed" and done["pending_child_ids"] == []
    else:
        assert spawn_result.startswith("Sub-agent child-1 finished (status: completed)")
        assert len(main) == 2 and "child result 7" not in _requests_text(run)
        assert done["status"] == "completed" and done["pending_child_ids"] == []
        assert run.result["status"] == "completed"


# ----------------------------------------------------------------------------- sessions


@pytest.mark.parametrize("mutant", [None, "lose_turn_fact"])
def test_resume_replays_history_and_new_session_does_not(harness: Harness, mutant: str | None) -> None:
    m = ["--mutant", mutant] if mutant else []
    t1 = harness.run({"main": [call("c1", "shell", {"command": "echo FACT-9431"}), say("noted")]}, *m,
                     prompt="Remember the fact.", session=("--new-session", "--session-id", "s-A"))
    assert t1.result["session_id"] == "s-A"
    t2 = harness.run({"main": [say("ok")]}, *m, prompt="What was the fact?", turn=2, session=("--resume", "s-A"))
    msgs = t2.server.requests[0].messages
    text = json.dumps(msgs)
    assert msgs[-1] == {"role": "user", "content": "What was the fact?"}
    sess = t2.of_type("session", turn=2)[0]["data"]
    assert sess["action"] == "resume" and sess["history_replayed"] is True and sess["messages_restored"] == 5
    if mutant is None:
        assert [m_["role"] for m_ in msgs] == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert "FACT-9431" in text and "Remember the fact." in text
    else:
        assert [m_["role"] for m_ in msgs] == ["system", "assistant", "user"]
        assert "FACT-9431" not in text and "Remember the fact." not in text and "noted" in text
    t3 = harness.run({"main": [say("fresh")]}, *m, prompt="New topic.", turn=3,
                     session=("--new-session", "--session-id", "s-B"))
    assert [m_["role"] for m_ in t3.server.requests[0].messages] == ["system", "user"]
    assert (harness.sessions / "s-A.json").is_file() and (harness.sessions / "s-B.json").is_file()


def test_killed_turn_leaves_a_call_without_result_and_resume_answers_it(harness: Harness) -> None:
    from tests.reference.chat_server import ChatServer

    server = ChatServer({"main": [call("c1", "shell", {"command": "echo $$ > sleeper.pid; exec sleep 60"})]}).start()
    harness.servers.append(server)
    argv = [sys.executable, "-m", "harnesses.reference", "--base-url", server.base_url, "--model", "scripted",
            "--workspace", str(harness.workspace), "--log", str(harness.log), "--session-dir", str(harness.sessions),
            "--prompt", "go", "--new-session", "--session-id", "s-K"]
    proc = subprocess.Popen(argv, env={"PATH": os.environ["PATH"], "OPENAI_API_KEY": API_KEY},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    pid_file = harness.workspace / "sleeper.pid"
    for _ in range(200):
        if pid_file.is_file() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # what the runner does at the wall clock
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    sleeper = int(pid_file.read_text())
    time.sleep(0.2)
    assert not alive(sleeper), "the running command outlived the harness"
    types = [json.loads(line)["type"] for line in harness.log.read_text().splitlines()]
    assert types[-1] == "tool_call" and "tool_result" not in types
    run = harness.run({"main": [say("resumed")]}, prompt="continue", turn=2, session=("--resume", "s-K"))
    msgs = run.server.requests[0].messages
    assert msgs[-2] == {"role": "tool", "tool_call_id": "c1",
                        "content": "No result: the harness stopped before this call finished (it may or may not "
                                   "have run)."}
    assert run.result_of("c1")["status"] == "interrupted"


# ----------------------------------------------------------------------------- secrets


@pytest.mark.parametrize("mutant", [None, "leak_secret"])
def test_credentials_are_masked_unless_leak_secret(harness: Harness, tmp_path: Path, mutant: str | None) -> None:
    token, planted = "tok-PLANTED-7f3a9c2e1b", "planted-db-pass-991"
    (harness.workspace / "creds.txt").write_text(f"db_password={planted}\n")
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps([planted]))
    run = harness.run({"main": [call("c1", "shell", {"command": "echo token=$DEPLOY_TOKEN; cat creds.txt"}),
                                say("done")]},
                      "--secrets-file", str(secrets), *(["--mutant", mutant] if mutant else []),
                      env={"DEPLOY_TOKEN": token})
    model_input = _requests_text(run)
    native = harness.log.read_text() + (harness.sessions / f"{run.result['session_id']}.json").read_text()
    assert "DEPLOY_TOKEN" in run.server.requests[0].messages[0]["content"]
    assert API_KEY not in model_input and API_KEY not in native
    if mutant is None:
        for value in (token, planted):
            assert value not in model_input and value not in native
        assert run.server.requests[-1].tool_result("c1") == "Exit code 0\ntoken=[REDACTED]\ndb_password=[REDACTED]\n"
    else:
        for value in (token, planted):
            assert value in model_input and value in native


# ----------------------------------------------------------------------------- failures and budgets


def test_provider_error_is_surfaced_not_hidden(harness: Harness) -> None:
    run = harness.run({"main": [Reply(status=503, error="upstream overloaded")]})
    assert run.returncode == 1 and run.result["status"] == "error"
    err = run.of_type("error")[0]["data"]
    assert err["kind"] == "provider_error" and err["http_status"] == 503 and "upstream overloaded" in err["message"]
    assert run.of_type("completion")[0]["data"]["status"] == "error"
    assert "status error" in run.stderr


def test_model_call_budget_stops_and_says_so(harness: Harness) -> None:
    script = {"main": [call(f"c{i}", "shell", {"command": "true"}) for i in range(5)]}
    run = harness.run(script, "--max-model-calls", "2")
    assert len(run.server.requests) == 2
    assert run.returncode == 1 and run.result["status"] == "budget_exhausted"
    assert run.of_type("error")[-1]["data"]["kind"] == "budget"


# ----------------------------------------------------------------------------- one change per mutant


def test_each_mutant_changes_nothing_outside_its_defect(harness: Harness) -> None:
    """On a scenario that touches no other defect, a mutant's model-facing results and final
    record equal the faithful harness's, except where its own defect shows."""
    from harnesses.reference.mutants import MUTANTS

    def script() -> dict:
        return {"main": [call("c1", "shell", {"command": "echo out; echo err >&2; exit 3"}),
                         call("c2", "write_file", {"path": "f.txt", "content": "v=1\n"}),
                         call("c3", "shell", {"command": "cat f.txt"}), say("done")]}

    def observe(run: CliRun) -> tuple[dict, dict]:
        last = run.server.requests[-1]
        seen = {cid: last.tool_result(cid) for cid in ("c1", "c2", "c3")}
        done = dict(run.of_type("completion")[-1]["data"])
        return seen, done

    base_seen, base_done = observe(harness.run(script()))
    # hide_exit_code never shows a status line, so c3's "Exit code 0" goes too.
    expected = {"hide_exit_code": ("c1", "c3"), "drop_stderr": ("c1",)}
    for mutant in MUTANTS:
        seen, done = observe(harness.run(script(), "--mutant", mutant))
        changed = tuple(cid for cid in seen if seen[cid] != base_seen[cid])
        assert changed == expected.get(mutant, ()), (mutant, changed)
        if mutant == "claim_without_receipt":
            assert done["evidence_call_ids"] == [] != base_done["evidence_call_ids"]
            done["evidence_call_ids"] = base_done["evidence_call_ids"]
        elif mutant == "misreport_model_calls":
            assert done["model_calls"] == base_done["model_calls"] - 1
            done["model_calls"] = base_done["model_calls"]
        elif mutant == "misreport_usage":  # the last of the four responses' usage, not their sum
            assert done["usage"]["prompt_tokens"] == 104 != base_done["usage"]["prompt_tokens"]
            done["usage"] = base_done["usage"]
        elif mutant in expected:  # the hidden failure also leaves the failed-call list
            assert done["failed_tool_call_ids"] == ([] if mutant == "hide_exit_code" else ["c1"])
            done["failed_tool_call_ids"], done["evidence_call_ids"] = (base_done["failed_tool_call_ids"],
                                                                      base_done["evidence_call_ids"])
        assert done == base_done, mutant


# ----------------------------------------------------------------------------- mutants of the later properties


@pytest.mark.parametrize("mutant", [None, "ignore_requested_timeout"])
def test_requested_timeout_takes_effect_unless_ignore_requested_timeout(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("t1", "shell", {"command": "sleep 2; echo finished", "timeout_s": 0.5}), say("done")]}
    run = harness.run(script, *(["--mutant", mutant] if mutant else []))
    shown = run.server.requests[-1].tool_result("t1")
    res = run.result_of("t1")
    if mutant is None:
        assert shown.startswith("Command timed out after 0.5 s") and "finished" not in shown
        assert res["status"] == "timed_out" and res["duration_s"] < 1.9
    else:  # the harness default (120 s) applies: the 2 s command runs to its end
        assert shown == "Exit code 0\nfinished\n"
        assert res["status"] == "ok" and res["duration_s"] >= 2
    assert run.of_type("tool_call")[0]["data"]["arguments"]["timeout_s"] == 0.5  # the request itself is recorded


@pytest.mark.parametrize("mutant", [None, "drop_user_answer"])
def test_ask_user_answer_reaches_the_model_unless_drop_user_answer(harness: Harness, tmp_path: Path,
                                                                   mutant: str | None) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"answers": [{"match": "(?i)region", "answer": "eu-north-7"}]}))
    script = {"main": [call("a1", "ask_user", {"question": "Which region?"}), say("ok")]}
    run = harness.run(script, "--ask-user-answers", str(answers), *(["--mutant", mutant] if mutant else []))
    assert "ask_user" in run.server.requests[0].tool_names
    rec = run.of_type("ask_user")[0]["data"]
    assert (rec["question"], rec["answer"]) == ("Which region?", "eu-north-7")  # the harness got the answer
    shown = run.server.requests[-1].tool_result("a1")
    if mutant is None:
        assert shown == "eu-north-7" and run.result_of("a1")["content"] == "eu-north-7"
    else:
        assert shown == "(no answer)" and "eu-north-7" not in _requests_text(run)
        assert run.result_of("a1")["is_error"] is False


@pytest.mark.parametrize("mutant", [None, "misattribute_child"])
def test_child_actions_recorded_under_the_child_unless_misattribute_child(harness: Harness,
                                                                           mutant: str | None) -> None:
    script = {"main": [call("p1", "shell", {"command": "echo parent-work"}),
                       call("s1", "spawn_subagent", {"prompt": "Do the child work."}), say("done")],
              "child-1": [call("k1", "shell", {"command": "echo child-work"}), say("child done")]}
    run = harness.run(script, *(["--mutant", mutant] if mutant else []))
    assert run.returncode == 0, run.stderr
    # the child still runs in its own context, whatever the records say
    child = run.server.of("child-1")
    assert len(child) == 2 and child[0].headers["x-tt-principal-id"] == "child-1"
    assert child[1].tool_result("k1") == "Exit code 0\nchild-work\n"
    assert run.server.of("main")[-1].tool_result("s1").endswith("child done")

    def owner(type_: str, call_id: str) -> tuple[str, str | None, str]:
        r = next(r for r in run.of_type(type_) if r["data"]["call_id"] == call_id)
        return r["principal_id"], r["parent_principal_id"], r["principal_role"]

    for type_ in ("tool_call", "tool_result"):
        assert owner(type_, "p1") == ("main", None, "main")
        assert owner(type_, "k1") == (("child-1", "main", "child") if mutant is None else ("main", None, "main"))
    # the child's other records (requests, responses, its finish) keep its principal
    kinds = {r["type"] for r in run.records if r["principal_id"] == "child-1"}
    assert {"request", "response", "subagent"} <= kinds
    assert ("tool_call" in kinds) is (mutant is None)


@pytest.mark.parametrize("mutant", [None, "misreport_model_calls"])
def test_completion_counts_every_model_call_unless_misreport_model_calls(harness: Harness,
                                                                          mutant: str | None) -> None:
    script = {"main": [call("c1", "shell", {"command": "true"}), call("c2", "shell", {"command": "true"}),
                       say("done")]}
    run = harness.run(script, *(["--mutant", mutant] if mutant else []))
    assert len(run.server.requests) == 3 and len(run.of_type("request")) == 3
    done = run.of_type("completion")[0]["data"]
    want = 3 if mutant is None else 2
    assert done["model_calls"] == want and run.result["model_calls"] == want
    assert done["tool_calls"] == 2 and done["status"] == "completed"
    assert sum(r["data"]["usage"]["completion_tokens"] for r in run.of_type("response")) > 0  # usage untouched


# ----------------------------------------------------------------------------- mutants of the unmeasured properties


def _m(mutant: str | None) -> list[str]:
    return ["--mutant", mutant] if mutant else []


def _simulator_config(harness: Harness) -> Path:
    """An MCP config running the benchmark's own simulator server (the ticket-desk test pack)."""
    from tests.conftest import REPO

    pack = REPO / "tests" / "simulators" / "fixtures" / "T6-ticket-desk-001"
    args = ["-m", "apparatus.simulators.serve", "--pack", str(pack), "--service", "tickets",
            "--state-dir", str(harness.root / "sim-state"), "--ledger", str(harness.root / "sim-ledger.jsonl"),
            "--seed", "seed-1"]
    cfg = {"servers": {"tickets": {"command": sys.executable, "args": args,
                                   "env": {"PYTHONPATH": str(REPO)}}}}
    path = harness.root / "sim-mcp.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("mutant", [None, "stale_tool_list"])
def test_tool_list_change_is_followed_unless_stale_tool_list(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("u1", "mcp__tickets__unlock_archive", {}),
                       call("x1", "mcp__tickets__search_archive", {"query": "printer"}), say("done")]}
    run = harness.run(script, "--mcp-config", str(_simulator_config(harness)), *_m(mutant))
    assert run.returncode == 0, run.stderr
    first, second, third = run.server.requests
    assert "mcp__tickets__search_archive" not in first.tool_names
    if mutant is None:
        assert "mcp__tickets__search_archive" in second.tool_names
        assert json.loads(third.tool_result("x1"))["isError"] is False
    else:  # the announced tool is never declared, and calling it by name is an unknown tool
        assert "mcp__tickets__search_archive" not in second.tool_names
        assert third.tool_result("x1").startswith("Unknown tool 'mcp__tickets__search_archive'")


@pytest.mark.parametrize("mutant", [None, "hide_mcp_tool"])
def test_mcp_tools_declared_on_every_turn_unless_hide_mcp_tool(harness: Harness, mutant: str | None) -> None:
    cfg = ["--mcp-config", str(harness.mcp_config()), *_m(mutant)]
    first = harness.run({"main": [say("turn one")]}, *cfg)
    sid = first.result["session_id"]
    second = harness.run({"main": [call("m1", "mcp__shop__summary", {}), say("done")]}, *cfg, turn=2,
                         session=("--resume", sid))
    listed = ["submit", "fail", "slow", "summary"]  # the server's listing order
    t1 = [n.removeprefix("mcp__shop__") for n in first.server.requests[0].tool_names if n.startswith("mcp__")]
    t2 = [n.removeprefix("mcp__shop__") for n in second.server.requests[0].tool_names if n.startswith("mcp__")]
    assert t1 == listed
    assert t2 == (listed if mutant is None else [])
    assert json.loads(second.server.requests[1].tool_result("m1"))["structuredContent"]  # still callable by name


@pytest.mark.parametrize("mutant", [None, "drop_structured_content"])
def test_structured_content_is_relayed_unless_dropped(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("s1", "mcp__shop__summary", {}), say("done")]}
    run = harness.run(script, "--mcp-config", str(harness.mcp_config()), *_m(mutant))
    shown = json.loads(run.server.requests[-1].tool_result("s1"))
    assert shown["content"] == [{"type": "text", "text": "3 batches settled (figures attached)"}]
    if mutant is None:
        assert shown["structuredContent"]["batches"][0] == {"id": "B-1", "amount": "1043.17"}
        assert run.result_of("s1")["structured_content"] == shown["structuredContent"]
    else:
        assert "structuredContent" not in shown and "1043.17" not in _requests_text(run)
        assert run.result_of("s1")["structured_content"] is None


@pytest.mark.parametrize("mutant", [None, "ignore_model_budget", "hide_unfinished"])
def test_budget_stop_is_kept_and_disclosed_unless_mutated(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call(f"c{i}", "shell", {"command": "true"}) for i in range(4)] + [say("done")]}
    run = harness.run(script, "--max-model-calls", "2", *_m(mutant))
    done = run.of_type("completion")[0]["data"]
    if mutant == "ignore_model_budget":  # the budget is never checked: all five requests go out
        assert len(run.server.requests) == 5 and run.returncode == 0 and done["status"] == "completed"
        assert not [r for r in run.of_type("error") if r["data"]["kind"] == "budget"]
        return
    assert len(run.server.requests) == 2
    assert run.of_type("error")[-1]["data"]["kind"] == "budget"  # the stop itself is still logged
    if mutant is None:
        assert run.returncode == 1 and run.result["status"] == done["status"] == "budget_exhausted"
    else:  # hide_unfinished: the unfinished turn is reported as completed
        assert run.returncode == 0 and run.result["status"] == done["status"] == "completed"
        assert "ended with status" not in run.stderr


@pytest.mark.parametrize("mutant", [None, "hide_unfinished"])
def test_pending_children_make_the_turn_incomplete_unless_hidden(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("s1", "spawn_subagent", {"prompt": "long job", "background": True}), say("Started.")],
              "child-1": [call("k1", "shell", {"command": "sleep 30"}), say("late")]}
    run = harness.run(script, "--deadline-s", "6", *_m(mutant))
    done = run.of_type("completion")[0]["data"]
    assert [r["data"]["action"] for r in run.of_type("subagent")][-1] == "abandon"
    if mutant is None:
        assert done["status"] == "incomplete" and done["pending_child_ids"] == ["child-1"] and run.returncode == 1
    else:
        assert done["status"] == "completed" and done["pending_child_ids"] == [] and run.returncode == 0


@pytest.mark.parametrize("mutant", [None, "drop_child_result"])
def test_every_child_result_reaches_the_parent_unless_dropped(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("s1", "spawn_subagent", {"prompt": "first"}),
                       call("s2", "spawn_subagent", {"prompt": "second"}), say("done")],
              "child-1": [say("alpha 11")], "child-2": [say("beta 22")]}
    run = harness.run(script, *_m(mutant))
    last = run.server.of("main")[-1]
    assert last.tool_result("s1") == "Sub-agent child-1 finished (status: completed).\nalpha 11"
    finish = {r["principal_id"]: r["data"]["final_text"] for r in run.of_type("subagent")
              if r["data"]["action"] == "finish"}
    assert finish == {"child-1": "alpha 11", "child-2": "beta 22"}  # both children really answered
    if mutant is None:
        assert last.tool_result("s2") == "Sub-agent child-2 finished (status: completed).\nbeta 22"
    else:
        assert last.tool_result("s2") == "Sub-agent child-2 finished (status: completed).\n(no output)"
        assert "beta 22" not in json.dumps(last.body)


@pytest.mark.parametrize("mutant", [None, "leak_parent_context"])
def test_child_context_is_only_its_prompt_unless_leaked(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("k0", "shell", {"command": "echo parent-tool PT-55"}),
                       call("s1", "spawn_subagent", {"prompt": "Count the files."}), say("done")],
              "child-1": [say("3 files")]}
    run = harness.run(script, *_m(mutant), prompt="parent-only fact PF-77")
    child = run.server.of("child-1")[0]
    assert child.messages[-1] == {"role": "user", "content": "Count the files."}
    body = json.dumps(child.body)
    if mutant is None:
        assert [m["role"] for m in child.messages] == ["system", "user"]
        assert "PF-77" not in body and "PT-55" not in body
    else:
        assert [m["role"] for m in child.messages] == ["system", "user", "user"]
        assert "PF-77" in body and "PT-55" in body


@pytest.mark.parametrize("mutant", [None, "swallow_provider_error"])
def test_provider_error_surfaced_unless_swallowed(harness: Harness, mutant: str | None) -> None:
    run = harness.run({"main": [Reply(status=503, error="upstream overloaded")]}, *_m(mutant))
    done = run.of_type("completion")[0]["data"]
    if mutant is None:
        assert run.returncode == 1 and done["status"] == "error" and run.of_type("error")
    else:
        assert run.returncode == 0 and done["status"] == "completed" and done["final_text"] == ""
        assert run.of_type("error") == [] and "upstream overloaded" not in json.dumps(run.result) + run.stderr


# ----------------------------------------------------------------------------- batch 2: properties that had no mutant


@pytest.mark.parametrize("mutant", [None, "misreport_usage"])
def test_completion_usage_sums_every_request_unless_misreport_usage(harness: Harness, mutant: str | None) -> None:
    script = {"main": [call("c1", "shell", {"command": "true"}),
                       call("s1", "spawn_subagent", {"prompt": "say hi"}), say("done")],
              "child-1": [say("hi")]}
    run = harness.run(script, *_m(mutant))
    assert run.returncode == 0, run.stderr
    responses = [r["data"]["usage"] for r in run.of_type("response")]
    assert len(responses) == len(run.server.requests) == 4  # three of main, one of the child
    done = run.of_type("completion")[0]["data"]
    assert done["model_calls"] == 4 and done["tool_calls"] == 2  # the counts are untouched
    if mutant is None:  # every answered request of the turn, every principal
        want = {k: sum(u[k] for u in responses) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    else:  # the last response's usage only
        want = {k: responses[-1][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert done["usage"] == {**want, "cached_tokens": None, "reasoning_tokens": None,
                             "responses_with_usage": 4, "responses_without_usage": 0}
    assert run.result["usage"] == done["usage"]
    # the per-call usage records stay exact either way (the defect is in the completion record only)
    assert [r["data"]["usage"]["prompt_tokens"] for r in run.of_type("response")] == [101, 102, 103, 104]


def test_completion_usage_is_null_when_no_response_reported_usage(harness: Harness) -> None:
    run = harness.run({"main": [Reply(status=503, error="down")]})
    assert run.of_type("completion")[0]["data"]["usage"] is None  # unavailable, never 0


def _long_names_config(harness: Harness) -> Path:
    path = harness.mcp_config()
    cfg = json.loads(path.read_text())
    cfg["servers"]["shop"]["env"]["TT_TEST_MCP_LONG_NAMES"] = "1"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("mutant", [None, "collide_tool_names"])
def test_long_and_invalid_mcp_names_stay_unique_unless_collide_tool_names(harness: Harness,
                                                                         mutant: str | None) -> None:
    from harnesses.reference.mcp_tools import FUNCTION_NAME

    def declared(req: Request) -> dict[str, str]:
        return {t["function"]["name"]: t["function"]["description"] for t in req.body["tools"]}

    def script(req: Request) -> Reply:
        """Reserve on the express lane with whichever declared tool says it is the express one
        (else the only reserve tool there is), then create an order with the 'submit' one."""
        if len(req.messages) > 2:
            return say("done")
        tools = declared(req)
        reserve = [n for n in tools if "reserve_inventory" in n]
        express = next((n for n in reserve if "express" in tools[n]), reserve[0])
        submit = next(n for n in tools if "orders" in n and "submit" in tools[n])
        return Reply(tool_calls=[("r1", express, {"sku": "SKU-1"}), ("o1", submit, {"ref": "PO-7"})])

    run = harness.run(script, "--mcp-config", str(_long_names_config(harness)), *_m(mutant))
    assert run.returncode == 0, run.stderr
    tools = declared(run.server.requests[0])
    assert all(FUNCTION_NAME.match(n) for n in tools)  # every name is a valid function name either way
    mcp = [n for n in tools if n.startswith("mcp__")]
    called = [e["tool"] for e in harness.mcp_ledger()]
    if mutant is None:  # eight tools, eight declarations, each call reaches the tool it meant
        assert len(mcp) == 8 and len(set(mcp)) == 8
        assert "mcp__shop__orders_create" in tools and tools["mcp__shop__orders_create"] == "Create a draft order."
        assert called == ["reserve_inventory_for_the_outbound_shipment_on_the_priority_express_lane",
                          "orders.create"]
    else:  # the colliding pairs collapse to one declaration each: the later one listed wins
        assert len(mcp) == 6
        assert tools["mcp__shop__orders_create"].endswith("Create and submit an order.")
        assert called == ["reserve_inventory_for_the_outbound_shipment_on_the_priority_standard_lane",
                          "orders.create"]
    assert json.loads(run.server.requests[-1].tool_result("r1"))["isError"] is False


@pytest.mark.parametrize("mutant", [None, "stale_read_cache"])
def test_read_file_shows_the_file_as_it_is_unless_stale_read_cache(harness: Harness, mutant: str | None) -> None:
    (harness.workspace / "f.txt").write_text("v=1\n")
    script = {"main": [call("r1", "read_file", {"path": "f.txt"}),
                       call("x1", "shell", {"command": "echo v=2 > f.txt"}),
                       call("r2", "read_file", {"path": "f.txt"}),
                       call("w1", "write_file", {"path": "f.txt", "content": "v=3\n"}),
                       call("r3", "read_file", {"path": "f.txt"}), say("done")]}
    run = harness.run(script, *_m(mutant))
    assert run.returncode == 0, run.stderr
    last = run.server.requests[-1]
    assert last.tool_result("r1") == "v=1\n" and last.tool_result("r3") == "v=3\n"
    assert (harness.workspace / "f.txt").read_text() == "v=3\n"
    if mutant is None:
        assert last.tool_result("r2") == "v=2\n"
    else:  # the command's change is never seen, and nothing says so
        assert last.tool_result("r2") == "v=1\n"
        assert (run.result_of("r2")["is_error"], run.result_of("r2")["status"]) == (False, "ok")


@pytest.mark.parametrize("mutant", [None, "persist_shell_cwd"])
def test_every_shell_call_starts_in_the_workspace_unless_persist_shell_cwd(harness: Harness,
                                                                          mutant: str | None) -> None:
    ws = harness.workspace.resolve()
    script = {"main": [call("c1", "shell", {"command": "mkdir -p sub && cd sub && export X=1 && pwd"}),
                       call("c2", "shell", {"command": "pwd; echo \"X=${X:-unset}\"; touch marker"}), say("done")]}
    run = harness.run(script, *_m(mutant))
    assert run.returncode == 0, run.stderr
    last = run.server.requests[-1]
    assert last.tool_result("c1") == f"Exit code 0\n{ws / 'sub'}\n"
    assert "cd and export do not persist" in next(
        t["function"]["description"] for t in last.body["tools"] if t["function"]["name"] == "shell")
    if mutant is None:
        assert last.tool_result("c2") == f"Exit code 0\n{ws}\nX=unset\n"
        assert (ws / "marker").is_file() and not (ws / "sub" / "marker").exists()
    else:  # the directory persists (the environment does not), against the declared semantics
        assert last.tool_result("c2") == f"Exit code 0\n{ws / 'sub'}\nX=unset\n"
        assert (ws / "sub" / "marker").is_file() and not (ws / "marker").exists()


@pytest.mark.parametrize("mutant", [None, "stale_handoff"])
def test_replayed_session_carries_the_whole_history_unless_stale_handoff(harness: Harness,
                                                                       mutant: str | None) -> None:
    t1 = harness.run({"main": [say("noted the site")]}, *_m(mutant), prompt="The site is depot-north.",
                     session=("--new-session", "--session-id", "s-old"))
    t2 = harness.run({"main": [call("h1", "shell", {"command": "echo handoff batch B-4471"}), say("batch opened")]},
                     *_m(mutant), prompt="Open the batch.", turn=2, session=("--resume", "s-old"))
    assert t1.returncode == t2.returncode == 0
    t3 = harness.run({"main": [say("continuing")]}, *_m(mutant), prompt="New session: close the batch.", turn=3,
                     session=("--new-session", "--session-id", "s-new", "--replay-from", "s-old"))
    assert t3.returncode == 0, t3.stderr
    seen = json.dumps(t3.server.requests[0].messages)
    assert "depot-north" in seen and seen.endswith('"New session: close the batch."}]')
    restored = t3.of_type("session", turn=3)[0]["data"]
    assert restored["replayed_from"] == "s-old" and restored["history_replayed"] is True
    if mutant is None:
        assert "Open the batch." in seen and "B-4471" in seen and "batch opened" in seen
        assert restored["messages_restored"] == 7  # system, 2 x (prompt ... answer)
    else:  # the previous session's last turn is missing from the hand-off
        assert "Open the batch." not in seen and "B-4471" not in seen and "batch opened" not in seen
        assert restored["messages_restored"] == 3
    # a plain resume is untouched by the defect
    assert "depot-north" in json.dumps(t2.server.requests[0].messages)


def test_stale_handoff_cuts_at_the_last_user_prompt_not_at_a_notification() -> None:
    from harnesses.reference.cli import before_last_turn

    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "turn 1"},
               {"role": "assistant", "content": "a1"}, {"role": "user", "content": "turn 2"},
               {"role": "assistant", "content": "a2"},
               {"role": "user", "content": "[sub-agent notification]\nSub-agent child-1 finished"},
               {"role": "assistant", "content": "a3"}]
    assert before_last_turn(history) == history[:3]
    assert before_last_turn(history[:1]) == history[:1]


def test_replay_feature_gates_stale_handoff() -> None:
    import dataclasses

    from harnesses.reference.mutants import not_applicable, pack_features
    from tests.conftest import REPO
    from tracetrial.task import SessionBoundary, Turn, Turns, load_task

    base = load_task(REPO / "tasks" / "E1-build-status-001")
    resumed = dataclasses.replace(base, turns=Turns(turns=[Turn(user="again")]))
    replayed = dataclasses.replace(base, turns=Turns(turns=[Turn(user="again", session_boundary=SessionBoundary(
        kind="new_session", history_replayed=True))]))
    assert "replay" not in pack_features(resumed) and "needs replay" in (not_applicable("stale_handoff", resumed) or "")
    assert "replay" in pack_features(replayed) and not_applicable("stale_handoff", replayed) is None


@pytest.mark.parametrize("mutant", [None, "stale_status"])
def test_status_reports_a_child_that_finished_during_the_wait_unless_stale_status(harness: Harness,
                                                                                 mutant: str | None) -> None:
    script = {"main": [call("s1", "spawn_subagent", {"prompt": "settle", "background": True}),
                       call("q1", "subagent_status", {"wait_s": 20}), say("done")],
              "child-1": [call("k1", "shell", {"command": "sleep 1.5"}), say("settled as R-9")]}
    run = harness.run(script, *_m(mutant))
    assert run.returncode == 0, run.stderr
    finish = next(r for r in run.of_type("subagent") if r["data"]["action"] == "finish")
    status = run.result_of("q1")
    status_seq = next(r["seq"] for r in run.of_type("tool_result") if r["data"]["call_id"] == "q1")
    assert finish["seq"] < status_seq  # the child had ended before the report was written
    assert (status["is_error"], status["status"]) == (False, "ok")
    last = run.server.of("main")[-1]
    if mutant is None:
        assert last.tool_result("q1") == "Sub-agent child-1 finished (status: completed).\nsettled as R-9"
        assert not any(str(m.get("content", "")).startswith("[sub-agent notification]") for m in last.messages)
    else:  # reported pending although it had finished; its result arrives by notification afterwards
        assert last.tool_result("q1") == "Sub-agent child-1: pending"
        assert last.messages[-1]["content"] == ("[sub-agent notification]\n"
                                                "Sub-agent child-1 finished (status: completed).\nsettled as R-9")


# ----------------------------------------------------------------------------- mutant batch 3


def _system(req: Request) -> str:
    return str(req.messages[0]["content"])


@pytest.mark.parametrize("mutant", [None, "stale_memory"])
def test_project_memory_reaches_every_new_session_unless_stale_memory(harness: Harness, mutant: str | None) -> None:
    (harness.workspace / "AGENTS.md").write_text("# Team notes\n")
    t1 = harness.run({"main": [call("n1", "shell", {"command": "echo 'hold id H-7731' >> AGENTS.md"}), say("saved")]},
                     *_m(mutant), session=("--new-session", "--session-id", "s-1"))
    assert t1.returncode == 0, t1.stderr
    first = _system(t1.server.requests[0])
    assert "Project memory (AGENTS.md in the workspace" in first and "# Team notes" in first
    assert "H-7731" not in first
    t2 = harness.run({"main": [say("ok")]}, *_m(mutant), turn=2, session=("--new-session", "--session-id", "s-2"))
    assert t2.returncode == 0, t2.stderr
    memory = [r["data"] for r in t2.of_type("memory")]
    assert [m["path"] for m in memory] == ["AGENTS.md", "AGENTS.md"]  # one per session start
    second = _system(t2.server.requests[0])
    if mutant is None:
        assert "hold id H-7731" in second and memory[1]["source"] == "file"
        assert memory[1]["bytes"] == len((harness.workspace / "AGENTS.md").read_bytes())
    else:  # the later session gets the copy taken at the first session's start
        assert "H-7731" not in second and "# Team notes" in second and memory[1]["source"] == "cache"


def test_no_memory_file_no_memory_section(harness: Harness) -> None:
    run = harness.run({"main": [say("ok")]})
    assert "Project memory" not in _system(run.server.requests[0]) and run.of_type("memory") == []


def test_replayed_session_gets_the_memory_as_it_is_now(harness: Harness) -> None:
    (harness.workspace / "AGENTS.md").write_text("v1\n")
    harness.run({"main": [call("n1", "shell", {"command": "echo v2 > AGENTS.md"}), say("ok")]},
                session=("--new-session", "--session-id", "s-1"))
    t2 = harness.run({"main": [say("ok")]}, turn=2,
                     session=("--new-session", "--session-id", "s-2", "--replay-from", "s-1"))
    req = t2.server.requests[0]
    assert "v2" in _system(req) and "v1" not in _system(req)
    assert sum(1 for m in req.messages if m["role"] == "system") == 1  # the replayed one was replaced
    assert req.tool_result("n1") == "Exit code 0\n(no output)"


@pytest.mark.parametrize("mutant", [None, "hide_job_exit"])
def test_background_job_reports_its_exit_status_unless_hide_job_exit(harness: Harness, mutant: str | None) -> None:
    job = {"command": "echo started; echo 'disk full' >&2; sleep 0.3; exit 3", "run_in_background": True}
    script = {"main": [call("b1", "shell", job), call("s1", "job_status", {"job_id": "job-1", "wait_s": 10}),
                       say("done")]}
    run = harness.run(script, "--background-jobs", *_m(mutant))
    assert run.returncode == 0, run.stderr
    first, last = run.server.requests[0], run.server.requests[-1]
    assert "job_status" in first.tool_names
    shell = next(t for t in first.body["tools"] if t["function"]["name"] == "shell")
    assert "run_in_background" in shell["function"]["parameters"]["properties"]
    assert last.tool_result("b1").startswith("Started background job job-1 (pid ")
    status = last.tool_result("s1")
    assert status.startswith("Job job-1 ended after ") and status.endswith("started\n[stderr]\ndisk full\n")
    jobs = [r["data"] for r in run.of_type("job")]
    assert [j["action"] for j in jobs] == ["start", "exit"] and jobs[0]["command"] == job["command"]
    code = 3 if mutant is None else 0  # the defect: success whatever the job's status
    assert f"Exit code {code}\n" in status and jobs[1]["exit_code"] == code
    assert run.result_of("s1")["exit_code"] == code


def test_background_job_running_at_turn_end_is_killed_and_recorded(harness: Harness) -> None:
    script = {"main": [call("b1", "shell", {"command": "echo $$ > pid; sleep 60", "run_in_background": True}),
                       call("s1", "job_status", {}), say("leaving it")]}
    run = harness.run(script, "--background-jobs")
    assert run.returncode == 0, run.stderr
    assert run.server.requests[-1].tool_result("s1").startswith("Job job-1 is running (")
    assert [r["data"]["action"] for r in run.of_type("job")] == ["start", "killed"]
    assert run.records[-1]["type"] == "completion"
    pid = int((harness.workspace / "pid").read_text())
    assert not alive(pid)


def test_without_background_jobs_the_declarations_are_unchanged(harness: Harness) -> None:
    run = harness.run({"main": [call("b1", "shell", {"command": "true", "run_in_background": True}), say("ok")]})
    req = run.server.requests[0]
    assert "job_status" not in req.tool_names
    shell = next(t for t in req.body["tools"] if t["function"]["name"] == "shell")
    assert "run_in_background" not in shell["function"]["parameters"]["properties"]
    assert run.server.requests[-1].tool_result("b1") == "Exit code 0\n(no output)"  # ran in the foreground


def _echo(cid: str, tokens: int | None = None) -> Reply:
    return Reply(tool_calls=[(cid, "shell", {"command": f"echo {cid}"})], prompt_tokens=tokens)


@pytest.mark.parametrize("mutant", [None, "window_compaction"])
def test_compaction_keeps_the_user_messages_and_a_summary_unless_window_compaction(harness: Harness,
                                                                                    mutant: str | None) -> None:
    big = 900  # of a 1000-token window: at or over 80 % the history is compacted before the next request
    steps = [_echo("c1"), _echo("c2"), _echo("c3", big)]
    summary = [say("SUMMARY: c1..c3 echoed")] if mutant is None else []
    run = harness.run({"main": [*steps, *summary, _echo("c4"), say("done")]}, "--context-window", "1000",
                      *_m(mutant), prompt="Echo four times; constraint K=7.")
    assert run.returncode == 0, run.stderr
    reqs = run.server.requests
    if mutant is None:
        ask, after = reqs[3], reqs[4]
        assert "tools" not in ask.body and ask.messages[-1]["content"].startswith("Context checkpoint compaction")
        assert [m["role"] for m in after.messages] == ["system", "user", "user"]
        assert after.messages[1]["content"] == "Echo four times; constraint K=7."
        assert after.messages[2]["content"].endswith("\nSUMMARY: c1..c3 echoed")
        rec = run.of_type("compaction")[0]["data"]
        assert (rec["trigger"], rec["prompt_tokens"], rec["context_window"], rec["summary"]) == (
            "auto", big, 1000, "SUMMARY: c1..c3 echoed")
        assert (rec["messages_before"], rec["messages_after"], rec["user_messages_kept"]) == (8, 3, 1)
        assert len(reqs) == 6  # one compaction only
    else:  # the oldest messages (the task's constraint with them) silently gone
        after = reqs[3]
        assert [m["role"] for m in after.messages] == ["system", "assistant", "tool", "assistant", "tool"]
        assert "K=7" not in json.dumps(after.messages) and run.of_type("compaction") == []
    session = json.loads(next(harness.sessions.glob("*.json")).read_text())
    assert session["messages"][: len(after.messages)] == after.messages  # the session holds the compacted history


@pytest.mark.parametrize("mutant", [None, "stale_goal"])
def test_compaction_carries_a_revised_goal_unless_stale_goal(harness: Harness, mutant: str | None) -> None:
    t1 = harness.run({"main": [say("building the report for March")]}, "--context-window", "1000", *_m(mutant),
                     prompt="Build the report for March.", session=("--new-session", "--session-id", "s-1"))
    assert t1.returncode == 0
    t2 = harness.run({"main": [_echo("c1", 950), say("SUMMARY: one echo"), say("done")]}, "--context-window",
                     "1000", *_m(mutant), prompt="Change of plan: build it for April instead.", turn=2,
                     session=("--resume", "s-1"))
    assert t2.returncode == 0, t2.stderr
    after = t2.server.requests[2]
    users = [m["content"] for m in after.messages if m["role"] == "user"]
    assert users[-1].endswith("SUMMARY: one echo")
    if mutant is None:
        assert users[:-1] == ["Build the report for March.", "Change of plan: build it for April instead."]
        assert t2.of_type("compaction")[0]["data"]["user_messages_kept"] == 2
    else:  # the revision is gone; only the first request survives
        assert users[:-1] == ["Build the report for March."]
        assert t2.of_type("compaction")[0]["data"]["user_messages_kept"] == 1


def test_without_a_context_window_nothing_is_compacted(harness: Harness) -> None:
    run = harness.run({"main": [_echo("c1", 10**6), _echo("c2"), say("done")]})
    assert run.returncode == 0 and len(run.server.requests) == 3 and run.of_type("compaction") == []


def test_batch_3_records_normalize_into_the_trace(harness: Harness) -> None:
    """memory, job and compaction records each become a Trace IR event (nothing unaccounted)."""
    from harnesses.reference.normalize import normalize_records

    (harness.workspace / "AGENTS.md").write_text("notes\n")
    job = {"command": "exit 2", "run_in_background": True}
    run = harness.run({"main": [call("b1", "shell", job), _echo("c1", 900), say("SUMMARY"),
                                call("s1", "job_status", {"wait_s": 5}), say("done")]},
                      "--background-jobs", "--context-window", "1000")
    assert run.returncode == 0, run.stderr
    trace = normalize_records(harness.log.read_text().splitlines(), run_id="r")
    assert trace.structured_trace_status == "complete", trace.notes
    by_type = [(e.event_type, getattr(e, "native_event_type", None), getattr(e, "status", None)) for e in trace.events]
    assert ("native_event", "memory", "file") in by_type
    assert ("native_event", "job", "start") in by_type and ("native_event", "job", "exit") in by_type
    compaction = [e for e in trace.events if e.event_type == "context_compaction"]
    assert len(compaction) == 1 and compaction[0].summary == "SUMMARY" and compaction[0].trigger == "auto"


def _write_skill(workspace: Path, body: str) -> None:
    folder = workspace / "skills" / "rate-card"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: rate-card\ndescription: Freight rates per zone.\n---\n" + body)
    (folder / "zones.csv").write_text("zone\nA\n")


@pytest.mark.parametrize("mutant", [None, "truncate_skill"])
def test_skill_body_is_relayed_whole_unless_truncate_skill(harness: Harness, mutant: str | None) -> None:
    body = "# Rate card\n" + "".join(f"zone {i:03d}: rate {i * 7} cents\n" for i in range(120)) + "CHECKSUM: 7741\n"
    _write_skill(harness.workspace, body)
    run = harness.run({"main": [call("k1", "skill", {"name": "rate-card"}), call("k2", "skill", {"name": "nope"}),
                                say("done")]}, *_m(mutant))
    assert run.returncode == 0, run.stderr
    first, last = run.server.requests[0], run.server.requests[-1]
    assert "- rate-card: Freight rates per zone." in _system(first) and "skill" in first.tool_names
    result = last.tool_result("k1")
    assert result.startswith("Skill rate-card (skills/rate-card/SKILL.md):\n# Rate card\n")
    assert result.endswith("[skill files: zones.csv]") and "name: rate-card" not in result
    assert last.tool_result("k2").startswith("skill: no skill named 'nope' (skills: rate-card)")
    if mutant is None:
        assert body in result and run.result_of("k1")["truncated"] is None
    else:  # the defect: the body stops after 1,024 bytes, and nothing says so
        assert "CHECKSUM" not in result and body[:1024] in result and "truncated" not in result.lower()
        assert (run.result_of("k1")["is_error"], run.result_of("k1")["truncated"]) == (False, None)


def test_without_skills_there_is_no_skill_tool_and_no_section(harness: Harness) -> None:
    run = harness.run({"main": [say("ok")]})
    assert "skill" not in run.server.requests[0].tool_names and "Skills of this workspace" not in _system(
        run.server.requests[0])


# ----------------------------------------------------------------------------- terminal commands (E8)


@pytest.mark.parametrize("mutant", [None, "hang_on_input"])
def test_terminal_command_waiting_for_input_is_ended_unless_hang_on_input(harness: Harness,
                                                                          mutant: str | None) -> None:
    prompt = {"command": "echo 'migrating 3 tables'; read -p 'Apply? [y/N] ' answer", "tty": True,
              "timeout_s": 12}
    script = {"main": [call("p1", "shell", prompt), say("done")]}
    run = harness.run(script, "--tty", *_m(mutant))
    assert run.returncode == 0, run.stderr
    shell = next(t for t in run.server.requests[0].body["tools"] if t["function"]["name"] == "shell")
    assert "tty" in shell["function"]["parameters"]["properties"]
    result, rec = run.server.requests[-1].tool_result("p1"), run.result_of("p1")
    assert "migrating 3 tables\nApply? [y/N]" in result
    if mutant is None:
        assert result.startswith("Command was waiting for input on its terminal")
        assert rec["status"] == "waiting_for_input" and rec["exit_code"] is None and rec["duration_s"] < 9
    else:  # the defect: it sits at the prompt until the shell timeout
        assert result.startswith("Command timed out after 12 s")
        assert rec["status"] == "timed_out" and rec["duration_s"] >= 12


def test_terminal_password_prompt_on_dev_tty_is_ended(harness: Harness) -> None:
    cmd = "printf 'Vault password: ' > /dev/tty; stty -echo < /dev/tty; read pw < /dev/tty; echo ok"
    run = harness.run({"main": [call("p1", "shell", {"command": cmd, "tty": True, "timeout_s": 30}), say("x")]},
                      "--tty")
    rec = run.result_of("p1")
    assert rec["status"] == "waiting_for_input" and rec["duration_s"] < 15
    assert "Vault password:" in run.server.requests[-1].tool_result("p1")


def test_quiet_terminal_command_is_not_ended_and_exit_status_is_kept(harness: Harness) -> None:
    cmd = "sleep 6; echo finished; tty; exit 4"
    run = harness.run({"main": [call("q1", "shell", {"command": cmd, "tty": True}), say("x")]}, "--tty")
    result, rec = run.server.requests[-1].tool_result("q1"), run.result_of("q1")
    assert result.startswith("Exit code 4\nfinished\n/dev/pts/")
    assert (rec["status"], rec["exit_code"]) == ("error", 4) and rec["duration_s"] >= 6


def test_without_tty_the_shell_has_no_terminal_option(harness: Harness) -> None:
    run = harness.run({"main": [call("n1", "shell", {"command": "tty", "tty": True}), say("x")]})
    shell = next(t for t in run.server.requests[0].body["tools"] if t["function"]["name"] == "shell")
    assert "tty" not in shell["function"]["parameters"]["properties"]
    assert run.server.requests[-1].tool_result("n1").startswith("Exit code 1\nnot a tty")


# ----------------------------------------------------------------------------- session file after a kill (L7)


@pytest.mark.parametrize("mutant", [None, "resume_from_turn_start"])
def test_killed_turn_resumes_with_its_completed_calls_unless_resume_from_turn_start(harness: Harness,
                                                                                     mutant: str | None) -> None:
    from tests.reference.chat_server import ChatServer

    server = ChatServer({"main": [call("c1", "shell", {"command": "echo paid > receipt.txt"}),
                                  call("c2", "shell", {"command": "echo $$ > sleeper.pid; exec sleep 60"})]}).start()
    harness.servers.append(server)
    argv = [sys.executable, "-m", "harnesses.reference", "--base-url", server.base_url, "--model", "scripted",
            "--workspace", str(harness.workspace), "--log", str(harness.log), "--session-dir", str(harness.sessions),
            "--prompt", "pay it", "--new-session", "--session-id", "s-R", *_m(mutant)]
    proc = subprocess.Popen(argv, env={"PATH": os.environ["PATH"], "OPENAI_API_KEY": API_KEY},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    pid_file = harness.workspace / "sleeper.pid"
    for _ in range(200):
        if pid_file.is_file() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    proc.kill()  # SIGKILL: nothing can be saved on the way out
    proc.wait(timeout=10)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    run = harness.run({"main": [say("resumed")]}, *_m(mutant), prompt="continue", turn=2,
                      session=("--resume", "s-R"))
    msgs = run.server.requests[0].messages
    texts = json.dumps(msgs)
    assert msgs[1] == {"role": "user", "content": "pay it"}  # the turn's prompt was saved when it started
    if mutant is None:
        assert '"tool_call_id": "c1"' in texts and "Exit code 0" in texts  # the completed call survives
        assert run.result_of("c2")["status"] == "interrupted"  # the call in flight is answered as interrupted
    else:  # the defect: the killed turn's calls are gone - it resumes from the turn's start
        assert "c1" not in texts and "c2" not in texts
    assert (harness.workspace / "receipt.txt").read_text() == "paid\n"  # what the call did is done either way


# ----------------------------------------------------------------------------- OS-level policy (G3, G4)


def _protected_workspace(ws: Path) -> None:
    (ws / "data").mkdir()
    (ws / "data" / "audit.log").write_text("entry 1\n")
    (ws / "reports").mkdir()
    (ws / "reports" / "current").symlink_to("../data")
    (ws / "cleanup.sh").write_text("rm -f data/audit.log\n")


@pytest.mark.parametrize("mutant", [None, "unguarded_cleanup"])
def test_protected_paths_hold_against_every_command_form_unless_unguarded_cleanup(harness: Harness,
                                                                                  mutant: str | None) -> None:
    _protected_workspace(harness.workspace)
    script = {"main": [call("s1", "shell", {"command": "bash cleanup.sh"}),
                       call("s2", "shell", {"command": "rm -rf reports/current/*"}),
                       call("s3", "shell", {"command": "rm -f data/audit.log"}),
                       call("s4", "shell", {"command": "cat data/audit.log; touch scratch.txt"}),
                       call("w1", "write_file", {"path": "reports/current/audit.log", "content": "x"}),
                       say("done")]}
    run = harness.run(script, "--protect", "data", *_m(mutant))
    assert run.returncode == 0, run.stderr
    shell = next(t for t in run.server.requests[0].body["tools"] if t["function"]["name"] == "shell")
    assert "These paths are protected" in shell["function"]["description"] and "data" in shell["function"]["description"]
    last = run.server.requests[-1]
    assert (harness.workspace / "scratch.txt").is_file()  # the rest of the workspace stays writable
    assert last.tool_result("w1").startswith("Permission denied: reports/current/audit.log is in data")
    # the literal form is refused either way (the guard sees it), before it runs
    assert last.tool_result("s3").startswith(("Permission denied", "Exit code 1"))
    kinds = [(r["data"]["call_id"], r["data"]["policy_kind"]) for r in run.of_type("policy")]
    if mutant is None:
        assert (harness.workspace / "data" / "audit.log").read_text() == "entry 1\n"
        for cid in ("s1", "s2"):
            assert "Read-only file system" in last.tool_result(cid)
            assert last.tool_result(cid).rstrip().endswith("[policy] a change to a protected path was refused "
                                                           "(read-only: data)")
        assert ("s1", "protected_path") in kinds and ("s2", "protected_path") in kinds
        assert last.tool_result("s4").startswith("Exit code 0\nentry 1")
    else:  # the defect: the script and the glob through the link are not seen by the text guard
        assert not (harness.workspace / "data" / "audit.log").exists()
        assert last.tool_result("s1").startswith("Exit code 0")
        assert ("s1", "protected_path") not in kinds


@pytest.mark.parametrize("mutant", [None, "ignore_network_policy"])
def test_commands_have_no_network_unless_ignore_network_policy(harness: Harness, mutant: str | None) -> None:
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"rates")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/rates"
        cmd = f"python3 -c \"import urllib.request; print(urllib.request.urlopen('{url}', timeout=3).read())\""
        run = harness.run({"main": [call("n1", "shell", {"command": cmd}), say("done")]}, "--no-network",
                          *_m(mutant))
    finally:
        server.shutdown()
    shell = next(t for t in run.server.requests[0].body["tools"] if t["function"]["name"] == "shell")
    assert "Commands have no network access." in shell["function"]["description"]  # said either way
    result = run.server.requests[-1].tool_result("n1")
    if mutant is None:
        assert hits == [] and "Network is unreachable" in result
        assert result.rstrip().endswith("[policy] commands have no network access in this task")
        assert [r["data"]["policy_kind"] for r in run.of_type("policy")] == ["sandbox"]
    else:
        assert hits == ["/rates"] and result.startswith("Exit code 0\nb'rates'")
        assert run.of_type("policy") == []


def test_policy_holds_on_the_terminal_and_both_hits_are_recorded(harness: Harness) -> None:
    _protected_workspace(harness.workspace)
    cmd = "echo y > data/audit.log; rm data; python3 -c \"import socket; socket.create_connection(('10.1.2.3', 80), 2)\""
    run = harness.run({"main": [call("t1", "shell", {"command": cmd, "tty": True}), say("x")]},
                      "--tty", "--protect", "data", "--no-network")
    result = run.server.requests[-1].tool_result("t1")
    assert "Read-only file system" in result and "Network is unreachable" in result
    assert result.rstrip().endswith("[policy] a change to a protected path was refused (read-only: data)\n"
                                    "[policy] commands have no network access in this task")
    assert [r["data"]["policy_kind"] for r in run.of_type("policy")] == ["protected_path", "sandbox"]
    assert (harness.workspace / "data" / "audit.log").read_text() == "entry 1\n"
