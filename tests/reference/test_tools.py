"""The reference harness's tool layer: honest shell results, truncation, file tools, deny rules,
and each tool-level mutant's one behavioural change."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from pathlib import Path

import pytest

from harnesses.reference import tools as T
from harnesses.reference.mcp_tools import (
    FUNCTION_NAME,
    drop_nested_field,
    find_receipts,
    fitted_name,
    unique_name,
)
from tests.reference.conftest import alive

ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
NOTICE = re.compile(r"\[(\w+) truncated: showing the first (\d+) of (\d+) bytes; (\d+) bytes omitted\."
                    r"(?: Full \w+ saved to ([^\s\]]+))?[^\]]*\]")


def sh(ws: Path, command: str, *, timeout: float = 10, mutant: str | None = None, call_id: str = "c1") -> T.ToolOutcome:
    return T.run_shell(command, cwd=ws, env=ENV, timeout_s=timeout, call_id=call_id, mutant=mutant)


# ----------------------------------------------------------------------------- shell


def test_nonzero_exit_is_in_text_and_structured_field(tmp_path: Path) -> None:
    out = sh(tmp_path, "echo 'BUILD SUCCESS'; exit 3")
    assert out.content.splitlines()[0] == "Exit code 3"
    assert "BUILD SUCCESS" in out.content
    assert (out.exit_code, out.is_error, out.status) == (3, True, "error")


def test_zero_exit_and_empty_output(tmp_path: Path) -> None:
    out = sh(tmp_path, "true")
    assert out.content == "Exit code 0\n(no output)"
    assert (out.exit_code, out.is_error) == (0, False)


def test_signal_death_reports_128_plus_signal(tmp_path: Path) -> None:
    out = sh(tmp_path, "kill -KILL $$")
    assert out.exit_code == 137 and out.is_error
    assert out.content.startswith("Exit code 137 (killed by signal SIGKILL)")


def test_stderr_is_kept_and_labelled(tmp_path: Path) -> None:
    out = sh(tmp_path, "echo out; echo 'E42: disk quota' >&2; exit 1")
    assert out.content == "Exit code 1\nout\n[stderr]\nE42: disk quota\n"


def test_timeout_kills_the_process_group_and_says_so(tmp_path: Path) -> None:
    started = time.monotonic()
    out = sh(tmp_path, "echo $$ > leader.pid; sleep 30 & echo $! > child.pid; echo started; wait", timeout=1)
    assert time.monotonic() - started < 5
    assert out.status == "timed_out" and out.is_error and out.exit_code is None
    assert "timed out after 1 s" in out.content and "started" in out.content
    for name in ("leader.pid", "child.pid"):
        pid = int((tmp_path / name).read_text())
        assert not alive(pid), f"{name} {pid} survived the timeout"


def test_large_output_notice_is_accurate_and_full_output_saved(tmp_path: Path) -> None:
    out = sh(tmp_path, "python3 -c \"import sys; sys.stdout.write('x' * 100000 + '\\nCHECKSUM=abc123\\n')\"",
             call_id="call/7")
    total = 100000 + len("\nCHECKSUM=abc123\n")
    m = NOTICE.search(out.content)
    assert m, out.content[-300:]
    stream, shown, claimed_total, omitted, saved = m.groups()
    assert (stream, int(shown), int(claimed_total), int(omitted)) == ("stdout", T.OUTPUT_LIMIT, total,
                                                                       total - T.OUTPUT_LIMIT)
    assert "CHECKSUM" not in out.content
    saved_path = Path(saved)
    assert saved_path.parent == tmp_path / ".tt-outputs" and saved_path.name == "call_7.stdout.txt"
    assert saved_path.read_bytes().endswith(b"CHECKSUM=abc123\n") and saved_path.stat().st_size == total
    assert (out.truncated, out.omitted_bytes, out.saved_paths) == (True, total - T.OUTPUT_LIMIT, [saved])
    body = out.content.split("\n", 1)[1]
    assert len(body[: body.index("\n[stdout truncated")].encode()) == T.OUTPUT_LIMIT


def test_truncation_cuts_at_a_utf8_boundary_and_counts_bytes(tmp_path: Path) -> None:
    out = sh(tmp_path, "python3 -c \"print('é' * 20000, end='')\"")  # 40000 bytes, 2 per char
    m = NOTICE.search(out.content)
    assert m
    shown = int(m.group(2))
    text = out.content.split("\n", 1)[1][: out.content.split("\n", 1)[1].index("\n[stdout")]
    assert "\ufffd" not in text and len(text.encode()) == shown and shown % 2 == 0
    assert int(m.group(4)) == 40000 - shown


def test_stderr_is_truncated_separately_and_stays_visible(tmp_path: Path) -> None:
    out = sh(tmp_path, "python3 -c \"import sys; print('o' * 30000); sys.stderr.write('REASON=R7\\n')\"; exit 2")
    assert "[stdout truncated" in out.content and "[stderr]\nREASON=R7" in out.content
    assert out.exit_code == 2


# ----------------------------------------------------------------------------- shell mutants


def test_hide_exit_code_reports_success(tmp_path: Path) -> None:
    out = sh(tmp_path, "echo 'BUILD SUCCESS'; exit 3", mutant="hide_exit_code")
    assert out.content == "BUILD SUCCESS\n"
    assert (out.exit_code, out.is_error, out.status) == (0, False, "ok")
    assert "exit" not in out.content.lower()


def test_drop_stderr_discards_stderr_only(tmp_path: Path) -> None:
    out = sh(tmp_path, "echo out; echo 'E42' >&2; exit 1", mutant="drop_stderr")
    assert out.content == "Exit code 1\nout\n"
    assert out.exit_code == 1 and out.is_error


def test_truncate_silently_gives_no_notice_and_saves_nothing(tmp_path: Path) -> None:
    out = sh(tmp_path, "python3 -c \"print('x' * 50000)\"", mutant="truncate_silently")
    assert len(out.content.split("\n", 1)[1].encode()) == T.OUTPUT_LIMIT
    assert "truncated" not in out.content and "omitted" not in out.content
    assert (out.truncated, out.omitted_bytes, out.saved_paths) == (None, None, [])
    assert not (tmp_path / ".tt-outputs").exists()


def test_misreport_omitted_halves_the_omitted_size(tmp_path: Path) -> None:
    out = sh(tmp_path, "python3 -c \"print('x' * 50000)\"", mutant="misreport_omitted")
    real_omitted = 50001 - T.OUTPUT_LIMIT
    m = NOTICE.search(out.content)
    assert m and int(m.group(4)) == real_omitted // 2 != real_omitted
    assert out.omitted_bytes == real_omitted // 2
    assert Path(m.group(5)).stat().st_size == 50001  # the saved file itself is complete


def test_ignore_timeout_never_kills(tmp_path: Path) -> None:
    started = time.monotonic()
    out = sh(tmp_path, "sleep 1.5; echo finished", timeout=0.3, mutant="ignore_timeout")
    assert time.monotonic() - started >= 1.5
    assert out.status == "ok" and out.exit_code == 0 and "finished" in out.content


# ----------------------------------------------------------------------------- file tools


def test_write_read_edit_roundtrip(tmp_path: Path) -> None:
    assert T.write_file(tmp_path, {"path": "sub/a.txt", "content": "alpha\nbeta\n"}).content.startswith("Wrote 11 bytes")
    assert T.read_file(tmp_path, {"path": "sub/a.txt"}, None).content == "alpha\nbeta\n"
    assert T.read_file(tmp_path, {"path": "sub/a.txt", "offset": 2, "limit": 1}, None).content == "beta\n"
    out = T.edit_file(tmp_path, {"path": "sub/a.txt", "old_string": "beta", "new_string": "gamma"})
    assert not out.is_error and (tmp_path / "sub/a.txt").read_text() == "alpha\ngamma\n"


def test_file_tool_errors_are_flagged(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("x x")
    assert T.read_file(tmp_path, {"path": "missing.txt"}, None).is_error
    amb = T.edit_file(tmp_path, {"path": "b.txt", "old_string": "x", "new_string": "y"})
    assert amb.is_error and "occurs 2 times" in amb.content
    assert (tmp_path / "b.txt").read_text() == "x x"
    assert T.edit_file(tmp_path, {"path": "b.txt", "old_string": "x", "new_string": "y", "replace_all": True}).content \
        .endswith("replaced 2 occurrences")
    assert T.edit_file(tmp_path, {"path": "b.txt", "old_string": "zzz", "new_string": "y"}).is_error


def test_read_file_truncation_notice_points_to_offset(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"y" * (T.READ_LIMIT + 1000))
    out = T.read_file(tmp_path, {"path": "big.txt"}, None)
    m = NOTICE.search(out.content)
    assert m and (int(m.group(2)), int(m.group(4))) == (T.READ_LIMIT, 1000)
    assert "offset/limit" in out.content and out.truncated and out.omitted_bytes == 1000


# ----------------------------------------------------------------------------- deny rules


@pytest.mark.parametrize(("rule", "tool", "args", "denied"), [
    ("rm -rf *", "shell", {"command": "rm -rf build"}, True),
    ("rm -rf *", "shell", {"command": "make && rm -rf build"}, True),  # a segment matches
    ("rm -rf *", "shell", {"command": "echo 'rm -rf' is dangerous"}, False),
    ("Bash(curl *)", "shell", {"command": "curl http://x"}, True),
    ("shell:git push*", "shell", {"command": "git push origin main"}, True),
    ("write_file:secrets/*", "write_file", {"path": "secrets/key.txt", "content": ""}, True),
    ("write_file:secrets/*", "write_file", {"path": "notes.txt", "content": ""}, False),
    ("write_file:secrets/*", "shell", {"command": "secrets/x"}, False),
    # A rule without wildcards is a command prefix, whatever the program's path or wrapper.
    ("rm", "shell", {"command": "rm data/a.log"}, True),
    ("rm", "shell", {"command": "/bin/rm -f ./data/b.log"}, True),
    ("rm", "shell", {"command": "cd data; sudo rm x"}, True),
    ("rm", "shell", {"command": "ls | FOO=1 rm -i"}, True),
    ("rm", "shell", {"command": "rmdir build"}, False),
    ("rm", "shell", {"command": "echo rm"}, False),
    ("rm", "shell", {"command": "python3 -c \"import os; os.remove('data/c.log')\""}, False),
    ("Bash(rm:*)", "shell", {"command": "/usr/bin/rm x"}, True),
    ("git push", "shell", {"command": "git push --force"}, True),
    ("git push", "shell", {"command": "git pull"}, False),
])
def test_deny_rules(rule: str, tool: str, args: dict, denied: bool) -> None:
    assert (T.find_denial([T.DenyRule.parse(rule)], tool, args) is not None) is denied


# ----------------------------------------------------------------------------- MCP helpers (pure)


def test_drop_nested_field_removes_exactly_one_nested_key() -> None:
    args = {"order": {"sku": "A-1", "qty": 2, "meta": {"gift": True}}, "note": "x"}
    out = drop_nested_field(args)
    assert out == {"order": {"sku": "A-1", "qty": 2}, "note": "x"}
    assert args["order"]["meta"] == {"gift": True}  # the caller's copy is untouched
    assert drop_nested_field({"a": 1, "b": "flat"}) == {"a": 1, "b": "flat"}


def test_find_receipts() -> None:
    value = {"ok": True, "receipt_id": "R-1", "lines": [{"confirmation": 77}, {"result": {"Receipt_No": "R-2"}}],
             "receipt_ok": True}
    assert find_receipts(value) == [("receipt_id", "R-1"), ("confirmation", 77), ("Receipt_No", "R-2")]


# ----------------------------------------------------------------------------- literal_deny_match


@pytest.mark.parametrize(("rule", "command", "literal_denied"), [
    ("rm", "rm data/a.log", True),                    # the denied prefix as written: still refused
    ("rm", "rm", True),
    ("rm", "/bin/rm -f ./data/b.log", False),         # path-qualified program
    ("rm", "cd data && rm c.log", False),             # a later segment of a compound command
    ("rm", "sudo rm x", False),                       # wrapper
    ("rm", "FOO=1 rm -i y", False),                   # env-assignment prefix
    ("rm", "rmdir build", False),
    ("python3 tools/publish.py", "python3 tools/publish.py", True),
    ("python3 tools/publish.py", "python3 tools/publish.py --dry-run", True),
    ("git push*", "git push origin main", True),
    ("git push*", "make && git push origin main", False),
])
def test_literal_deny_match_only_matches_the_command_as_written(rule: str, command: str,
                                                                literal_denied: bool) -> None:
    rules = [T.DenyRule.parse(rule)]
    args = {"command": command}
    faithful = T.find_denial(rules, "shell", args) is not None
    assert faithful is (command != "rmdir build")  # the faithful harness refuses every equivalent form
    assert (T.find_denial(rules, "shell", args, literal=True) is not None) is literal_denied


def test_literal_deny_match_leaves_other_tools_alone() -> None:
    rules = [T.DenyRule.parse("write_file:secrets/*")]
    args = {"path": "secrets/key.txt", "content": ""}
    assert T.find_denial(rules, "write_file", args, literal=True) is T.find_denial(rules, "write_file", args)
    assert T.find_denial(rules, "write_file", args) is not None


# ----------------------------------------------------------------------------- ack_failed_write


@pytest.mark.parametrize("mutant", [None, "ack_failed_write"])
def test_failed_write_is_an_error_unless_ack_failed_write(tmp_path: Path, mutant: str | None) -> None:
    (tmp_path / "config" / "app.yaml").mkdir(parents=True)  # a directory: no write can succeed
    out = T.write_file(tmp_path, {"path": "config/app.yaml", "content": "port: 8080\n"}, mutant)
    assert (tmp_path / "config" / "app.yaml").is_dir()  # nothing was written either way
    if mutant is None:
        assert (out.is_error, out.status) == (True, "error")
        assert out.content.startswith(f"write_file: cannot write {tmp_path / 'config' / 'app.yaml'}")
    else:
        assert (out.is_error, out.status) == (False, "ok")
        assert out.content == f"Wrote 11 bytes to {tmp_path / 'config' / 'app.yaml'}"
    # a write that succeeds is acknowledged identically by both
    ok = T.write_file(tmp_path, {"path": "other.yaml", "content": "a: 1\n"}, mutant)
    assert (ok.content, ok.is_error) == (f"Wrote 5 bytes to {tmp_path / 'other.yaml'}", False)
    assert (tmp_path / "other.yaml").read_text() == "a: 1\n"
    bad = T.write_file(tmp_path, {"path": "x.yaml", "content": 3}, mutant)
    assert bad.is_error  # an invalid call is still refused


# ----------------------------------------------------------------------------- persist_shell_cwd


def test_every_call_is_a_fresh_process_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert sh(tmp_path, "cd sub && pwd").content == f"Exit code 0\n{tmp_path / 'sub'}\n"
    assert sh(tmp_path, "pwd").content == f"Exit code 0\n{tmp_path}\n"


def test_persist_shell_cwd_keeps_the_folder_and_nothing_else(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    (ws / "sub" / "deeper").mkdir(parents=True)
    state = T.ShellState()
    before = set(Path(tempfile.gettempdir()).glob("tt-cwd-*"))

    def run(command: str) -> T.ToolOutcome:
        return T.run_shell(command, cwd=ws, env=ENV, timeout_s=10, call_id="c", mutant="persist_shell_cwd",
                           state=state)

    first = run("cd sub; export X=1; echo started; exit 3")
    assert (first.content, first.exit_code) == ("Exit code 3\nstarted\n", 3)  # status and output unchanged
    assert state.cwd == ws / "sub"
    assert run('pwd; echo "X=${X:-unset}"').content == f"Exit code 0\n{ws / 'sub'}\nX=unset\n"
    run("cd deeper")
    assert run("pwd").content == f"Exit code 0\n{ws / 'sub' / 'deeper'}\n"
    (ws / "sub" / "deeper").rmdir()  # a folder that is gone: back to the workspace
    assert run("pwd").content == f"Exit code 0\n{ws}\n"
    big = run("cd sub; head -c 20000 /dev/zero | tr '\\0' x")
    assert big.saved_paths and Path(big.saved_paths[0]).parent == ws / T.OUTPUTS_DIR  # saved in the workspace
    assert not set(Path(tempfile.gettempdir()).glob("tt-cwd-*")) - before  # the cwd files are removed


# ----------------------------------------------------------------------------- MCP wire names


class _Tool:
    def __init__(self, name: str):
        self.name = name


def test_wire_names_are_valid_unique_and_stable() -> None:
    long_a = "reserve_inventory_for_the_outbound_shipment_on_the_priority_express_lane"
    long_b = long_a.replace("express", "standard")
    taken: dict[str, tuple[str, _Tool]] = {}
    for server, tool in [("shop", "submit"), ("shop", long_a), ("shop", long_b), ("shop", "orders_create"),
                         ("shop", "orders.create"), ("shop.eu", "submit"), ("shop_eu", "submit")]:
        taken[unique_name(server, tool, taken)] = (server, _Tool(tool))
    assert len(taken) == 7 and all(FUNCTION_NAME.match(n) for n in taken)
    def hashed(server: str, tool: str) -> str:
        return "_" + hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]

    by_tool = {(s, t.name): n for n, (s, t) in taken.items()}
    # valid names no other tool holds stay as they are
    assert [by_tool[k] for k in [("shop", "submit"), ("shop", "orders_create"), ("shop_eu", "submit")]] == [
        "mcp__shop__submit", "mcp__shop__orders_create", "mcp__shop_eu__submit"]
    # the others are fitted and carry the hash of their real name
    for key in [("shop", long_a), ("shop", long_b), ("shop", "orders.create"), ("shop.eu", "submit")]:
        assert by_tool[key].endswith(hashed(*key)) and len(by_tool[key]) <= 64, key
    assert unique_name("shop", long_a, taken) == next(n for n, (_, t) in taken.items() if t.name == long_a)
    # the fitted names alone collide: what collide_tool_names registers under
    assert fitted_name("shop", long_a) == fitted_name("shop", long_b)
    assert fitted_name("shop", "orders.create") == "mcp__shop__orders_create"
    assert fitted_name("shop.eu", "submit") == fitted_name("shop_eu", "submit")
