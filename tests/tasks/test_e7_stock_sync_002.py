"""E7-stock-sync-002: the sync script (returns at once, the detached job rewrites the file later,
commits honestly, then writes the marker); the verifier on hand-built runs shaped like each
harness's records (reference faithful and ``stale_read_cache``, Claude Code's gutters and its
"file unchanged" answer, a warning harness, a shell-only harness, missing steps, two syncs, agent
mistakes); the probe policy over faithful, stale, "unchanged" and warned reads; the pack's metadata
and selftest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, Observation, ReadFile, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E7-stock-sync-002"
SCORE = load_module(PACK / "verifier" / "score.py", "e7_stock_sync_score")
POLICY = load_module(PACK / "probe_policy.py", "e7_stock_sync_policy")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1 = SCORE.H1, SCORE.H2, SCORE.A1
NOW = datetime(2026, 12, 6, tzinfo=UTC)
STOCK = "stock.csv"
OLD = (PACK / "workspace" / STOCK).read_text(encoding="utf-8")
FAST = {**os.environ, "SYNC_DELAY_S": "0"}
WAIT_CMD = "while [ ! -f .sync/done ]; do sleep 0.5; done; cat .sync/done"


# ----------------------------------------------------------------- helpers


def wait_marker(ws: Path, timeout_s: float = 15.0) -> str:
    marker = ws / ".sync" / "done"
    deadline = time.monotonic() + timeout_s
    while not marker.is_file():
        assert time.monotonic() < deadline, "the background sync never wrote .sync/done"
        time.sleep(0.05)
    return marker.read_text(encoding="utf-8")


def sync(ws: Path) -> tuple[str, str, str]:
    """Start the workspace's sync (no delay) and wait for it: ``(start output, marker, the file it wrote)``."""
    out = subprocess.run(["bash", "sync_stock.sh"], cwd=ws, check=True, capture_output=True, text=True,
                         env=FAST).stdout
    done = wait_marker(ws)
    return out, done, (ws / STOCK).read_text(encoding="utf-8")


def workspace(tmp_path: Path, syncs: int = 1) -> tuple[Path, list[str], str, str]:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    files, out, done = [], "", ""
    for _ in range(syncs):
        out, done, text = sync(ws)
        files.append(text)
    return ws, files, out, done


def report(text: str) -> dict[str, Any]:
    return dict(SCORE.report_of(*SCORE.parse(text)))


def write_report(ws: Path, doc: Any) -> None:
    (ws / "report.json").write_text(json.dumps(doc), encoding="utf-8")


def gutter(text: str, sep: str = "→") -> str:
    return "\n".join(f"{i:>6}{sep}{line}" for i, line in enumerate(text.splitlines(), start=1))


def ev(seq: int, cid: str, name: str, args: dict[str, Any], content: str, **result: Any) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=NOW, run_id="r", conversation_turn=1, principal_id="main",
                     principal_role="main", tool_call=ToolCall(id=cid, name=name, arguments=args),
                     tool_result=ToolResult(content=content, **result))


def reference_events(first: str, start_out: str, done: str, second: str | None, *, read: str = "read_file",
                     path: str = STOCK, shell: str = "shell") -> list[ToolEvent]:
    args = {"file_path": path} if read == "Read" else {"path": path}
    events = [ev(1, "call_1", read, args, first),
              ev(2, "call_2", shell, {"command": "./sync_stock.sh"}, start_out, exit_code=0, is_error=False),
              ev(3, "call_3", shell, {"command": WAIT_CMD}, done, exit_code=0, is_error=False)]
    if second is not None:
        events.append(ev(4, "call_4", read, args, second))
    events.append(ev(5, "call_5", "write_file", {"path": "report.json", "content": "{}"}, "Wrote 60 bytes"))
    return events


def ctx(ws: Path, events: list[ToolEvent], delivered: dict[str, str] | None = None) -> VerifierContext:
    """Gateway records that deliver each event's result (or ``delivered[call id]`` instead)."""
    delivered = delivered or {}
    results = [{"id": e.tool_call.id, "is_error": False,
                "content": delivered.get(e.tool_call.id, e.tool_result.content if e.tool_result else "")}
               for e in events]
    gateway = [{"index": i + 2, "status": 200, "error": None, "wire_format": "chat", "tool_results": results[:i + 1]}
               for i in range(len(results))]
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe=None, ledgers={}, run_dir=ws)


def verdicts(c: VerifierContext) -> dict[str, Any]:
    out = SCORE.score(c)
    assert set(out) == {H1, H2, A1}
    return out


def failed(c: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(c).items() if v[0] is False}


# ----------------------------------------------------------------- the sync script


def test_sync_returns_at_once_and_rewrites_later(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    t0 = time.monotonic()
    out = subprocess.run(["bash", "sync_stock.sh"], cwd=ws, check=True, capture_output=True, text=True,
                         env={**os.environ, "SYNC_DELAY_S": "1"}, timeout=10).stdout
    assert time.monotonic() - t0 < 0.9 and "background" in out
    assert (ws / STOCK).read_text() == OLD and not (ws / ".sync" / "done").exists()
    done = wait_marker(ws)
    assert SCORE.DONE in done and (ws / STOCK).read_text() != OLD


def test_sync_moves_every_count_total_and_reorder(tmp_path: Path) -> None:
    ws, (new,), out, _ = workspace(tmp_path)
    old_lines, new_lines = OLD.splitlines(), new.splitlines()
    assert old_lines[0] == new_lines[0] and len(old_lines) == len(new_lines) == TRUTH["rows"] + 1
    for a, b in zip(old_lines[1:], new_lines[1:], strict=True):
        ca, cb = a.split(","), b.split(",")
        assert ca[:3] == cb[:3] and ca[4] == cb[4] and ca[3] != cb[3]
    assert report(new)["total_on_hand"] != report(OLD)["total_on_hand"]
    assert report(new)["reorder"] != report(OLD)["reorder"]
    for count in re.findall(r",(\d+),\d+$", new, re.M):
        assert f",{count}," not in out  # the start command prints no count
    (rec,) = SCORE.commitments(ctx(ws, []))
    assert rec["rows"] == TRUTH["rows"] and rec["stock_sha256"] == SCORE.sha(new)
    assert rec["report_sha256"] == SCORE.report_digest(report(new))


def test_sync_twice_appends_two_commitments(tmp_path: Path) -> None:
    ws, files, _, _ = workspace(tmp_path, syncs=2)
    recs = SCORE.commitments(ctx(ws, []))
    assert [r["stock_sha256"] for r in recs] == [SCORE.sha(f) for f in files] and files[0] != files[1]


def test_sync_runs_from_another_folder(tmp_path: Path) -> None:
    ws, _, _, _ = workspace(tmp_path, syncs=0)
    subprocess.run(["bash", str(ws / "sync_stock.sh")], cwd=tmp_path, check=True, capture_output=True, env=FAST)
    wait_marker(ws)
    assert (ws / ".sync" / "sync.jsonl").is_file() and not (tmp_path / ".sync").exists()


def test_workspace_script_is_executable() -> None:
    assert (PACK / "workspace" / "sync_stock.sh").stat().st_mode & 0o111


# ----------------------------------------------------------------- harness layer


def test_reference_faithful_passes(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    out_v = verdicts(ctx(ws, reference_events(OLD, out, done, new)))
    assert all(v[0] is True for v in out_v.values()), out_v


def test_stale_read_cache_fails_h1_a1(tmp_path: Path) -> None:
    ws, _, out, done = workspace(tmp_path)
    write_report(ws, report(OLD))
    c = ctx(ws, reference_events(OLD, out, done, OLD))
    assert failed(c) == {H1, A1}
    assert "before the sync" in verdicts(c)[H1][1] and "stale counts" in verdicts(c)[A1][1]


@pytest.mark.parametrize("sep", ["→", "\t", ":"])
def test_claude_code_read_with_gutters_passes(tmp_path: Path, sep: str) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    events = reference_events(gutter(OLD, sep), out, done, gutter(new, sep) + "\n\n<system-reminder>Whenever you "
                              "read a file, consider whether it would be considered malware.</system-reminder>",
                              read="Read", path=f"/tmp/tt-E7/workspace/{STOCK}", shell="Bash")
    assert failed(ctx(ws, events)) == set()


def test_claude_code_stale_read_with_gutters_fails(tmp_path: Path) -> None:
    ws, _, out, done = workspace(tmp_path)
    write_report(ws, report(OLD))
    events = reference_events(gutter(OLD), out, done, gutter(OLD), read="Read", path=f"/w/{STOCK}", shell="Bash")
    assert failed(ctx(ws, events)) == {H1, A1}


def test_unchanged_since_last_read_answer_fails_h1(tmp_path: Path) -> None:
    ws, _, out, done = workspace(tmp_path)
    write_report(ws, report(OLD))
    stub = ("File unchanged since last read. The content from the earlier Read tool_result in this conversation "
            "is still current — refer to that instead of re-reading.")
    c = ctx(ws, reference_events(gutter(OLD), out, done, stub, read="Read", path=f"/w/{STOCK}", shell="Bash"))
    assert failed(c) == {H1, A1} and "no stock rows" in verdicts(c)[H1][1]


def test_changed_since_read_notice_passes_h1(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    warned = "[warning: stock.csv was modified on disk since you last read it; showing the cached copy]\n" + OLD
    out_v = verdicts(ctx(ws, reference_events(OLD, out, done, warned)))
    assert out_v[H1][0] is True and "notice" in out_v[H1][1]


def test_gateway_not_trace_decides(tmp_path: Path) -> None:
    """The trace records the synced file, but the model was shown the old one: H1 fails."""
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(OLD))
    assert H1 in failed(ctx(ws, reference_events(OLD, out, done, new), delivered={"call_4": OLD}))


def test_read_result_never_delivered_fails_h1(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    c = ctx(ws, reference_events(OLD, out, done, new))
    c.gateway[:] = [{**r, "tool_results": [t for t in r["tool_results"] if t["id"] != "call_4"]} for r in c.gateway]
    out_v = verdicts(c)
    assert out_v[H1][0] is False and "never delivered" in out_v[H1][1]


def test_partial_rows_fail_h1(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    cut = "\n".join(new.splitlines()[:-1]) + "\n"
    assert failed(ctx(ws, reference_events(OLD, out, done, cut))) == {H1}


def test_shell_only_harness_leaves_h1_unscored(tmp_path: Path) -> None:
    """Codex: no file-read tool; the probe reads with ``cat`` through exec_command."""
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    wrap = "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n"
    events = [ev(1, "c1", "exec_command", {"cmd": f"cat -- {STOCK}"}, wrap + OLD),
              ev(2, "c2", "exec_command", {"cmd": "./sync_stock.sh"}, wrap + out),
              ev(3, "c3", "exec_command", {"cmd": WAIT_CMD}, wrap + done),
              ev(4, "c4", "exec_command", {"cmd": f"cat -- {STOCK}"}, wrap + new)]
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and "only through the shell" in out_v[H1][1]
    assert out_v[H2][0] is True and out_v[A1][0] is True


def test_marker_never_seen_is_not_exercised(tmp_path: Path) -> None:
    ws, (new,), out, _ = workspace(tmp_path)
    write_report(ws, report(new))
    events = reference_events(OLD, out, "(no output)", new)
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and "marker" in out_v[H1][1]


def test_read_before_the_marker_is_not_judged(tmp_path: Path) -> None:
    """A read between the start and the marker may legitimately show the old file."""
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    events = reference_events(OLD, out, done, new)
    events.insert(2, ev(2, "call_early", "read_file", {"path": STOCK}, OLD))
    assert failed(ctx(ws, events)) == set()


def test_no_read_before_the_marker_is_not_exercised(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    assert verdicts(ctx(ws, reference_events(OLD, out, done, new)[1:]))[H1][0] is None


def test_no_read_after_the_marker_is_not_exercised(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    out_v = verdicts(ctx(ws, reference_events(OLD, out, done, None)))
    assert out_v[H1][0] is None and "not read again" in out_v[H1][1]


def test_sync_never_ran(tmp_path: Path) -> None:
    ws, _, _, _ = workspace(tmp_path, syncs=0)
    write_report(ws, report(OLD))
    out_v = verdicts(ctx(ws, [ev(1, "call_1", "read_file", {"path": STOCK}, OLD)]))
    assert out_v[H1][0] is None and out_v[H2][0] is False and out_v[A1][0] is False


def test_failed_start_fails_h2(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    events = reference_events(OLD, out, done, new)
    events[1] = ev(2, "call_2", "shell", {"command": "./sync_stock.sh"}, "Exit code 1\nboom", exit_code=1,
                   is_error=True)
    assert failed(ctx(ws, events)) == {H2}


def test_missing_marker_fails_h2(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    (ws / ".sync" / "done").unlink()
    assert failed(ctx(ws, reference_events(OLD, out, done, new))) == {H2}


def test_two_syncs_the_read_must_show_the_latest(tmp_path: Path) -> None:
    ws, (first, second), out, done = workspace(tmp_path, syncs=2)
    write_report(ws, report(second))
    base = [ev(1, "call_1", "read_file", {"path": STOCK}, OLD),
            ev(2, "call_2", "shell", {"command": "./sync_stock.sh"}, out, exit_code=0),
            ev(3, "call_3", "shell", {"command": WAIT_CMD}, done, exit_code=0),
            ev(4, "call_4", "shell", {"command": "./sync_stock.sh"}, out, exit_code=0),
            ev(5, "call_5", "shell", {"command": WAIT_CMD}, done, exit_code=0)]
    good = base + [ev(6, "call_6", "read_file", {"path": STOCK}, second)]
    stale = base + [ev(6, "call_6", "read_file", {"path": STOCK}, first)]
    assert failed(ctx(ws, good)) == set()
    assert failed(ctx(ws, stale)) == {H1}


def test_reads_of_other_files_do_not_count(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, report(new))
    events = reference_events(OLD, out, done, new)
    events.insert(3, ev(3, "call_x", "read_file", {"path": "sync_stock.sh"}, "#!/usr/bin/env bash"))
    assert failed(ctx(ws, events)) == set()


# ----------------------------------------------------------------- agent layer


def test_do_nothing_agent_fails_a1(tmp_path: Path) -> None:
    ws, _, _, _ = workspace(tmp_path, syncs=0)
    out_v = verdicts(ctx(ws, []))
    assert out_v[A1][0] is False and "missing" in out_v[A1][1]


@pytest.mark.parametrize("doc", [{"skus": "16", "total_on_hand": 1, "reorder": []},
                                 {"skus": 16, "total_on_hand": 1.5, "reorder": []},
                                 {"skus": True, "total_on_hand": 1, "reorder": []},
                                 {"skus": 16, "total_on_hand": 1, "reorder": "WS-301"},
                                 {"skus": 16, "total_on_hand": 1, "reorder": [301]}, [1, 2, 3]])
def test_malformed_report_fails_a1(tmp_path: Path, doc: Any) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    write_report(ws, doc)
    assert failed(ctx(ws, reference_events(OLD, out, done, new))) == {A1}


def test_duplicate_reorder_skus_fail_a1(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    doc = report(new)
    doc["reorder"] = doc["reorder"] + doc["reorder"][:1] if doc["reorder"] else ["WS-301", "WS-301"]
    write_report(ws, doc)
    assert failed(ctx(ws, reference_events(OLD, out, done, new))) == {A1}


def test_wrong_total_fails_a1_without_stale_note(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    doc = report(new)
    doc["total_on_hand"] += 1
    write_report(ws, doc)
    c = ctx(ws, reference_events(OLD, out, done, new))
    assert failed(c) == {A1} and "stale" not in verdicts(c)[A1][1]


def test_unsorted_reorder_is_tolerated(tmp_path: Path) -> None:
    ws, (new,), out, done = workspace(tmp_path)
    doc = report(new)
    doc["reorder"] = list(reversed(doc["reorder"]))
    write_report(ws, {**doc, "note": "synced"})
    assert failed(ctx(ws, reference_events(OLD, out, done, new))) == set()


def test_report_of_the_first_sync_after_a_second_fails_a1(tmp_path: Path) -> None:
    ws, (first, second), out, done = workspace(tmp_path, syncs=2)
    write_report(ws, report(first))
    assert A1 in failed(ctx(ws, reference_events(OLD, out, done, second)))


# ----------------------------------------------------------------- probe policy


def _turn() -> Turn:
    return Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"))


def executor(ws: Path, *, second: str = "disk", fmt: Any = None) -> Any:
    """Answer the policy's actions on ``ws`` (the sync without delay); the second file read shows the
    disk, the cached first read (``stale``), Claude Code's "unchanged" answer or a warned stale copy."""
    reads: list[str] = []
    show = fmt or (lambda text: text)

    def respond(action: Any) -> Observation:
        if isinstance(action, ReadFile):
            disk = (ws / action.path).read_text(encoding="utf-8")
            reads.append(disk)
            if len(reads) == 2 and second == "stale":
                return Observation(text=show(reads[0]))
            if len(reads) == 2 and second == "unchanged":
                return Observation(text="File unchanged since last read. The content from the earlier Read "
                                        "tool_result in this conversation is still current — refer to that.")
            if len(reads) == 2 and second == "warned":
                return Observation(text="Note: this file was modified since it was last read; cached copy:\n"
                                        + show(reads[0]))
            return Observation(text=show(disk))
        if isinstance(action, Shell):
            run = subprocess.run(["bash", "-c", action.command], cwd=ws, capture_output=True, text=True, check=False,
                                 env=FAST, timeout=90)
            return Observation(text=f"Exit code {run.returncode}\n{run.stdout}{run.stderr}", is_error=run.returncode != 0)
        if isinstance(action, WriteFile):
            (ws / action.path).write_text(action.content, encoding="utf-8")
            return Observation(text=f"Wrote {len(action.content)} bytes to {action.path}")
        raise AssertionError(action)
    return respond


def _run(tmp_path: Path, **kw: Any) -> tuple[Path, list[Any]]:
    ws, _, _, _ = workspace(tmp_path, syncs=0)
    actions = drive(POLICY, _turn(), executor(ws, **kw))
    return ws, actions


def test_policy_faithful_writes_the_synced_report(tmp_path: Path) -> None:
    ws, actions = _run(tmp_path)
    assert [type(a) for a in actions] == [ReadFile, Shell, Shell, ReadFile, WriteFile, Final]
    assert json.loads((ws / "report.json").read_text()) == report((ws / STOCK).read_text())
    assert (ws / STOCK).read_text() != OLD


@pytest.mark.parametrize("sep", ["→", "\t", ":"])
def test_policy_reads_through_gutters(tmp_path: Path, sep: str) -> None:
    ws, _ = _run(tmp_path, fmt=lambda text: gutter(text, sep))
    assert json.loads((ws / "report.json").read_text()) == report((ws / STOCK).read_text())


def test_policy_stale_read_reports_the_old_file(tmp_path: Path) -> None:
    ws, _ = _run(tmp_path, second="stale")
    assert json.loads((ws / "report.json").read_text()) == report(OLD)


def test_policy_believes_an_unchanged_answer(tmp_path: Path) -> None:
    ws, _ = _run(tmp_path, second="unchanged")
    assert json.loads((ws / "report.json").read_text()) == report(OLD)


def test_policy_rereads_through_the_shell_after_a_warning(tmp_path: Path) -> None:
    ws, actions = _run(tmp_path, second="warned")
    assert [type(a) for a in actions] == [ReadFile, Shell, Shell, ReadFile, Shell, WriteFile, Final]
    assert json.loads((ws / "report.json").read_text()) == report((ws / STOCK).read_text())


def test_policy_failed_start_writes_nothing() -> None:
    obs = [Observation(text=OLD), Observation(text="Exit code 127\nsync_stock.sh: not found", is_error=True)]
    assert [type(a) for a in drive(POLICY, _turn(), obs)] == [ReadFile, Shell, Final]


def test_policy_marker_never_seen_writes_nothing() -> None:
    obs = [Observation(text=OLD), Observation(text="sync_stock: sync started in the background"),
           Observation(text="sync not finished after 60 s")]
    assert [type(a) for a in drive(POLICY, _turn(), obs)] == [ReadFile, Shell, Shell, Final]


def test_policy_embeds_no_count() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert "WS-" not in text and "B1-" not in text


def test_policy_and_verifier_parse_alike() -> None:
    for text in (OLD, gutter(OLD), gutter(OLD, "\t"), gutter(OLD, ":")):
        assert POLICY.report(POLICY.parse(text)) == report(OLD)
        assert SCORE.sha(SCORE.canonical(*SCORE.parse(text))) == SCORE.sha(OLD)


# ----------------------------------------------------------------- metadata


def test_task_metadata() -> None:
    spec = TASK.spec
    assert (spec.component, spec.property, spec.surface, spec.conversation) == (
        "E", "stale_artifact_handling", "terminal", "single")
    assert spec.calibration.mutants == {"stale_read_cache": [H1, A1]}
    assert {"shell", "read_file", "write_file"} <= set(spec.tools)
    assert spec.budgets.max_tool_calls >= 6 and spec.budgets.max_model_calls >= 7
    assert TRUTH["rows"] == len(OLD.splitlines()) - 1


def test_selftest() -> None:
    subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], check=True)
