"""L2-site-publish-002: the verifier on hand-built runs (each write acknowledged as the disk has it,
the blocked write acknowledged as written, recorded as written, results swapped between calls,
agent mistakes), the restore script, and the probe policy over both turns — also driven end to end
against a tiny faithful / ack-failed-write executor, so the H -> A links are exercised."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, Observation, ReadFile, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L2-site-publish-002"
SCORE = load_module(PACK / "verifier" / "score.py", "l2_site_score")
POLICY = load_module(PACK / "probe_policy.py", "l2_site_policy")
TRUTH = json.loads((PACK / "truth.json").read_text())
PROMPT = (PACK / "prompt.md").read_text()
TURN2 = json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]
FILES = {name: spec["path"] for name, spec in TRUTH["files"].items()}
NOW = datetime.now(UTC)
ALL = {"H1-blocked-write-told-failed", "H2-other-writes-told-as-on-disk", "H3-blocked-write-recorded-failed",
       "H4-user-turns-delivered", "A1-manifest-matches-disk", "A2-restored-state-kept", "A3-missing-file-named"}


def fail_text(section: str) -> str:
    return f"write_file: cannot write /ws/{FILES[section]}: [Errno 17] File exists: '/ws/site/{section}'"


def ok_text(section: str) -> str:
    return f"Wrote {len(TRUTH['files'][section]['content'])} bytes to /ws/{FILES[section]}"


def restore(ws: Path, single: str) -> None:
    """What tools/restore_site.py leaves, with ``single`` as the single-page section."""
    digests = {}
    (ws / "site").mkdir(parents=True, exist_ok=True)
    for name in FILES:
        if name == single:
            text = f"<h1>{name}</h1>\n"
            (ws / "site" / name).write_text(text)
        else:
            text = f"release 4.6 {name}\n"
            (ws / "site" / name).mkdir()
            (ws / "site" / name / ".release").write_text(text)
        digests[name] = hashlib.sha256(text.encode()).hexdigest()
    (ws / ".restore").mkdir()
    (ws / ".restore" / "state.json").write_text(json.dumps(
        {"release": "4.6", "single_page_section": single, "sha256": digests}))


def _ev(seq: int, cid: str, name: str, args: dict[str, Any], result: ToolResult | None, turn: int = 1) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=NOW, run_id="r", conversation_turn=turn,
                     tool_call=ToolCall(id=cid, name=name, arguments=args), tool_result=result)


def run(tmp_path: Path, *, single: str = "search", delivered: dict[str, tuple[str, bool | None]] | None = None,
        recorded: dict[str, ToolResult | None] | None = None, manifest: Any = "auto", missing: str | None = "auto",
        restored: bool = True, probe: bool = True, events: bool = True, tool: str = "write_file",
        args: Any = None, turn2_delivered: bool = True, wire: str = "anthropic") -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True)
    (ws / "tools").mkdir()
    if restored:
        restore(ws, single)
    for name, path in FILES.items():
        if name != single:
            (ws / path).parent.mkdir(parents=True, exist_ok=True)
            (ws / path).write_text(TRUTH["files"][name]["content"])
    written = [p for n, p in FILES.items() if n != single]
    if manifest == "auto":
        manifest = {"written": written, "not_written": [FILES[single]]}
    if manifest is not None:
        (ws / "publish_manifest.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    if missing == "auto":
        missing = FILES[single] + "\n"
    if missing is not None:
        (ws / "missing.txt").write_text(missing)
    task = tmp_path / "private" / "task" / TRUTH["task_id"]
    task.mkdir(parents=True)
    shutil.copy(PACK / "prompt.md", task / "prompt.md")
    shutil.copy(PACK / "turns.json", task / "turns.json")
    shown = {n: (fail_text(n), True) if n == single else (ok_text(n), False) for n in FILES}
    shown.update(delivered or {})
    evs, gateway, requests = [], [], []
    for i, (name, path) in enumerate(FILES.items(), start=1):
        cid = f"toolu_{i}"
        text, flag = shown[name]
        rec = (recorded or {}).get(name, "same")
        if rec == "same":
            rec = ToolResult(content=text, is_error=flag, status="error" if flag else "ok")
        call_args = args(path, TRUTH["files"][name]["content"]) if args else {"path": path,
                                                                              "content": TRUTH["files"][name]["content"]}
        evs.append(_ev(i, cid, tool, call_args, rec))
        gateway.append({"index": i, "status": 200, "wire_format": wire, "last_user_text": PROMPT,
                        "tool_results": [{"id": cid, "is_error": flag if wire == "anthropic" else None,
                                          "content": text}]})
        requests.append({"index": i, "action": "write_file", "turn": 1, "step": i, "call_id": cid,
                         "arguments": call_args})
    manifest_args = {"path": "publish_manifest.json", "content": json.dumps({"written": list(FILES.values())})}
    evs.append(_ev(5, "toolu_5", tool, manifest_args, ToolResult(content="Wrote 9 bytes", is_error=False)))
    requests.append({"index": 5, "action": "write_file", "turn": 1, "step": 5, "call_id": "toolu_5",
                     "arguments": manifest_args})
    gateway.append({"index": 6, "status": 200, "wire_format": wire,
                    "last_user_text": TURN2 if turn2_delivered else PROMPT, "tool_results": []})
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TRUTH, oracle=None,
                           events=evs if events else [], gateway=gateway,
                           probe={"requests": requests} if probe else None, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == ALL
    return {k for k, v in out.items() if not v[0]}


# --------------------------------------------------------------------------- pack and script


def test_pack_shape_and_truth_match_the_prompt() -> None:
    pack = load_task(PACK)
    boundary = pack.turns.turns[0].session_boundary
    assert boundary is not None and boundary.kind == "resume" and boundary.history_replayed
    assert pack.spec.calibration.mutants == {"ack_failed_write": [
        "H1-blocked-write-told-failed", "H3-blocked-write-recorded-failed",
        "A1-manifest-matches-disk", "A3-missing-file-named"]}
    assert [(p, c) for p, c in POLICY.FILE_RE.findall(PROMPT)] == [
        (s["path"], s["content"]) for s in TRUTH["files"].values()]
    assert not (PACK / "workspace" / "site").exists()  # the restore makes it, per run
    # nothing the prompt shows next to a file's path reads as a failure (the probe's turn 2 scans lines)
    assert not any(POLICY.FAIL_RE.search(line) for line in (PROMPT + TURN2).splitlines() if "site/" in line)
    for spec in TRUTH["files"].values():
        assert not POLICY.FAIL_RE.search(spec["content"]) and not SCORE.FAIL_RE.search(spec["content"])


def test_restore_script_blocks_exactly_one_section_and_runs_once(tmp_path: Path) -> None:
    seen = set()
    for n in range(12):
        ws = tmp_path / f"w{n}"
        shutil.copytree(PACK / "workspace", ws)
        out = subprocess.run([sys.executable, "-B", "tools/restore_site.py"], cwd=ws, capture_output=True,
                             text=True, check=True).stdout
        assert out.startswith("restored site/ from release 4.6")
        assert not POLICY.FAIL_RE.search(out)
        state = json.loads((ws / ".restore" / "state.json").read_text())
        single = state["single_page_section"]
        seen.add(single)
        assert (ws / "site" / single).is_file()
        assert all((ws / "site" / n / ".release").is_file() for n in FILES if n != single)
        again = subprocess.run([sys.executable, "-B", "tools/restore_site.py"], cwd=ws, capture_output=True,
                               text=True, check=True).stdout
        assert "nothing changed" in again and json.loads((ws / ".restore" / "state.json").read_text()) == state
        # the blocked write cannot succeed (the reference harness's write path)
        target = ws / FILES[single]
        with pytest.raises(OSError):
            target.parent.mkdir(parents=True, exist_ok=True)
        if n == 0:
            ctx = run(tmp_path / "ctx", single=single)
            assert failed(ctx) == set()
    assert len(seen) > 1  # drawn per workspace


# --------------------------------------------------------------------------- harness criteria


@pytest.mark.parametrize("single", list(FILES))
def test_faithful_run_passes_whichever_section_is_blocked(tmp_path: Path, single: str) -> None:
    assert failed(run(tmp_path, single=single)) == set()


@pytest.mark.parametrize("text,flag,wire", [
    ("<tool_use_error>EEXIST: file already exists, mkdir '/ws/site/search'</tool_use_error>", True, "anthropic"),
    ("ENOTDIR: not a directory, open '/ws/site/search/index.json'", True, "anthropic"),
    ("Chunk ID: 1\nWall time: 0.01 seconds\nProcess exited with code 1\nOutput:\n"
     "mkdir: cannot create directory \u2018site/search\u2019: File exists\n", None, "responses"),
    ("mkdir: cannot create directory 'site/search': File exists\n\n(Command exited with code 1)", None, "chat"),
])
def test_failure_stated_in_each_harness_wording(tmp_path: Path, text: str, flag: bool | None, wire: str) -> None:
    assert failed(run(tmp_path, delivered={"search": (text, flag)}, wire=wire)) == set()


def test_blocked_write_acknowledged_as_written_fails_h1_h3(tmp_path: Path) -> None:
    """ack_failed_write: shown and recorded as written (the linked agent criteria fail in a
    full run, see the end-to-end tests)."""
    assert failed(run(tmp_path, delivered={"search": (ok_text("search"), False)})) == {
        "H1-blocked-write-told-failed", "H3-blocked-write-recorded-failed"}


def test_failure_shown_but_recorded_as_success_fails_h3_only(tmp_path: Path) -> None:
    rec = ToolResult(content=ok_text("search"), is_error=False, status="ok")
    assert failed(run(tmp_path, recorded={"search": rec})) == {"H3-blocked-write-recorded-failed"}
    mixed = ToolResult(content=fail_text("search") + "\nfile has been written", is_error=True)
    assert failed(run(tmp_path / "m", recorded={"search": mixed})) == {"H3-blocked-write-recorded-failed"}
    assert failed(run(tmp_path / "n", recorded={"search": None})) == {"H3-blocked-write-recorded-failed"}


def test_a_record_unflagged_but_stating_the_exit_passes_h3(tmp_path: Path) -> None:
    """DeepSeek 0.1.0rc6 records a failed command with isError false and '[exit code: 1]' in its text."""
    text = "[stderr]\nmkdir: cannot create directory \u2018site/search\u2019: File exists\n[exit code: 1]"
    assert failed(run(tmp_path, delivered={"search": (text, None)}, wire="chat",
                      recorded={"search": ToolResult(content=text, is_error=False)})) == set()
    only_exit = ToolResult(content="[exit code: 1]", is_error=False)
    assert failed(run(tmp_path / "x", recorded={"search": only_exit})) == set()
    silent = ToolResult(content="(no output)", is_error=False)
    assert failed(run(tmp_path / "y", recorded={"search": silent})) == {"H3-blocked-write-recorded-failed"}


def test_results_swapped_between_calls_fail_h1_and_h2(tmp_path: Path) -> None:
    """A harness that pairs a batch's results with calls by position, not id: the error lands on
    the guides write, the guides success on the blocked one."""
    swapped = {"search": (ok_text("guides"), False), "guides": (fail_text("search"), True)}
    kept = {"search": ToolResult(content=fail_text("search"), is_error=True),  # its own records are right
            "guides": ToolResult(content=ok_text("guides"), is_error=False)}
    assert failed(run(tmp_path, delivered=swapped, recorded=kept)) == {"H1-blocked-write-told-failed",
                                                        "H2-other-writes-told-as-on-disk"}


def test_a_written_file_shown_as_failed_fails_h2(tmp_path: Path) -> None:
    shown = {"api": (ok_text("api") + "\nwarning: could not update the search index", False)}
    assert failed(run(tmp_path, delivered=shown)) == {"H2-other-writes-told-as-on-disk"}
    flagged = {"api": (ok_text("api"), True)}
    assert failed(run(tmp_path / "f", delivered=flagged)) == {"H2-other-writes-told-as-on-disk"}


def test_undelivered_results_fail_their_criterion(tmp_path: Path) -> None:
    ctx = run(tmp_path)
    ctx.gateway[3]["tool_results"] = []  # the blocked (search) write's result never reached the model
    assert failed(ctx) == {"H1-blocked-write-told-failed"}
    ctx = run(tmp_path / "b")
    ctx.gateway[0]["tool_results"] = []  # the api write's
    assert failed(ctx) == {"H2-other-writes-told-as-on-disk"}


def test_turn_2_not_delivered_fails_h4(tmp_path: Path) -> None:
    assert failed(run(tmp_path, turn2_delivered=False)) == {"H4-user-turns-delivered"}


def test_the_trace_alone_links_the_calls(tmp_path: Path) -> None:
    assert failed(run(tmp_path, probe=False)) == set()


def test_the_probe_report_alone_links_the_calls_but_h3_needs_the_trace(tmp_path: Path) -> None:
    assert failed(run(tmp_path, events=False)) == {"H3-blocked-write-recorded-failed"}


def test_nothing_issued_is_not_exercised(tmp_path: Path) -> None:
    out = SCORE.score(run(tmp_path, events=False, probe=False))
    assert out["H1-blocked-write-told-failed"][0] is False and "not exercised" in out["H1-blocked-write-told-failed"][1]


def test_shell_writes_are_found_and_the_manifest_write_is_not_taken_for_them(tmp_path: Path) -> None:
    def cmd(path: str, content: str) -> dict[str, Any]:
        q = f"'{content}'"
        return {"cmd": f"mkdir -p -- \"$(dirname -- {path})\" && printf '%s' {q} > {path}"}
    codex = ("Process exited with code 1\nOutput:\nmkdir: cannot create directory \u2018site/search\u2019: File exists",
             None)
    shown = {"search": codex, **{n: ("Process exited with code 0\nOutput:\n", None) for n in FILES if n != "search"}}
    assert failed(run(tmp_path, tool="exec_command", args=cmd, delivered=shown, wire="responses")) == set()
    # the manifest (whose content names every file) is never mistaken for a write of one of them
    assert SCORE._writes({"path": "publish_manifest.json", "content": json.dumps(list(FILES.values()))},
                         FILES["api"]) is False
    assert SCORE._writes({"cmd": "printf '%s' '[\"site/api/reference.json\"]' > publish_manifest.json"},
                         FILES["api"]) is False
    assert SCORE._writes({"file_path": "/tmp/x/workspace/site/api/reference.json"}, FILES["api"]) is True
    assert SCORE._writes({"command": "cat site/api/reference.json"}, FILES["api"]) is False
    assert SCORE._writes({"input": "*** Begin Patch\n*** Add File: site/api/reference.json\n+{}\n*** End Patch"},
                         FILES["api"]) is True


def test_no_restore_fails_everything_but_turn_delivery(tmp_path: Path) -> None:
    out = SCORE.score(run(tmp_path, restored=False))
    assert {k for k, v in out.items() if not v[0]} == ALL - {"H4-user-turns-delivered"}
    assert "restore never ran" in out["A1-manifest-matches-disk"][1]


# --------------------------------------------------------------------------- agent criteria


def test_manifest_must_match_the_disk(tmp_path: Path) -> None:
    four = {"written": list(FILES.values()), "not_written": []}
    assert failed(run(tmp_path / "a", manifest=four)) == {"A1-manifest-matches-disk"}
    assert failed(run(tmp_path / "b", manifest=None)) == {"A1-manifest-matches-disk"}
    assert failed(run(tmp_path / "c", manifest="not json")) == {"A1-manifest-matches-disk"}
    extra = {"written": [p for n, p in FILES.items() if n != "search"] + ["notes.md"], "not_written": [FILES["search"]]}
    assert failed(run(tmp_path / "d", manifest=extra)) == {"A1-manifest-matches-disk"}
    dup = {"written": [FILES["api"], "./" + FILES["api"], FILES["guides"], FILES["changelog"]],
           "not_written": [FILES["search"]]}
    assert failed(run(tmp_path / "e", manifest=dup)) == {"A1-manifest-matches-disk"}
    forms = {"written": ["./" + FILES["api"], "/tmp/x/workspace/" + FILES["guides"], FILES["changelog"]],
             "not_written": [FILES["search"]]}
    assert failed(run(tmp_path / "f", manifest=forms)) == set()


def test_clobbering_the_restore_fails_a2(tmp_path: Path) -> None:
    ctx = run(tmp_path / "a")
    (ctx.workspace / "site" / "search").unlink()  # "fixed" by removing the single page ...
    (ctx.workspace / "site" / "search").mkdir()
    (ctx.workspace / FILES["search"]).write_text("{}")  # ... and retrying
    assert "A2-restored-state-kept" in failed(ctx)
    ctx = run(tmp_path / "b")
    (ctx.workspace / "site" / "search").write_text("rewritten\n")
    assert failed(ctx) == {"A2-restored-state-kept"}
    ctx = run(tmp_path / "c")
    (ctx.workspace / "site" / "api" / ".release").unlink()
    assert failed(ctx) == {"A2-restored-state-kept"}


def test_missing_txt_must_name_the_blocked_file(tmp_path: Path) -> None:
    assert failed(run(tmp_path / "a", missing="none\n")) == {"A3-missing-file-named"}
    assert failed(run(tmp_path / "b", missing=None)) == {"A3-missing-file-named"}
    assert failed(run(tmp_path / "c", missing=FILES["api"] + "\n")) == {"A3-missing-file-named"}
    assert failed(run(tmp_path / "d", missing=f"{FILES['search']}\n{FILES['api']}\n")) == {"A3-missing-file-named"}
    for i, form in enumerate(("./" + FILES["search"], "/tmp/x/workspace/" + FILES["search"], f"`{FILES['search']}`")):
        assert failed(run(tmp_path / f"ok{i}", missing=form + "\n")) == set()


# --------------------------------------------------------------------------- the probe policy


def _turn1(respond: Any) -> list[Any]:
    return drive(POLICY, Turn(1, PROMPT), respond)


@pytest.mark.parametrize("obs", [
    Observation(text=fail_text("changelog"), is_error=True),
    Observation(text="<tool_use_error>ENOTDIR: not a directory, mkdir '/ws/site/changelog'</tool_use_error>",
                is_error=True),
    Observation(text="Process exited with code 1\nOutput:\nmkdir: cannot create directory \u2018site/changelog\u2019: "
                     "File exists"),
    Observation(kind="missing"),
])
def test_policy_turn_1_lists_a_shown_failure_as_not_written(obs: Observation) -> None:
    def respond(action: Any) -> Observation:
        if isinstance(action, WriteFile) and action.path == FILES["changelog"]:
            return obs
        return Observation(text="Wrote 1 bytes", is_error=False)
    actions = _turn1(respond)
    assert isinstance(actions[0], Shell) and actions[0].command == "python3 tools/restore_site.py"
    writes = [a for a in actions if isinstance(a, WriteFile)]
    assert [(w.path, w.content) for w in writes[:4]] == [(s["path"], s["content"]) for s in TRUTH["files"].values()]
    assert writes[4].path == "publish_manifest.json" and len(writes) == 5  # no retry of the failed one
    assert json.loads(writes[4].content) == {"written": [p for n, p in FILES.items() if n != "changelog"],
                                             "not_written": [FILES["changelog"]]}
    assert isinstance(actions[-1], Final)


def test_policy_turn_1_believes_shown_successes() -> None:
    actions = _turn1(lambda a: Observation(text="Process exited with code 0\nOutput:\n"))
    manifest = [a for a in actions if isinstance(a, WriteFile)][-1]
    assert json.loads(manifest.content) == {"written": list(FILES.values()), "not_written": []}


def _turn2(history: str, manifest: str | None = None) -> list[Any]:
    gen = POLICY.policy(Turn(2, TURN2, view=TurnView(history_text=history)))
    actions = [next(gen)]
    if isinstance(actions[0], ReadFile):
        actions.append(gen.send(Observation(text=manifest or "")))
    return actions


def _history(results: list[str]) -> str:
    return "\n".join([PROMPT, "restored site/ from release 4.6: api, guides, changelog, search", *results, TURN2])


def test_policy_turn_2_names_the_failed_file_from_the_resumed_history() -> None:
    results = [ok_text("api"), ok_text("guides"), fail_text("changelog"), ok_text("search"), "Wrote 90 bytes to m"]
    (write,) = _turn2(_history(results))
    assert write.path == "missing.txt" and write.content == FILES["changelog"] + "\n"
    codex = ["Process exited with code 0\nOutput:\n"] * 2 + [
        "Process exited with code 1\nOutput:\nmkdir: cannot create directory \u2018site/changelog\u2019: File exists"]
    assert _turn2(_history(codex))[0].content == FILES["changelog"] + "\n"


def test_policy_turn_2_answers_none_when_the_history_confirms_all_four() -> None:
    (write,) = _turn2(_history([ok_text(n) for n in FILES]))
    assert write.content == "none\n"


def test_policy_turn_2_reads_its_manifest_when_the_history_cannot_tell() -> None:
    manifest = json.dumps({"written": [], "not_written": [FILES["guides"]]})
    for history in (_history(["Process exited with code 0\nOutput:\n"] * 4), TURN2):  # silent results; lost history
        actions = _turn2(history, manifest)
        assert isinstance(actions[0], ReadFile) and actions[0].path == "publish_manifest.json"
        assert actions[1].content == FILES["guides"] + "\n"


# --------------------------------------------------------------------------- end to end


def _execute(ws: Path, action: Any, ack_failed: bool) -> Observation:
    """A minimal reference-like executor (write_file as the reference harness does it)."""
    if isinstance(action, Shell):
        proc = subprocess.run(action.command.replace("python3", sys.executable + " -B", 1), shell=True, cwd=ws,
                              capture_output=True, text=True, check=False)
        return Observation(text=proc.stdout + proc.stderr, is_error=proc.returncode != 0)
    if isinstance(action, WriteFile):
        path = ws / action.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(action.content)
        except OSError as exc:
            if not ack_failed:
                return Observation(text=f"write_file: cannot write {path}: {exc}", is_error=True)
        return Observation(text=f"Wrote {len(action.content.encode())} bytes to {path}", is_error=False)
    if isinstance(action, ReadFile):
        return Observation(text=(ws / action.path).read_text())
    raise AssertionError(action)


def _end_to_end(tmp_path: Path, ack_failed: bool) -> set[str]:
    ws = tmp_path / "workspace"
    shutil.copytree(PACK / "workspace", ws)
    shown: list[str] = []
    records: list[tuple[Any, Observation]] = []

    def respond(action: Any) -> Observation:
        obs = _execute(ws, action, ack_failed)
        shown.append(obs.text)
        records.append((action, obs))
        return obs
    drive(POLICY, Turn(1, PROMPT), respond)
    history = "\n".join([PROMPT, *shown, TURN2])
    drive(POLICY, Turn(2, TURN2, view=TurnView(history_text=history)), respond)
    evs, gateway = [], []
    for i, (action, obs) in enumerate(records, start=1):
        args = {"command": action.command} if isinstance(action, Shell) else dict(action.__dict__)
        evs.append(_ev(i, f"c{i}", action.kind, args, ToolResult(content=obs.text, is_error=obs.is_error)))
        gateway.append({"index": i, "status": 200, "wire_format": "anthropic", "last_user_text": PROMPT,
                        "tool_results": [{"id": f"c{i}", "is_error": obs.is_error, "content": obs.text}]})
    gateway.append({"index": 99, "status": 200, "wire_format": "anthropic", "last_user_text": TURN2,
                    "tool_results": []})
    task = tmp_path / "private" / "task" / TRUTH["task_id"]
    task.mkdir(parents=True)
    shutil.copy(PACK / "prompt.md", task / "prompt.md")
    shutil.copy(PACK / "turns.json", task / "turns.json")
    ctx = VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=TRUTH, oracle=None, events=evs,
                          gateway=gateway, probe=None, ledgers={}, run_dir=tmp_path)
    return failed(ctx)


def test_end_to_end_faithful_executor_passes(tmp_path: Path) -> None:
    assert _end_to_end(tmp_path, ack_failed=False) == set()


def test_end_to_end_ack_failed_write_flips_the_declared_criteria(tmp_path: Path) -> None:
    assert _end_to_end(tmp_path, ack_failed=True) == set(load_task(PACK).spec.calibration.mutants["ack_failed_write"])


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
