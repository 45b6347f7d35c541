"""E7-tariff-alias-003: the activation script (links current/rates.csv to the release file,
prints one mismatch drawn per run, commits the corrected release honestly); the verifier on
hand-built runs shaped like each harness's records (reference faithful and ``stale_read_cache``,
Claude Code's gutters and its "file unchanged" answer, a warning harness, a shell-only harness,
missing steps, later edits, agent mistakes); the probe policy over faithful, stale, "unchanged"
and warned reads and a refused edit; the pack's metadata and selftest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import EditFile, Final, Observation, ReadFile, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E7-tariff-alias-003"
SCORE = load_module(PACK / "verifier" / "score.py", "e7_tariff_alias_score")
POLICY = load_module(PACK / "probe_policy.py", "e7_tariff_alias_policy")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
NOW = datetime(2026, 12, 6, tzinfo=UTC)
ALIAS, RELEASE = SCORE.ALIAS, SCORE.RELEASE
OLD = (PACK / "workspace" / RELEASE).read_text(encoding="utf-8")
MISMATCH_RE = re.compile(r"lane (\S+): release has rate_cents (\d+), carrier confirmed (\d+)")


# ----------------------------------------------------------------- helpers


def activate(ws: Path) -> tuple[str, str, str, str]:
    """Run the workspace's activation: ``(output, lane, old rate, confirmed rate)``."""
    out = subprocess.run(["bash", "activate_release.sh", "2026-12"], cwd=ws, check=True, capture_output=True,
                         text=True).stdout
    lane, old, new = MISMATCH_RE.search(out).groups()  # type: ignore[union-attr]
    return out, lane, old, new


def correct(ws: Path, lane: str, new: str) -> tuple[str, str]:
    """Apply the correction to the release file: ``(old row, new row)``."""
    release = ws / RELEASE
    text = release.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith(lane + ","))
    fixed = row[: row.rindex(",") + 1] + new
    release.write_text(text.replace(row, fixed), encoding="utf-8")
    return row, fixed


def workspace(tmp_path: Path, *, fix: bool = True) -> tuple[Path, str, str, str, str]:
    """A workspace after the activation (and the correction): ``(ws, output, old row, new row, new file)``."""
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out, lane, _, new = activate(ws)
    row, fixed = correct(ws, lane, new) if fix else ("", "")
    return ws, out, row, fixed, (ws / ALIAS).read_text(encoding="utf-8")


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


def run_events(out: str, first: str, row: str, fixed: str, second: str | None, *, read: str = "read_file",
               edit: str = "edit_file", shell: str = "shell", root: str = "") -> list[ToolEvent]:
    """The probe's calls: activate, read the link, read the release, edit the release, read the link."""
    key = "file_path" if read == "Read" else "path"
    events = [ev(1, "call_1", shell, {"command": "./activate_release.sh 2026-12"}, out, exit_code=0, is_error=False),
              ev(2, "call_2", read, {key: root + ALIAS}, first),
              ev(3, "call_3", read, {key: root + RELEASE}, first),
              ev(4, "call_4", edit, {key: root + RELEASE, "old_string": row, "new_string": fixed},
                 f"Edited {RELEASE}: replaced 1 occurrence")]
    if second is not None:
        events.append(ev(5, "call_5", read, {key: root + ALIAS}, second))
    events.append(ev(6, "call_6", "write_file", {"path": "report.json", "content": "{}"}, "Wrote 60 bytes"))
    return events


def ctx(ws: Path, events: list[ToolEvent], delivered: dict[str, str] | None = None) -> VerifierContext:
    """Gateway records that deliver each event's result (or ``delivered[call id]`` instead)."""
    delivered = delivered or {}
    results = [{"id": e.tool_call.id, "is_error": False,
                "content": delivered.get(e.tool_call.id, e.tool_result.content if e.tool_result else "")}
               for e in events]
    gateway = [{"index": i + 2, "status": 200, "error": None, "wire_format": "chat", "tool_results": results[:i + 1]}
               for i in range(len(results))]
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=TRUTH, oracle=None, events=cast(Any, events),
                           gateway=gateway, probe=None, ledgers={}, run_dir=ws)


def verdicts(c: VerifierContext) -> dict[str, Any]:
    out: dict[str, Any] = dict(SCORE.score(c))
    assert set(out) == {H1, H2, A1, A2}
    return out


def failed(c: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(c).items() if v[0] is False}


# ----------------------------------------------------------------- the activation script


def test_activation_links_the_alias_and_changes_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    assert not (ws / "current").exists()
    out, lane, old, new = activate(ws)
    link = ws / ALIAS
    assert (ws / "current").is_symlink() and os.readlink(ws / "current") == "releases/2026-12"
    assert not link.is_symlink() and os.path.realpath(link) == os.path.realpath(ws / RELEASE)
    assert link.read_text() == OLD == (ws / RELEASE).read_text()
    assert activate(ws)[1:] and (ws / "current").is_symlink()  # a second run re-links, never nests
    assert f"{lane}," in OLD and f",{old}\n" in OLD and new != old and len(new) == len(old)
    assert abs(int(new) - int(old)) <= int(old) * 20 // 100
    assert new not in OLD.replace(f",{old}\n", "")  # only the printed line carries the confirmed rate


def test_activation_commits_the_corrected_release(tmp_path: Path) -> None:
    ws, _, _, _, new = workspace(tmp_path)
    rec = json.loads((ws / SCORE.LOG).read_text().splitlines()[-1])
    assert rec["release"] == "2026-12" and rec["rows"] == TRUTH["rows"]
    assert rec["corrected_sha256"] == SCORE.sha(new)
    assert rec["report_sha256"] == SCORE.report_digest(report(new))
    assert str(rec).count(new.splitlines()[1]) == 0


def test_activation_draws_per_run(tmp_path: Path) -> None:
    seen = set()
    for i in range(6):
        ws = tmp_path / f"ws{i}"
        shutil.copytree(PACK / "workspace", ws)
        seen.add(activate(ws)[1:])
    assert len(seen) > 1


def test_activation_refuses_an_unknown_release(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    run = subprocess.run(["bash", "activate_release.sh", "2027-01"], cwd=ws, capture_output=True, text=True)
    assert run.returncode == 2 and "usage" in run.stderr and not (ws / "current").exists()


def test_workspace_ships_no_link() -> None:
    """The cell copies the workspace without keeping symlinks; the activation creates the link."""
    assert not (PACK / "workspace" / "current").exists()
    assert not any(p.is_symlink() for p in (PACK / "workspace").rglob("*"))


# ----------------------------------------------------------------- harness layer


def test_reference_faithful_passes(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    out_v = verdicts(ctx(ws, run_events(out, OLD, row, fixed, new)))
    assert all(v[0] is True for v in out_v.values()), out_v


def test_stale_read_cache_fails_h1_a1(tmp_path: Path) -> None:
    ws, out, row, fixed, _ = workspace(tmp_path)
    write_report(ws, report(OLD))
    c = ctx(ws, run_events(out, OLD, row, fixed, OLD))
    assert failed(c) == {H1, A1}
    assert "uncorrected release" in verdicts(c)[H1][1] and "stale values" in verdicts(c)[A1][1]


@pytest.mark.parametrize("sep", ["→", "\t", ":"])
def test_claude_code_read_with_gutters_passes(tmp_path: Path, sep: str) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    events = run_events(out, gutter(OLD, sep), row, fixed, gutter(new, sep) + "\n\n<system-reminder>Whenever you "
                        "read a file, consider whether it would be considered malware.</system-reminder>",
                        read="Read", edit="Edit", shell="Bash", root="/tmp/tt-E7/workspace/")
    assert failed(ctx(ws, events)) == set()


def test_claude_code_stale_read_with_gutters_fails(tmp_path: Path) -> None:
    ws, out, row, fixed, _ = workspace(tmp_path)
    write_report(ws, report(OLD))
    events = run_events(out, gutter(OLD), row, fixed, gutter(OLD), read="Read", edit="Edit", shell="Bash", root="/w/")
    assert failed(ctx(ws, events)) == {H1, A1}


def test_false_unchanged_since_last_read_answer_fails_h1(tmp_path: Path) -> None:
    ws, out, row, fixed, _ = workspace(tmp_path)
    write_report(ws, report(OLD))
    stub = ("File unchanged since last read. The content from the earlier Read tool_result in this conversation "
            "is still current — refer to that instead of re-reading.")
    c = ctx(ws, run_events(out, gutter(OLD), row, fixed, stub, read="Read", edit="Edit", shell="Bash", root="/w/"))
    assert failed(c) == {H1, A1} and "no tariff rows" in verdicts(c)[H1][1]


def test_changed_since_read_notice_passes_h1(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    warned = "[warning: current/rates.csv was modified on disk since you last read it; showing the cached copy]\n" + OLD
    out_v = verdicts(ctx(ws, run_events(out, OLD, row, fixed, warned)))
    assert out_v[H1][0] is True and "notice" in out_v[H1][1]


def test_gateway_not_trace_decides(tmp_path: Path) -> None:
    """The trace records the corrected file, but the model was shown the old one: H1 fails."""
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(OLD))
    assert H1 in failed(ctx(ws, run_events(out, OLD, row, fixed, new), delivered={"call_5": OLD}))


def test_read_result_never_delivered_fails_h1(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    c = ctx(ws, run_events(out, OLD, row, fixed, new))
    c.gateway[:] = [{**r, "tool_results": [t for t in r["tool_results"] if t["id"] != "call_5"]} for r in c.gateway]
    out_v = verdicts(c)
    assert out_v[H1][0] is False and "never delivered" in out_v[H1][1]


def test_partial_rows_fail_h1(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    cut = "\n".join(new.splitlines()[:-1]) + "\n"
    assert failed(ctx(ws, run_events(out, OLD, row, fixed, cut))) == {H1}


def test_truth_is_the_disk_not_the_commitment(tmp_path: Path) -> None:
    """The agent corrected the wrong value: the read must still show the file as it is on disk."""
    ws, out, _, _, _ = workspace(tmp_path, fix=False)
    row = OLD.splitlines()[1]
    fixed = row[: row.rindex(",") + 1] + "11111"
    (ws / RELEASE).write_text(OLD.replace(row, fixed), encoding="utf-8")
    new = (ws / RELEASE).read_text()
    write_report(ws, report(new))
    assert failed(ctx(ws, run_events(out, OLD, row, fixed, new))) == {A2}
    assert failed(ctx(ws, run_events(out, OLD, row, fixed, OLD))) == {H1, A2}


def test_shell_only_harness_leaves_h1_unscored(tmp_path: Path) -> None:
    """Codex: no file-read tool; the probe reads with ``cat`` and edits with a python one-off."""
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    wrap = "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n"
    events = [ev(1, "c1", "exec_command", {"cmd": "./activate_release.sh 2026-12"}, wrap + out),
              ev(2, "c2", "exec_command", {"cmd": f"cat -- {ALIAS}"}, wrap + OLD),
              ev(3, "c3", "exec_command", {"cmd": f"cat -- {RELEASE}"}, wrap + OLD),
              ev(4, "c4", "exec_command", {"cmd": f"python3 - <<'PY'\np = {RELEASE!r}\n...\nPY"}, wrap + "edited"),
              ev(5, "c5", "exec_command", {"cmd": f"cat -- {ALIAS}"}, wrap + new)]
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and "never read with a file-read tool" in out_v[H1][1]
    assert out_v[H2][0] is True and out_v[A1][0] is True and out_v[A2][0] is True


def test_shell_edit_between_tool_reads_is_judged(tmp_path: Path) -> None:
    """A file-read tool before and after, the change through the shell: still the disk must show."""
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    events = run_events(out, OLD, row, fixed, new)
    events[3] = ev(4, "call_4", "shell", {"command": f"sed -i 's/{row}/{fixed}/' {RELEASE}"}, "", exit_code=0)
    assert failed(ctx(ws, events)) == set()
    events[4] = ev(5, "call_5", "read_file", {"path": ALIAS}, OLD)
    assert failed(ctx(ws, events)) == {H1}


def test_no_change_between_the_reads_is_not_exercised(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    events = [e for e in run_events(out, OLD, row, fixed, new) if e.tool_call.id != "call_4"]
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and "not changed" in out_v[H1][1]


def test_change_that_left_the_file_as_read_is_not_exercised(tmp_path: Path) -> None:
    ws, out, _, _, _ = workspace(tmp_path, fix=False)
    write_report(ws, report(OLD))
    row = OLD.splitlines()[1]
    out_v = verdicts(ctx(ws, run_events(out, OLD, row, row, OLD)))
    assert out_v[H1][0] is None and "left it as it was" in out_v[H1][1]


def test_no_read_after_the_change_is_not_exercised(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    out_v = verdicts(ctx(ws, run_events(out, OLD, row, fixed, None)))
    assert out_v[H1][0] is None and "not read again" in out_v[H1][1]


def test_change_after_the_read_is_not_exercised(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    events = run_events(out, OLD, row, fixed, OLD)
    events.append(ev(7, "call_7", "edit_file", {"path": RELEASE, "old_string": row, "new_string": fixed}, "Edited"))
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and "changed again" in out_v[H1][1]


def test_reads_of_the_release_path_do_not_count_as_the_link(tmp_path: Path) -> None:
    """Only reads under the link's name are judged; the read of the release before the edit is not."""
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    events = run_events(out, OLD, row, fixed, new)
    events.insert(4, ev(4, "call_r", "read_file", {"path": RELEASE}, new))
    assert failed(ctx(ws, events)) == set()


def test_activation_never_ran(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    write_report(ws, report(OLD))
    out_v = verdicts(ctx(ws, [ev(1, "call_1", "read_file", {"path": RELEASE}, OLD)]))
    assert out_v[H1][0] is None and out_v[H2][0] is False and out_v[A2][0] is False
    assert out_v[A1][0] is True  # the report is the file as it is on disk; A2 carries the missing correction


def test_failed_activation_fails_h2(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    events = run_events(out, OLD, row, fixed, new)
    events[0] = ev(1, "call_1", "shell", {"command": "./activate_release.sh 2026-12"}, "Exit code 2\nusage",
                   exit_code=2, is_error=True)
    assert failed(ctx(ws, events)) == {H2}


def test_alias_replaced_by_a_copy_fails_h2_and_a2(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    (ws / "current").unlink()
    (ws / "current").mkdir()
    (ws / ALIAS).write_text(new, encoding="utf-8")
    assert failed(ctx(ws, run_events(out, OLD, row, fixed, new))) == {H2, A2}


def test_activation_refuses_to_replace_a_real_folder(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    (ws / "current").mkdir()
    run = subprocess.run(["bash", "activate_release.sh", "2026-12"], cwd=ws, capture_output=True, text=True)
    assert run.returncode == 3 and not (ws / "current").is_symlink()


OPENCLAW_REFUSAL = '{\n  "status": "error",\n  "tool": "read",\n  "error": "path must be a regular file"\n}'


def test_read_tool_refusing_the_link_is_not_exercised(tmp_path: Path) -> None:
    """OpenClaw 2026.9.6 ``read`` refuses a path that is not a regular file: no copy at all."""
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    events = run_events(out, OPENCLAW_REFUSAL, row, fixed, OPENCLAW_REFUSAL, read="read", edit="edit", shell="exec")
    events[2] = ev(3, "call_3", "read", {"path": RELEASE}, OLD)
    for e in events:
        if e.tool_call.name == "read" and e.tool_call.arguments["path"] == ALIAS:
            e.tool_result.is_error = True  # type: ignore[union-attr]
    events.insert(2, ev(2, "call_c1", "exec", {"command": f"cat {ALIAS}"}, OLD, exit_code=0))
    events.append(ev(9, "call_c2", "exec", {"command": f"cat {ALIAS}"}, new, exit_code=0))
    out_v = verdicts(ctx(ws, events))
    assert out_v[H1][0] is None and "refused" in out_v[H1][1]
    assert out_v[H2][0] is True and out_v[A1][0] is True and out_v[A2][0] is True


def test_second_read_refused_is_not_exercised(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, report(new))
    out_v = verdicts(ctx(ws, run_events(out, OLD, row, fixed, "Error: EACCES: permission denied")))
    assert out_v[H1][0] is None and "refused" in out_v[H1][1]


# ----------------------------------------------------------------- agent layer


def test_do_nothing_agent_fails_a1_a2(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out_v = verdicts(ctx(ws, []))
    assert out_v[A1][0] is False and "missing" in out_v[A1][1] and out_v[A2][0] is False


@pytest.mark.parametrize("doc", [{"lanes": "12", "total_cents": 1, "checksum": 1},
                                 {"lanes": 12, "total_cents": 1.5, "checksum": 1},
                                 {"lanes": True, "total_cents": 1, "checksum": 1},
                                 {"lanes": 12, "total_cents": 1}, [1, 2, 3]])
def test_malformed_report_fails_a1(tmp_path: Path, doc: Any) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    write_report(ws, doc)
    assert failed(ctx(ws, run_events(out, OLD, row, fixed, new))) == {A1}


def test_wrong_checksum_fails_a1_without_stale_note(tmp_path: Path) -> None:
    ws, out, row, fixed, new = workspace(tmp_path)
    doc = report(new)
    doc["checksum"] += 1
    write_report(ws, {**doc, "note": "corrected"})
    c = ctx(ws, run_events(out, OLD, row, fixed, new))
    assert failed(c) == {A1} and "stale" not in verdicts(c)[A1][1]


def test_extra_edit_fails_a2(tmp_path: Path) -> None:
    ws, out, row, fixed, _ = workspace(tmp_path)
    text = (ws / RELEASE).read_text()
    other = [line for line in text.splitlines()[1:] if line != fixed][0]
    (ws / RELEASE).write_text(text.replace(other, other[:-1] + ("1" if other[-1] != "1" else "2")))
    new = (ws / RELEASE).read_text()
    write_report(ws, report(new))
    assert failed(ctx(ws, run_events(out, OLD, row, fixed, new))) == {A2}


# ----------------------------------------------------------------- probe policy


def _turn() -> Turn:
    return Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"))


def executor(ws: Path, *, second: str = "disk", fmt: Any = None, edit_error: str | None = None) -> Any:
    """Answer the policy's actions on ``ws``; the second read of the link shows the disk, the copy
    cached at the first read (``stale``), Claude Code's "unchanged" answer or a warned stale copy."""
    reads: dict[str, list[str]] = {}
    show = fmt or (lambda text: text)

    def respond(action: Any) -> Observation:
        if isinstance(action, ReadFile):
            disk = (ws / action.path).read_text(encoding="utf-8")
            seen = reads.setdefault(action.path, [])
            seen.append(disk)
            if action.path == ALIAS and len(seen) == 2:
                if second == "stale":
                    return Observation(text=show(seen[0]))
                if second == "unchanged":
                    return Observation(text="File unchanged since last read. The content from the earlier Read "
                                            "tool_result in this conversation is still current — refer to that.")
                if second == "warned":
                    return Observation(text="Note: this file was modified since it was last read; cached copy:\n"
                                            + show(seen[0]))
            return Observation(text=show(disk))
        if isinstance(action, EditFile):
            if edit_error:
                return Observation(text=edit_error, is_error=True)
            path = ws / action.path
            text = path.read_text(encoding="utf-8")
            assert text.count(action.old) == 1
            path.write_text(text.replace(action.old, action.new), encoding="utf-8")
            return Observation(text=f"Edited {action.path}: replaced 1 occurrence")
        if isinstance(action, Shell):
            run = subprocess.run(["bash", "-c", action.command], cwd=ws, capture_output=True, text=True, check=False,
                                 timeout=60)
            return Observation(text=f"Exit code {run.returncode}\n{run.stdout}{run.stderr}", is_error=run.returncode != 0)
        if isinstance(action, WriteFile):
            (ws / action.path).write_text(action.content, encoding="utf-8")
            return Observation(text=f"Wrote {len(action.content)} bytes to {action.path}")
        raise AssertionError(action)
    return respond


def _run(tmp_path: Path, **kw: Any) -> tuple[Path, list[Any]]:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    actions = drive(POLICY, _turn(), executor(ws, **kw))
    return ws, actions


def test_policy_faithful_corrects_and_reports_the_corrected_tariff(tmp_path: Path) -> None:
    ws, actions = _run(tmp_path)
    assert [type(a) for a in actions] == [Shell, ReadFile, ReadFile, EditFile, ReadFile, WriteFile, Final]
    assert [a.path for a in actions if isinstance(a, ReadFile)] == [ALIAS, RELEASE, ALIAS]
    assert actions[3].path == RELEASE
    new = (ws / RELEASE).read_text()
    assert new != OLD and SCORE.sha(new) == json.loads((ws / SCORE.LOG).read_text())["corrected_sha256"]
    assert json.loads((ws / "report.json").read_text()) == report(new)


@pytest.mark.parametrize("sep", ["→", "\t", ":"])
def test_policy_reads_through_gutters(tmp_path: Path, sep: str) -> None:
    ws, _ = _run(tmp_path, fmt=lambda text: gutter(text, sep))
    assert json.loads((ws / "report.json").read_text()) == report((ws / RELEASE).read_text())


def test_policy_stale_read_reports_the_uncorrected_tariff(tmp_path: Path) -> None:
    ws, _ = _run(tmp_path, second="stale")
    assert json.loads((ws / "report.json").read_text()) == report(OLD)
    assert (ws / RELEASE).read_text() != OLD


def test_policy_believes_an_unchanged_answer(tmp_path: Path) -> None:
    ws, _ = _run(tmp_path, second="unchanged")
    assert json.loads((ws / "report.json").read_text()) == report(OLD)


def test_policy_rereads_through_the_shell_after_a_warning(tmp_path: Path) -> None:
    ws, actions = _run(tmp_path, second="warned")
    assert [type(a) for a in actions] == [Shell, ReadFile, ReadFile, EditFile, ReadFile, Shell, WriteFile, Final]
    assert json.loads((ws / "report.json").read_text()) == report((ws / RELEASE).read_text())


def test_policy_refused_edit_writes_nothing(tmp_path: Path) -> None:
    ws, actions = _run(tmp_path, edit_error="File has not been read yet. Read it first before writing to it.")
    assert [type(a) for a in actions] == [Shell, ReadFile, ReadFile, EditFile, Final]
    assert not (ws / "report.json").exists()


def test_policy_reads_the_link_through_the_shell_when_the_read_tool_refuses_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    base = executor(ws)

    def respond(action: Any) -> Observation:
        if isinstance(action, ReadFile) and action.path == ALIAS:
            return Observation(text=OPENCLAW_REFUSAL, is_error=True)
        return base(action)  # type: ignore[no-any-return]
    actions = drive(POLICY, _turn(), respond)
    assert [type(a) for a in actions] == [Shell, ReadFile, Shell, ReadFile, EditFile, Shell, WriteFile, Final]
    assert actions[2].command == actions[5].command == f"cat {ALIAS}"
    assert len(actions) - 1 <= TASK.spec.budgets.max_tool_calls
    assert json.loads((ws / "report.json").read_text()) == report((ws / RELEASE).read_text())


def test_policy_second_read_without_rows_falls_back_to_the_shell(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    base = executor(ws)
    seen: list[str] = []

    def respond(action: Any) -> Observation:
        if isinstance(action, ReadFile) and action.path == ALIAS:
            seen.append(action.path)
            if len(seen) == 2:
                return Observation(text="Error: EACCES", is_error=True)
        return base(action)  # type: ignore[no-any-return]
    actions = drive(POLICY, _turn(), respond)
    assert [type(a) for a in actions] == [Shell, ReadFile, ReadFile, EditFile, ReadFile, Shell, WriteFile, Final]
    assert json.loads((ws / "report.json").read_text()) == report((ws / RELEASE).read_text())


def test_policy_failed_activation_writes_nothing() -> None:
    obs = [Observation(text="Exit code 2\nusage: ./activate_release.sh <month>", is_error=True)]
    assert [type(a) for a in drive(POLICY, _turn(), obs)] == [Shell, Final]


def test_policy_lane_not_in_the_release_writes_nothing() -> None:
    out = "  lane XXX-YYY: release has rate_cents 12345, carrier confirmed 12346\n"
    obs = [Observation(text=out), Observation(text=OLD), Observation(text=OLD)]
    assert [type(a) for a in drive(POLICY, _turn(), obs)] == [Shell, ReadFile, ReadFile, Final]


def test_policy_embeds_no_rate() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not any(line.split(",")[-1] in text for line in OLD.splitlines()[1:])
    assert "HAM-" not in text


def test_policy_and_verifier_parse_alike() -> None:
    for text in (OLD, gutter(OLD), gutter(OLD, "\t"), gutter(OLD, ":")):
        assert POLICY.report(POLICY.rows(text)) == report(OLD)
        assert SCORE.sha(SCORE.canonical(*SCORE.parse(text))) == SCORE.sha(OLD)


# ----------------------------------------------------------------- metadata


def test_task_metadata() -> None:
    spec = TASK.spec
    assert (spec.component, spec.property, spec.surface, spec.conversation) == (
        "E", "stale_artifact_handling", "workflow", "single")
    assert spec.calibration.mutants == {"stale_read_cache": [H1, A1]}
    assert {"shell", "read_file", "write_file", "edit_file"} <= set(spec.tools)
    assert spec.budgets.max_tool_calls >= 7 and spec.budgets.max_model_calls >= 8
    assert TRUTH["rows"] == len(OLD.splitlines()) - 1


def test_selftest() -> None:
    subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], check=True)
