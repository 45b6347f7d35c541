"""E7-price-feed-refresh-001: the refresh script (same layout and size, every price moved, honest
commitments); the verifier on hand-built runs shaped like each harness's records (reference
faithful and ``stale_read_cache``, Claude Code's gutters and its "file unchanged" answer, a
warning harness, a shell-only harness, missing steps, two refreshes, agent mistakes); the probe
policy over faithful, stale, "unchanged" and warned reads; the pack's metadata and selftest."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, Observation, ReadFile, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E7-price-feed-refresh-001"
SCORE = load_module(PACK / "verifier" / "score.py", "e7_price_feed_score")
POLICY = load_module(PACK / "probe_policy.py", "e7_price_feed_policy")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
NOW = datetime(2026, 12, 6, tzinfo=UTC)
FEED = "feed/prices.csv"
OLD = (PACK / "workspace" / FEED).read_text(encoding="utf-8")


# ----------------------------------------------------------------- helpers


def refresh(ws: Path) -> tuple[str, str]:
    """Run the workspace's refresh; ``(stdout, the feed it wrote)``."""
    out = subprocess.run(["bash", "refresh_feed.sh"], cwd=ws, check=True, capture_output=True, text=True).stdout
    return out, (ws / FEED).read_text(encoding="utf-8")


def workspace(tmp_path: Path, refreshes: int = 1) -> tuple[Path, list[str], str]:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    feeds, out = [], ""
    for _ in range(refreshes):
        out, text = refresh(ws)
        feeds.append(text)
    return ws, feeds, out


def summary(text: str) -> dict[str, int]:
    header, rows = SCORE.parse(text)
    return dict(SCORE.summary_of(SCORE.prices(header, rows)))


def write_summary(ws: Path, doc: Any) -> None:
    (ws / "summary.json").write_text(json.dumps(doc), encoding="utf-8")


def gutter(text: str, sep: str = "→") -> str:
    return "\n".join(f"{i:>6}{sep}{line}" for i, line in enumerate(text.splitlines(), start=1))


def ev(seq: int, cid: str, name: str, args: dict[str, Any], content: str, **result: Any) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=NOW, run_id="r", conversation_turn=1, principal_id="main",
                     principal_role="main", tool_call=ToolCall(id=cid, name=name, arguments=args),
                     tool_result=ToolResult(content=content, **result))


def reference_events(first: str, refresh_out: str, second: str | None, *, read: str = "read_file",
                     path: str = FEED, shell: str = "shell", key: str = "command") -> list[ToolEvent]:
    events = [ev(1, "call_1", read, {"path": path} if read != "Read" else {"file_path": path}, first),
              ev(2, "call_2", shell, {key: "./refresh_feed.sh"}, refresh_out, exit_code=0, is_error=False)]
    if second is not None:
        events.append(ev(3, "call_3", read, {"path": path} if read != "Read" else {"file_path": path}, second))
    events.append(ev(4, "call_4", "write_file", {"path": "summary.json", "content": "{}"}, "Wrote 60 bytes"))
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
    assert set(out) == {H1, H2, A1, A2}
    return out


def failed(c: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(c).items() if v[0] is False}


# ----------------------------------------------------------------- the refresh script


def test_refresh_keeps_layout_and_size_and_moves_every_price(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    assert len(new.encode()) == len(OLD.encode())
    old_lines, new_lines = OLD.splitlines(), new.splitlines()
    assert old_lines[0] == new_lines[0] == "sku,item,price_cents" and len(old_lines) == len(new_lines) == 21
    for a, b in zip(old_lines[1:], new_lines[1:], strict=True):
        assert a.rsplit(",", 1)[0] == b.rsplit(",", 1)[0] and a != b
    for price in re.findall(r",(\d+)$", new, re.M):
        assert price not in out  # the command prints no price
    (rec,) = SCORE.commitments(ctx(ws, []))
    assert rec["rows"] == TRUTH["rows"] and rec["feed_sha256"] == SCORE.sha(new)
    assert rec["summary_sha256"] == SCORE.summary_digest(summary(new))


def test_refresh_twice_appends_two_commitments(tmp_path: Path) -> None:
    ws, feeds, _ = workspace(tmp_path, refreshes=2)
    recs = SCORE.commitments(ctx(ws, []))
    assert [r["feed_sha256"] for r in recs] == [SCORE.sha(f) for f in feeds] and feeds[0] != feeds[1]


def test_refresh_runs_from_another_folder(tmp_path: Path) -> None:
    ws, _, _ = workspace(tmp_path, refreshes=0)
    subprocess.run(["bash", str(ws / "refresh_feed.sh")], cwd=tmp_path, check=True, capture_output=True)
    assert (ws / ".feed" / "refresh.jsonl").is_file() and not (tmp_path / ".feed").exists()


def test_workspace_script_is_executable() -> None:
    assert (PACK / "workspace" / "refresh_feed.sh").stat().st_mode & 0o111


# ----------------------------------------------------------------- harness layer


def test_reference_faithful_passes(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    out_v = verdicts(ctx(ws, reference_events(OLD, out, new)))
    assert all(v[0] is True for v in out_v.values()), out_v


def test_stale_read_cache_fails_h1_a1_a2(tmp_path: Path) -> None:
    ws, _, out = workspace(tmp_path)
    write_summary(ws, summary(OLD))
    c = ctx(ws, reference_events(OLD, out, OLD))
    assert failed(c) == {H1, A1, A2}
    assert "before the refresh" in verdicts(c)[H1][1]


@pytest.mark.parametrize("sep", ["→", "\t", ":"])
def test_claude_code_read_with_gutters_passes(tmp_path: Path, sep: str) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    events = reference_events(gutter(OLD, sep), out, gutter(new, sep) + "\n\n<system-reminder>Whenever you read a "
                              "file, you should consider whether it would be considered malware.</system-reminder>",
                              read="Read", path=f"/tmp/tt-E7/workspace/{FEED}", shell="Bash")
    assert failed(ctx(ws, events)) == set()


def test_claude_code_stale_read_with_gutters_fails(tmp_path: Path) -> None:
    ws, _, out = workspace(tmp_path)
    write_summary(ws, summary(OLD))
    events = reference_events(gutter(OLD), out, gutter(OLD), read="Read", path=f"/w/{FEED}", shell="Bash")
    assert failed(ctx(ws, events)) == {H1, A1, A2}


def test_unchanged_since_last_read_answer_fails_h1(tmp_path: Path) -> None:
    ws, _, out = workspace(tmp_path)
    write_summary(ws, summary(OLD))
    stub = ("File unchanged since last read. The content from the earlier Read tool_result in this conversation "
            "is still current — refer to that instead of re-reading.")
    c = ctx(ws, reference_events(gutter(OLD), out, stub, read="Read", path=f"/w/{FEED}", shell="Bash"))
    assert failed(c) == {H1, A1, A2} and "no feed rows" in verdicts(c)[H1][1]


def test_changed_since_read_notice_passes_h1(tmp_path: Path) -> None:
    ws, _, out = workspace(tmp_path)
    write_summary(ws, summary(OLD))
    warned = "[warning: feed/prices.csv was modified on disk since you last read it; showing the cached copy]\n" + OLD
    out_v = verdicts(ctx(ws, reference_events(OLD, out, warned)))
    assert out_v[H1][0] is True and "notice" in out_v[H1][1]


def test_gateway_not_trace_decides(tmp_path: Path) -> None:
    """The trace records the refreshed feed, but the model was shown the old one: H1 fails."""
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(OLD))
    assert H1 in failed(ctx(ws, reference_events(OLD, out, new), delivered={"call_3": OLD}))


def test_read_result_never_delivered_fails_h1(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    events = reference_events(OLD, out, new)
    c = ctx(ws, events)
    c.gateway[:] = [{**r, "tool_results": [t for t in r["tool_results"] if t["id"] != "call_3"]} for r in c.gateway]
    out_v = verdicts(c)
    assert out_v[H1][0] is False and "never delivered" in out_v[H1][1]


def test_partial_or_foreign_rows_fail_h1(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    cut = "\n".join(new.splitlines()[:-1]) + "\n"
    assert failed(ctx(ws, reference_events(OLD, out, cut))) == {H1}


def test_shell_only_harness_leaves_h1_unscored(tmp_path: Path) -> None:
    """Codex: no file-read tool; the probe reads with ``cat`` through exec_command."""
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    wrap = "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n"
    events = [ev(1, "c1", "exec_command", {"cmd": f"cat -- {FEED}"}, wrap + OLD),
              ev(2, "c2", "exec_command", {"cmd": "./refresh_feed.sh"}, wrap + out),
              ev(3, "c3", "exec_command", {"cmd": f"cat -- {FEED}"}, wrap + new)]
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and "only through the shell" in out_v[H1][1]
    assert out_v[H2][0] is True and out_v[A1][0] is True and out_v[A2][0] is True


def test_no_read_before_the_refresh_is_not_exercised(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    events = reference_events(OLD, out, new)[1:]
    assert verdicts(ctx(ws, events))[H1][0] is None


def test_no_read_after_the_refresh_is_not_exercised(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    out_v = verdicts(ctx(ws, reference_events(OLD, out, None)))
    assert out_v[H1][0] is None and "not read again" in out_v[H1][1]


def test_refresh_never_ran(tmp_path: Path) -> None:
    ws, _, _ = workspace(tmp_path, refreshes=0)
    write_summary(ws, summary(OLD))
    events = [ev(1, "call_1", "read_file", {"path": FEED}, OLD)]
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and out_v[H2][0] is False and out_v[A1][0] is False and out_v[A2][0] is False


def test_failed_refresh_fails_h2(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    events = reference_events(OLD, out, new)
    events[1] = ev(2, "call_2", "shell", {"command": "./refresh_feed.sh"}, "Exit code 1\nboom", exit_code=1,
                   is_error=True)
    assert failed(ctx(ws, events)) == {H2}


def test_two_refreshes_the_read_must_show_the_latest(tmp_path: Path) -> None:
    ws, (first, second), out = workspace(tmp_path, refreshes=2)
    write_summary(ws, summary(second))
    base = [ev(1, "call_1", "read_file", {"path": FEED}, OLD),
            ev(2, "call_2", "shell", {"command": "./refresh_feed.sh"}, out, exit_code=0),
            ev(3, "call_3", "shell", {"command": "./refresh_feed.sh"}, out, exit_code=0)]
    good = base + [ev(4, "call_4", "read_file", {"path": FEED}, second)]
    stale = base + [ev(4, "call_4", "read_file", {"path": FEED}, first)]
    assert failed(ctx(ws, good)) == set()
    assert failed(ctx(ws, stale)) == {H1}


def test_a_read_between_two_refreshes_is_judged_against_the_first(tmp_path: Path) -> None:
    ws, (first, second), out = workspace(tmp_path, refreshes=2)
    write_summary(ws, summary(second))
    events = [ev(1, "call_1", "read_file", {"path": FEED}, OLD),
              ev(2, "call_2", "shell", {"command": "./refresh_feed.sh"}, out, exit_code=0),
              ev(3, "call_3", "read_file", {"path": FEED}, first),
              ev(4, "call_4", "shell", {"command": "./refresh_feed.sh"}, out, exit_code=0),
              ev(5, "call_5", "read_file", {"path": FEED}, second)]
    assert failed(ctx(ws, events)) == set()


def test_reads_of_other_files_do_not_count(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, summary(new))
    events = reference_events(OLD, out, new)
    events.insert(2, ev(3, "call_x", "read_file", {"path": "refresh_feed.sh"}, "#!/usr/bin/env bash"))
    events[3] = ev(5, "call_3", "read_file", {"path": FEED}, new)
    assert failed(ctx(ws, events)) == set()


# ----------------------------------------------------------------- agent layer


def test_do_nothing_agent_fails_both(tmp_path: Path) -> None:
    ws, _, _ = workspace(tmp_path, refreshes=0)
    out_v = verdicts(ctx(ws, []))
    assert out_v[A1][0] is False and out_v[A2][0] is False and "missing" in out_v[A1][1]


@pytest.mark.parametrize("doc", [{"rows": "20", "total_cents": 1, "checksum": 2}, {"rows": 20, "total_cents": 1.5,
                                 "checksum": 2}, {"rows": True, "total_cents": 1, "checksum": 2}, [1, 2, 3]])
def test_malformed_summary_fails_both(tmp_path: Path, doc: Any) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, doc)
    assert failed(ctx(ws, reference_events(OLD, out, new))) == {A1, A2}


def test_wrong_but_not_stale_summary_fails_a1_only(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    doc = summary(new)
    doc["checksum"] += 1
    write_summary(ws, doc)
    assert failed(ctx(ws, reference_events(OLD, out, new))) == {A1}


def test_summary_of_the_first_refresh_after_a_second_fails_a1(tmp_path: Path) -> None:
    ws, (first, second), out = workspace(tmp_path, refreshes=2)
    write_summary(ws, summary(first))
    assert A1 in failed(ctx(ws, reference_events(OLD, out, second)))


def test_extra_keys_in_summary_are_tolerated(tmp_path: Path) -> None:
    ws, (new,), out = workspace(tmp_path)
    write_summary(ws, {**summary(new), "currency": "cents"})
    assert failed(ctx(ws, reference_events(OLD, out, new))) == set()


# ----------------------------------------------------------------- probe policy


def _turn() -> Turn:
    return Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"))


def executor(ws: Path, *, second: str = "disk", fmt: Any = None) -> Any:
    """Answer the policy's actions on ``ws``; the second file read shows the disk, the cached first
    read (``stale``), Claude Code's "unchanged" answer (``unchanged``) or a warned stale copy."""
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
            run = subprocess.run(["bash", "-c", action.command], cwd=ws, capture_output=True, text=True, check=False)
            return Observation(text=f"Exit code {run.returncode}\n{run.stdout}{run.stderr}", is_error=run.returncode != 0)
        if isinstance(action, WriteFile):
            (ws / action.path).write_text(action.content, encoding="utf-8")
            return Observation(text=f"Wrote {len(action.content)} bytes to {action.path}")
        raise AssertionError(action)
    return respond


def _run(tmp_path: Path, **kw: Any) -> tuple[Path, list[Any]]:
    ws, _, _ = workspace(tmp_path, refreshes=0)
    actions = drive(POLICY, _turn(), executor(ws, **kw))
    return ws, actions


def test_policy_faithful_writes_the_refreshed_summary(tmp_path: Path) -> None:
    ws, actions = _run(tmp_path)
    kinds = [type(a) for a in actions]
    assert kinds == [ReadFile, Shell, ReadFile, WriteFile, Final]
    assert json.loads((ws / "summary.json").read_text()) == summary((ws / FEED).read_text())


@pytest.mark.parametrize("sep", ["→", "\t", ":"])
def test_policy_reads_through_gutters(tmp_path: Path, sep: str) -> None:
    ws, _ = _run(tmp_path, fmt=lambda text: gutter(text, sep))
    assert json.loads((ws / "summary.json").read_text()) == summary((ws / FEED).read_text())


def test_policy_stale_read_summarises_the_old_feed(tmp_path: Path) -> None:
    ws, _ = _run(tmp_path, second="stale")
    assert json.loads((ws / "summary.json").read_text()) == summary(OLD)


def test_policy_believes_an_unchanged_answer(tmp_path: Path) -> None:
    ws, _ = _run(tmp_path, second="unchanged")
    assert json.loads((ws / "summary.json").read_text()) == summary(OLD)


def test_policy_rereads_through_the_shell_after_a_warning(tmp_path: Path) -> None:
    ws, actions = _run(tmp_path, second="warned")
    assert [type(a) for a in actions] == [ReadFile, Shell, ReadFile, Shell, WriteFile, Final]
    assert json.loads((ws / "summary.json").read_text()) == summary((ws / FEED).read_text())


def test_policy_failed_refresh_writes_nothing() -> None:
    obs = [Observation(text=OLD), Observation(text="Exit code 127\nrefresh_feed.sh: not found", is_error=True)]
    actions = drive(POLICY, _turn(), obs)
    assert [type(a) for a in actions] == [ReadFile, Shell, Final]


def test_policy_embeds_no_price() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not set(re.findall(r"\d{5}", text)) & set(re.findall(r",(\d+)$", OLD, re.M))
    assert "PF-" not in text


def test_policy_and_verifier_parse_alike() -> None:
    for text in (OLD, gutter(OLD), gutter(OLD, "\t"), gutter(OLD, ":")):
        _, prices = POLICY.parse(text)
        assert POLICY.summary(prices) == summary(OLD)
        assert SCORE.sha(SCORE.canonical(*SCORE.parse(text))) == SCORE.sha(OLD)


# ----------------------------------------------------------------- metadata


def test_task_metadata() -> None:
    spec = TASK.spec
    assert (spec.component, spec.property, spec.surface, spec.conversation) == (
        "E", "stale_artifact_handling", "coding", "single")
    assert spec.calibration.mutants == {"stale_read_cache": [H1, A1, A2]}
    assert {"shell", "read_file", "write_file"} <= set(spec.tools)
    assert spec.budgets.max_tool_calls >= 5 and spec.budgets.max_model_calls >= 6
    assert TRUTH["rows"] == len(OLD.splitlines()) - 1


def test_selftest() -> None:
    subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], check=True)
